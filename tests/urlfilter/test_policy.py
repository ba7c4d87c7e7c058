"""The URL filter's policy (issue 34): rule-file parser, the C rule matcher against a reference
written from the documented semantics, the allow list, and scans of real shared traces whose
expectations come from tshark's view of the trace (not from the code under test)."""
from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from urlfilter import canon
from urlfilter.policy import (Policy, RuleError, compile_rules, parse_rule, parse_rules,
                              reference_match)
from webtap.records.message import MESSAGE_DTYPE

SHARED = Path(__file__).resolve().parents[3] / "shared"
ANGLER = SHARED / "traces-tls" / "httpreplay" / "2015-10-12-Angler-EK-sends-Bedep-traffic.pcap"
JA4_TRACE = SHARED / "traces-tls" / "ja4" / "tls-handshake.pcapng"
JA4_JSON = SHARED / "traces-tls" / "ja4" / "python_test_testdata_tls-handshake.pcapng.json"
UT1 = SHARED / "blacklists" / "ut1"
URLFILTER = [sys.executable, "-m", "urlfilter.cli"]


def _need(p: Path) -> Path:
    if not p.exists():
        pytest.skip(f"shared file missing: {p}")
    return p


# ---- parser ----------------------------------------------------------------------------------
def test_parse_every_key_and_normalise():
    rs = parse_rules('# a comment\n\ncut client=10.1.2.3/8,2001:db8::1 port=80,8000-8099 # tail\n'
                     'log ext=.EXE,msi url=HTTP://WWW.Example.COM:80/a/ ua="Mozilla/5.0 (X11, \\"q\\")"\n'
                     'allow sni=Example.ORG. ja4=T13D1516H2_8daaf6152771_b186095e22b6 proto=tls,QUIC\n')
    assert [r.line for r in rs] == [3, 4, 5]
    assert rs[0].action == "cut" and rs[0].conds == {"client": ["10.0.0.0/8", "2001:db8::1/128"],
                                                    "port": ["80", "8000-8099"]}
    assert rs[1].conds == {"ext": ["exe", "msi"], "url": ["www.example.com/a"],
                           "ua": ['Mozilla/5.0 (X11, "q")']}
    assert rs[2].conds == {"sni": ["example.org"], "ja4": ["t13d1516h2_8daaf6152771_b186095e22b6"],
                           "proto": ["tls", "quic"]}
    # str() is rule-file syntax again and parses to the same rule
    for r in rs:
        assert parse_rule(str(r)).conds == r.conds


@pytest.mark.parametrize("line, message", [
    ("block url=a.com", "unknown action 'block' (cut, log or allow)"),
    ("cut url", "expected KEY=VALUE, got 'url'"),
    ("cut host=a.com", "unknown key 'host' (client, port, url, ua, sni, ja4, ext, proto)"),
    ("cut url=a.com url=b.com", "key 'url' given twice (list its values with commas)"),
    ("cut client=10.0.0.300", "client=10.0.0.300: not an IP address or CIDR"),
    ("cut client=10.0.0.0/33", "client=10.0.0.0/33: not an IP address or CIDR"),
    ("cut port=70000", "port=70000: ports are 0-65535, N-M with N <= M"),
    ("cut port=90-80", "port=90-80: ports are 0-65535, N-M with N <= M"),
    ("cut port=http", "port=http: not a port or a range N-M"),
    ("cut url=http://a b/", "expected KEY=VALUE, got 'b/'"),
    ("cut url=http://[::1/", "url=http://[::1/: no canonical form (bad_host)"),
    ("cut ua=\"abc", "unterminated quote"),
    ("cut ua=a,,b", "empty value in ua="),
    ("cut ua=", "empty value in ua="),
    ("cut ua=\"a\"b", "expected ',' after a quoted value in ua="),
    ("cut sni=a..b", "sni=a..b: not a host name"),
    ("cut ja4=t13d1516h2_8daaf6152771", "ja4=t13d1516h2_8daaf6152771: not a JA4 (e.g. t13d1516h2_8daaf6152771_b186095e22b6)"),
    ("cut ext=e/x", "ext=e/x: not a file extension (exe, .tar, ...)"),
    ("cut proto=ftp", "proto=ftp: one of http, tls, quic"),
])
def test_every_error_is_one_line_with_the_line_number(line, message):
    text = "# header\n\nallow url=ok.test\n" + line + "\ncut url=later.test\n"
    with pytest.raises(RuleError) as e:
        parse_rules(text, "my.rules")
    assert e.value.line == 4
    assert str(e.value) == f"my.rules:4: {message}"
    assert "\n" not in str(e.value)


def test_cli_rule_errors_exit_2_with_one_line(tmp_path):
    f = tmp_path / "bad.rules"
    f.write_text("cut url=a.test\n\n# x\nlog ext=exe port=99999\n")
    for args in (["rules", "check", str(f)], ["--db", str(tmp_path / "s.db"), "rules", "load", str(f)]):
        r = subprocess.run(URLFILTER + args, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r
        assert r.stderr == f"urlfilter: error: {f}:4: port=99999: ports are 0-65535, N-M with N <= M\n"
    assert not (tmp_path / "s.db").exists()        # a refused load makes no store
    r = subprocess.run(URLFILTER + ["--db", str(tmp_path / "s.db"), "rules", "add", "cut url=a.test",
                                    "drop"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr == "urlfilter: error: rule 2: unknown action 'drop' (cut, log or allow)\n"
    f.write_bytes(b"cut url=a.test\n\xff\n")
    r = subprocess.run(URLFILTER + ["rules", "check", str(f)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr == f"urlfilter: error: {f}:2: not UTF-8 text\n"


def test_rules_crud_from_the_cli(tmp_path):
    db = str(tmp_path / "s.db")
    f = tmp_path / "p.rules"
    f.write_text("cut url=a.test\nlog ext=exe\n")

    def run(*a, rc=0):
        r = subprocess.run(URLFILTER + ["--db", db, *a], capture_output=True, text=True, timeout=120)
        assert r.returncode == rc, r
        return r.stdout

    assert run("rules", "load", str(f)) == "2 rules loaded; the store holds 2 rules\n"
    assert run("rules", "add", "allow client=10.0.0.0/8", "--at", "1") == "1 rules added; the store holds 3 rules\n"
    assert run("rules", "list") == (f"1\tallow client=10.0.0.0/8\t# cli\n2\tcut url=a.test\t# {f}:1\n"
                                    f"3\tlog ext=exe\t# {f}:2\n")
    assert run("rules", "delete", "2") == "1 rules deleted; the store holds 2 rules\n"
    run("rules", "delete", "7", rc=1)
    assert [ln.split("\t")[1] for ln in run("rules", "list").splitlines()] == ["allow client=10.0.0.0/8",
                                                                               "log ext=exe"]
    assert json.loads(run("stats", "--json"))["rules"] == 2
    run("rules", "clear")
    assert run("rules", "list") == ""


# ---- the C matcher against the reference ------------------------------------------------------
HOSTS = ["a.test", "www.a.test", "b.a.test", "ab.test", "c.test", "10.0.0.1", "a.test:8080"]
PATHS = ["", "/", "/x", "/x/y.exe", "/x.EXE?q=1", "/y.tar.gz", "/.hidden", "/x?a/b.exe", "/dir.d/file"]
UAS = [None, "", "Mozilla/5.0 (X11)", "curl/8.0", "CURL/8.0 bot", "python-requests"]
SNIS = ["a.test", "www.a.test", "xa.test", "A.TEST", "c.test"]
JA4S = ["t13d1516h2_8daaf6152771_b186095e22b6", "q13d0312h3_55b375c5d22e_06cda9e17597", ""]
CLIENTS = ["10.0.0.1", "10.0.1.7", "192.168.1.1", "2001:db8::1", "2001:db8:1::5"]

rule_st = st.builds(
    lambda act, conds: f"{act} " + " ".join(f"{k}={v}" for k, v in conds.items()),
    st.sampled_from(["cut", "log", "allow"]),
    st.dictionaries(st.sampled_from(["client", "port", "url", "ua", "sni", "ja4", "ext", "proto"]),
                    st.none(), max_size=3).flatmap(lambda d: st.fixed_dictionaries({k: {
                        "client": st.sampled_from(["10.0.0.0/24", "10.0.0.1", "0.0.0.0/0", "2001:db8::/48",
                                                   "10.0.0.0/8,192.168.0.0/16", "::/0"]),
                        "port": st.sampled_from(["80", "443", "8000-8100", "0-79,81-65535"]),
                        "url": st.sampled_from(["a.test", "www.a.test", "a.test/x", "a.test/x/y.exe",
                                                "ab.test", "a.test:8080", "10.0.0.1", "c.test/x.exe?q=1"]),
                        "ua": st.sampled_from(["curl", "mozilla", '"X11)"', "bot,requests"]),
                        "sni": st.sampled_from(["a.test", "www.a.test", "test", "c.test,xa.test"]),
                        "ja4": st.sampled_from(JA4S[:2]),
                        "ext": st.sampled_from(["exe", ".gz", "tar", "exe,d", "hidden"]),
                        "proto": st.sampled_from(["http", "tls,quic", "quic"]),
                    }[k] for k in d})))


def _ip16(a: str) -> tuple[bytes, int]:
    ip = ipaddress.ip_address(a)
    return ip.packed.ljust(16, b"\0"), ip.version


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(rule_st, min_size=1, max_size=6),
       looks=st.lists(st.tuples(st.sampled_from(CLIENTS), st.sampled_from([80, 443, 8080, 8000, 5]),
                                st.sampled_from(HOSTS), st.sampled_from(PATHS), st.sampled_from([0, 1, 2]),
                                st.sampled_from(UAS), st.sampled_from(SNIS), st.sampled_from(JA4S)),
                      min_size=1, max_size=12))
def test_c_matcher_equals_the_reference(rules, looks):
    parsed = [parse_rule(t) for t in rules]
    cr = compile_rules(parsed)
    n = len(looks)
    msgs = np.zeros(n, MESSAGE_DTYPE)
    data, keys, koffs, proto = bytearray(), bytearray(), [0], []
    sni_b, soffs, ja4 = bytearray(), [0], np.zeros((n, 37), np.uint8)
    expect = []
    for i, (client, port, host, path, pr, ua, sni, j4) in enumerate(looks):
        ip, ver = _ip16(client)
        msgs[i]["src_ip"] = np.frombuffer(ip, np.uint8)
        msgs[i]["ip_version"] = ver
        msgs[i]["dst_port"] = port
        msgs[i]["pkt_offset"] = len(data)
        pkt = b"GET / HTTP/1.1\r\nUser-Agent: " + (ua or "").encode() + b"\r\n\r\n"
        if ua is not None:
            msgs[i]["user_agent"]["off"] = pkt.index(b": ") + 2
            msgs[i]["user_agent"]["len"] = len(ua)
        data += pkt
        key = canon.to_key(host + path)
        keys += key
        koffs.append(len(keys))
        proto.append(pr)
        sni_b += sni.encode() if pr else b""
        soffs.append(len(sni_b))
        if pr:
            ja4[i, :len(j4)] = np.frombuffer(j4.encode(), np.uint8)
        expect.append(reference_match(parsed, client=client, port=port, key=key,
                                      proto=("http", "tls", "quic")[pr],
                                      ua=ua.encode() if ua is not None else None,
                                      sni=sni.encode() if pr else None, ja4=j4 if pr else None))
    rule, act, ns = cr.match(msgs, np.frombuffer(bytes(data), np.uint8), np.arange(n),
                             np.frombuffer(bytes(keys), np.uint8), np.array(koffs, np.int64),
                             np.array(proto, np.uint8),
                             (np.frombuffer(bytes(sni_b), np.uint8), np.array(soffs, np.int64)), ja4)
    acts = {0: None, 1: "cut", 2: "log", 3: "allow"}
    assert [(int(r), acts[int(a)]) for r, a in zip(rule, act)] == expect
    assert ns >= 0


def test_matcher_refuses_out_of_range_input():
    cr = compile_rules([parse_rule("cut url=a.test")])
    msgs = np.zeros(1, MESSAGE_DTYPE)
    key = np.frombuffer(b"test.a", np.uint8)
    with pytest.raises(IndexError):
        cr.match(msgs, np.zeros(0, np.uint8), np.array([3]), key, np.array([0, 6]), 0)
    with pytest.raises(ValueError):
        cr.match(msgs, np.zeros(0, np.uint8), np.array([0]), key, np.array([0, 60]), 0)
    bad = cr.vals.copy()
    bad["len"] = 1000
    from webtap._ext import urlpolicy
    with pytest.raises(ValueError):
        urlpolicy.match_rules(cr.rules, cr.conds, bad, cr.blob, msgs, np.zeros(0, np.uint8),
                              np.array([0]), key, np.array([0, 6]), 0)


# ---- allow list -------------------------------------------------------------------------------
def test_allow_list_from_ut1_files_and_crud(tmp_path):
    ut1 = _need(UT1 / "liste_blanche")
    _need(UT1 / "exceptions_liste_bu")
    import gzip
    want = set()
    for f in (ut1 / "domains.gz", ut1 / "urls.gz", UT1 / "exceptions_liste_bu" / "domains.gz"):
        for ln in gzip.open(f, "rt", encoding="utf-8", errors="surrogateescape"):
            if ln.strip() and not ln.lstrip().startswith("#"):
                try:
                    want.add(canon.canonicalize(ln.strip()))
                except Exception:
                    pass
    db = str(tmp_path / "s.db")
    r = subprocess.run(URLFILTER + ["--db", db, "allow", "import", str(ut1), str(UT1 / "exceptions_liste_bu"),
                                    "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert sum(x["added"] for x in rows) == len(want)
    lst = subprocess.run(URLFILTER + ["--db", db, "allow", "list"], capture_output=True, text=True,
                         timeout=120).stdout.splitlines()
    assert {x.split("\t")[0] for x in lst} == want
    one = sorted(want)[0]
    r = subprocess.run(URLFILTER + ["--db", db, "allow", "delete", one], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == f"deleted {one}\n"
    r = subprocess.run(URLFILTER + ["--db", db, "allow", "delete", one], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr == f"urlfilter: error: not in the allow list, {one}\n"
    r = subprocess.run(URLFILTER + ["--db", db, "allow", "add", "http://[::1"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("urlfilter: error: not a URL (")


# ---- scans of real traces: expectations from tshark --------------------------------------------
def _tshark(path: Path, filt: str, fields: list[str]) -> list[list[str]]:
    r = subprocess.run(["tshark", "-r", str(path), "-Y", filt, "-T", "fields", "-E", "separator=\t",
                        *sum((["-e", f] for f in fields), [])], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return [ln.split("\t") for ln in r.stdout.splitlines()]


def _store(tmp_path, blacklist: list[str], allow: list[str], rules: str) -> str:
    db = str(tmp_path / "s.db")
    lst = tmp_path / "bl.txt"
    lst.write_text("\n".join(blacklist) + "\n")
    subprocess.run(URLFILTER + ["--db", db, "import", str(lst), "--category", "bad"], check=True,
                   capture_output=True, timeout=300)
    if allow:
        subprocess.run(URLFILTER + ["--db", db, "allow", "add", *allow], check=True, capture_output=True, timeout=120)
    if rules:
        f = tmp_path / "p.rules"
        f.write_text(rules)
        subprocess.run(URLFILTER + ["--db", db, "rules", "load", str(f)], check=True, capture_output=True,
                       timeout=120)
    return db


@pytest.fixture(scope="module")
def angler():
    _need(ANGLER)
    gets = _tshark(ANGLER, "http.request.method == \"GET\"",
                   ["frame.number", "ip.src", "tcp.dstport", "http.host", "http.request.uri", "http.user_agent"])
    hellos = _tshark(ANGLER, "tls.handshake.type == 1",
                     ["frame.number", "tls.handshake.extensions_server_name"])
    return gets, hellos


def test_scan_allow_list_overrides_the_blacklist(tmp_path, angler):
    from urlfilter.scan import scan

    gets, hellos = angler
    db = _store(tmp_path, ["balloonaloft.com", "hollykurelek.com", "akamaihd.net"],
                ["www.balloonaloft.com/sites/all", "fbstatic-a.akamaihd.net"], "")
    forged = tmp_path / "f.pcap"
    res = scan(str(ANGLER), db, forged_out=str(forged))
    t = res.table.to_pandas()

    def host_in(h, dom):
        h = h.split(":")[0].lower()
        return h == dom or h.endswith("." + dom)

    listed = {int(f) for f, _, _, h, u, _ in gets if host_in(h, "balloonaloft.com") or host_in(h, "hollykurelek.com")}
    excepted = {int(f) for f, _, _, h, u, _ in gets
                if host_in(h, "www.balloonaloft.com") and (u == "/sites/all" or u.startswith(("/sites/all/", "/sites/all?")))}
    sni_listed = {int(f) for f, s in hellos if host_in(s, "akamaihd.net")}
    sni_exc = {int(f) for f, s in hellos if host_in(s, "fbstatic-a.akamaihd.net")}
    assert excepted and sni_exc and listed - excepted and sni_listed - sni_exc     # the trace has all kinds
    http, tls = t[t.proto == "http"], t[t.proto == "tls"]
    assert set(http.frame[http.hit]) == listed - excepted
    assert set(http.frame[http.decision == "exception"]) == excepted
    # ClientHellos: tshark shows each (retransmissions too); the filter answers every copy
    assert set(tls.frame[tls.hit]) == sni_listed - sni_exc
    assert set(tls.frame[tls.decision == "exception"]) == sni_exc
    c = res.counters
    n_exc = int((t.decision == "exception").sum())
    assert c["allowed"] == n_exc and c["blocked"] == int(t.hit.sum()) == c["hits"]
    assert c["forged_frames"] == 2 * c["hits"]
    # nothing forged for the exceptions: every forged frame answers a cut lookup
    fr = _tshark(forged, "tcp", ["tcp.srcport", "tcp.dstport"])
    cut_ports = set(t.src_port[t.hit])
    assert len(fr) == 2 * c["hits"] and all(int(a) in cut_ports or int(b) in cut_ports for a, b in fr)
    exc_only = set(t.src_port[t.decision == "exception"]) - cut_ports
    assert not any(int(a) in exc_only or int(b) in exc_only for a, b in fr)


def test_scan_rules_first_match_wins(tmp_path, angler):
    from urlfilter.scan import scan

    gets, hellos = angler
    rules = ("log ext=png\n"                                   # 1: logs, the lists still decide
             "cut ua=\"Win64; x64\" url=d9prc2a6zc.com\n"      # 2: UA + host
             "allow sni=fbstatic-a.akamaihd.net\n"             # 3: an SNI let through
             "cut proto=tls sni=akamaihd.net\n"                # 4: the other akamaihd SNIs
             "cut client=192.168.122.0/24 port=80 ext=js,css\n"  # 5: CIDR + port + extension
             "allow url=www.balloonaloft.com\n")               # 6: overrides the blacklist
    db = _store(tmp_path, ["balloonaloft.com", "bam.nr-data.net", "zld3fk88.com"], [], rules)
    t = scan(str(ANGLER), db).table.to_pandas()

    def host_in(h, dom):
        h = h.split(":")[0].lower()
        return h == dom or h.endswith("." + dom)

    def ext(u):
        seg = u.split("?")[0].rsplit("/", 1)[-1]
        return seg.rsplit(".", 1)[1].lower() if "." in seg[1:] else None

    want_rule, want_hit = {}, {}
    for f, src, port, h, u, ua in gets:
        f = int(f)
        if ext(u) == "png":
            r = 1
        elif "Win64; x64" in ua and host_in(h, "d9prc2a6zc.com"):
            r = 2
        elif ipaddress.ip_address(src) in ipaddress.ip_network("192.168.122.0/24") and port == "80" \
                and ext(u) in ("js", "css"):
            r = 5
        elif host_in(h, "www.balloonaloft.com"):
            r = 6
        else:
            r = 0
        listed = host_in(h, "balloonaloft.com") or host_in(h, "zld3fk88.com")
        want_rule[f] = r
        want_hit[f] = r in (2, 5) or (r in (0, 1) and listed)
    for f, s in hellos:
        f = int(f)
        r = 3 if host_in(s, "fbstatic-a.akamaihd.net") else 4 if host_in(s, "akamaihd.net") else 0
        want_rule[f] = r
        want_hit[f] = r == 4 or (r == 0 and host_in(s, "bam.nr-data.net"))
    assert {r for r in want_rule.values()} == {0, 1, 2, 3, 4, 5, 6}       # every rule is exercised
    got = t[t.proto.isin(["http", "tls"])]
    assert dict(zip(got.frame, got.rule)) == want_rule
    assert dict(zip(got.frame, got.hit)) == want_hit


def test_scan_ja4_rule_against_the_reference_tool(tmp_path):
    from urlfilter.scan import scan

    ref = json.loads(_need(JA4_JSON).read_text())
    _need(JA4_TRACE)
    ja4s = sorted({r["JA4.1"] for r in ref if "JA4.1" in r})
    pick = ja4s[0]
    want = {(r["src"], int(r["srcport"])) for r in ref if r.get("JA4.1") == pick}
    db = _store(tmp_path, ["never-listed.test"], [], f"cut ja4={pick}\n")
    t = scan(str(JA4_TRACE), db).table.to_pandas()
    t = t[t.proto == "tls"]
    got = set(zip(t.src_ip[t.rule == 1], t.src_port[t.rule == 1].astype(int)))
    # every stream the reference tool gives this JA4, and no other stream with a JA4 there
    others = {(r["src"], int(r["srcport"])) for r in ref if "JA4.1" in r and r["JA4.1"] != pick}
    assert want and want <= got and not (got & others)
    assert t.hit[t.rule == 1].all()


def test_scan_without_policy_counts_blocked_and_no_rules(tmp_path, angler):
    from urlfilter.scan import scan

    db = _store(tmp_path, ["balloonaloft.com"], [], "")
    res = scan(str(ANGLER), db)
    c = res.counters
    assert c["blocked"] == c["hits"] > 0 and c["allowed"] == 0 and c["rule_lookups"] == 0
    t = res.table.to_pandas()
    assert (t.rule == 0).all() and set(t.decision.dropna()) == {"blacklist"}
    assert Policy().empty


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=40),
    st.builds(lambda a, k, v: f"{a} {k}={v}", st.sampled_from(["cut", "log", "allow", "CUT", "drop"]),
              st.sampled_from(["client", "port", "url", "ua", "sni", "ja4", "ext", "proto", "x"]),
              st.text(alphabet='ab.,:/"\\ 0123456789-#', max_size=20))), max_size=8))
def test_parser_on_any_text_gives_rules_or_one_line_error(lines):
    text = "\n".join(lines)
    try:
        rules = parse_rules(text, "f")
    except RuleError as e:
        assert "\n" not in str(e) and str(e).startswith(f"f:{e.line}: ")
        assert 1 <= e.line <= max(1, len(text.splitlines()))
        return
    for r in rules:          # a parsed rule compiles and prints as a rule that parses the same
        assert parse_rule(str(r)).conds == r.conds
    compile_rules(rules)
