"""`httpanalyzer compare` (issue 5): transactions against the real tshark in first-packet and
reassembly mode, each difference in a category.

Hand-built traces (tests/httpanalyzer/compare_traces.py) where the category of every difference
is known; a few small shared traces (skipped when absent); the JSON and report contract."""
from __future__ import annotations

import contextlib
import io
import json
import shutil

import numpy as np
import pytest

from httpanalyzer import cli, compare
from tests import pcapbuild
from tests.conftest import TRACES, require_shared
from tests.httpanalyzer import compare_traces as ct

pytestmark = [pytest.mark.tshark,
              pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not on PATH")]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = ct.write(tmp_path_factory.mktemp("cmp") / "mixed_cases.pcap", ct.mixed_cases())
    return compare.compare_traces(path)


def rows(c, mode="first_packet"):
    t = c.transactions
    return t[t["mode"] == mode]


def by_port(c, port, mode="first_packet"):
    t = rows(c, mode)
    return t[t.client_port == port]


@pytest.mark.parametrize("mode", list(compare.MODES))
def test_plain_transaction_found_by_both(mixed, mode):
    t = by_port(mixed, 40001, mode)
    assert list(t.side) == ["both"] and not t.differs.any()
    assert mixed.field_mismatches(mode) == {k: 0 for k in mixed.field_mismatches(mode)}


@pytest.mark.parametrize("mode", list(compare.MODES))
def test_retransmitted_request(mixed, mode):
    t = by_port(mixed, 40002, mode)
    # the original pairs in both tools; webtap's record of the copy is the paper's duplicate
    assert ((t.side == "both") & ~t.differs).sum() == 1
    dup = t[t.differs]
    assert list(dup.side) == ["only_webtap"] and list(dup.category) == ["retransmission"]


@pytest.mark.parametrize("mode", list(compare.MODES))
def test_pipelined_pair(mixed, mode):
    t = by_port(mixed, 40003, mode)
    d = t[t.differs]
    # tshark gives the first response to the second request; webtap pairs it by SEQ == ACK
    # with the first and leaves the second request and second response unpaired
    assert len(d) == 2 and set(d.category) == {"pipelined"} and set(d.side) == {"both"}
    unpaired = t[~t.differs]
    assert list(unpaired.webtap_request_frame) == [-1]          # second response, in both tools


def test_port_8443_is_decoded_by_both(mixed):
    """tshark's HTTP heuristic takes port 8443: no difference."""
    t = by_port(mixed, 40004)
    assert list(t.side) == ["both"] and not t.differs.any()
    assert (t.server_port == 8443).all()


def test_response_whose_request_is_missing_and_request_at_trace_end(mixed):
    t = by_port(mixed, 40005)
    assert list(t.side) == ["both"] and not t.differs.any()
    assert list(t.webtap_request_frame) == [-1] and list(t.tshark_request_frame) == [-1]
    t = by_port(mixed, 40006)
    assert list(t.side) == ["both"] and list(t.webtap_response_frame) == [-1]
    k = mixed.counts()
    assert k["unpaired_in_both"] == {"response_without_request": 2, "request_without_response": 1}


def test_mixed_totals(mixed):
    s = mixed.summary()
    assert (s["both"], s["only_tshark"], s["only_webtap"], s["unexplained"]) == (8, 0, 1, 0)
    assert s["paired_differently"] == 2
    assert s["categories"] == {"pipelined": 2, "retransmission": 1}
    assert s["modes"]["reassembly"]["categories"] == {"pipelined": 2, "retransmission": 1}
    # paired response times agree with tshark's first-packet http.time to the microsecond
    assert s["field_mismatches"]["response_time"] == 0
    assert s["status_code_difference"]["mean_pct"] == pytest.approx(0.0)


def test_port_tshark_gives_to_another_dissector(tmp_path):
    c = compare.compare_traces(ct.write(tmp_path / "http_port_21.pcap", ct.port_not_http_case()))
    t = rows(c)
    assert list(t.side) == ["only_webtap"] and list(t.category) == ["port_not_http"]
    assert c.unexplained == 0


def test_chunk_boundary(tmp_path):
    path = ct.write(tmp_path / "split_by_chunk.pcap", ct.split_by_chunk_case())
    whole = compare.compare_traces(path)
    assert whole.summary()["categories"] == {}
    c = compare.compare_traces(path, chunk_packets=4)
    t = rows(c)
    assert set(t[t.differs].category) == {"chunk_boundary"}
    assert c.counts()["only_tshark"] == 1            # tshark's response-only half
    assert c.unexplained == 0
    assert c.commands[0].startswith("editcap -F pcapng -c 4 ")
    assert sum(x.startswith("tshark") for x in c.commands) == 4     # 2 chunks x 2 modes


def test_ks_distance():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert compare.ks_distance(a, a) == 0.0
    assert compare.ks_distance(a, a + 10) == 1.0
    assert compare.ks_distance(a, np.array([1.0, 2.0])) == pytest.approx(0.5)
    assert np.isnan(compare.ks_distance(a, []))


def test_ks_distance_integers_exact():
    a = np.array([1_560_882_000] * 5, np.int64)
    assert compare.ks_distance(a, a[:3]) == 0.0
    assert compare.ks_distance(a, a + 1) == 1.0          # one nanosecond apart is a difference


@pytest.mark.parametrize("times_ns", [(1_560_882_000,) * 6,
                                      (1_560_882_000, 300_000, 700_000, 1_560_882_000, 100_000)])
def test_equal_response_times_give_ks_zero(tmp_path, times_ns):
    # issue 30: as floats, webtap's 1560882000 ns * 1e-9 (1.5608819999999999) and tshark's
    # "1.560882000" differed, and the KS of two identical samples was not 0
    path = tmp_path / "equal_times.pcap"
    path.write_bytes(pcapbuild.pcap(ct.equal_times_case(times_ns)))
    c = compare.compare_traces(str(path))
    want = sorted(times_ns)
    for k in ("webtap", "webtap_dedup", "tshark_first_packet", "tshark_reassembly"):
        assert c.response_times_ns[k].dtype == np.int64
        assert sorted(c.response_times_ns[k].tolist()) == want, k
    assert c.ks() == {"ks_first_packet": 0.0, "ks_reassembly": 0.0,
                      "ks_first_packet_dedup": 0.0, "ks_reassembly_dedup": 0.0}
    assert c.field_mismatches()["response_time"] == 0


def test_count_table_relative_difference():
    t = compare.count_table({"webtap": [200, 200, 404], "tshark_first_packet": [200, 200, 200, 404]})
    assert t.loc[200, "rel_diff_tshark_first_packet_pct"] == pytest.approx(100 / 3)
    assert t.loc[404, "rel_diff_tshark_first_packet_pct"] == 0.0


def test_cli_json_and_report(tmp_path):
    path = ct.write(tmp_path / "mixed_cases.pcap", ct.mixed_cases())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["compare", path, "--json", "--report", str(tmp_path / "rep")])
    assert rc == 0
    s = json.loads(out.getvalue())
    for key, typ in [("both", int), ("only_tshark", int), ("only_webtap", int),
                     ("unexplained", int), ("field_mismatches", dict), ("categories", dict),
                     ("ks_first_packet", float), ("ks_reassembly", float),
                     ("tshark_version", str), ("tshark_commands", list), ("modes", dict)]:
        assert isinstance(s[key], typ), key
    assert set(s["field_mismatches"]) >= {"method", "uri", "host", "user_agent", "status", "reason"}
    assert set(s["modes"]) == {"first_packet", "reassembly"}
    assert s["tshark_version"].startswith("TShark")
    assert any("tcp.desegment_tcp_streams:FALSE" in c for c in s["tshark_commands"])
    rep = tmp_path / "rep"
    for f in ("summary.md", "summary.html", "summary.json", "response_time_ccdf.png",
              "status_codes.png", "methods.png", "url_length.png", "differences.csv"):
        assert (rep / f).stat().st_size > 0, f
    md = (rep / "summary.md").read_text().rstrip("\n").splitlines()
    assert md[-1] == "unexplained differences: 0"
    assert (rep / "response_time_ccdf.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_plain_run_still_works(tmp_path, capsys):
    """`httpanalyzer TRACE` is unchanged by the compare subcommand."""
    path = ct.write(tmp_path / "mixed_cases.pcap", ct.mixed_cases())
    assert cli.main([path, "--no-progress"]) == 0
    assert "/plain" in capsys.readouterr().out


# --- small shared traces ---------------------------------------------------------------------

SHARED = ["arkime/http-100-continue.pcap", "arkime/wireshark-retrans.pcap",
          "zeek/http/1000-requests-one-dropped-response.pcap.gz",
          "suricata-verify/filestore-5408/input.pcap", "zeek/tcp/tcp-fast-open.pcap",
          "chrissanders-packets/http_espn.pcapng"]


@pytest.mark.parametrize("rel", SHARED)
def test_shared_trace_has_no_unexplained_difference(rel):
    c = compare.compare_traces(str(require_shared(TRACES / rel)))
    assert c.unexplained == 0, c.transactions[c.transactions.category == "unexplained"]
    fm = c.field_mismatches("first_packet")
    assert fm == {k: 0 for k in fm}, c.field_diffs
    per = c.per_trace.iloc[0]
    if per.webtap >= 1000:                  # the bound, on traces this large
        assert c.ks()["ks_first_packet"] < 0.01


def test_shared_categories_known():
    c = compare.compare_traces(str(require_shared(TRACES / "arkime/http-100-continue.pcap")))
    assert c.categories() == {"interim": 1}
    c = compare.compare_traces(str(require_shared(
        TRACES / "zeek/http/http-09-content-length-confusion.pcap")))
    # server bytes before the request: reassembly glues them to the response
    assert c.categories("first_packet") == {}
    assert c.categories("reassembly") == {"reassembly_merged": 2}
    c = compare.compare_traces(str(require_shared(TRACES / "zeek/tcp/tcp-fast-open.pcap")))
    # the request rides in the SYN (ACK 0): tshark pairs it by order; webtap has the request and
    # the response as two unpaired records, both in the category
    assert c.categories().get("seq_not_ack", 0) == 2


def test_cli_missing_trace_is_a_usage_error(tmp_path, capsys):
    # a trace that is not there: one error line, exit 1, as for `httpanalyzer` (docs/CLI.md)
    assert cli.main(["compare", str(tmp_path / "absent.pcap"), "--json"]) == 1
    assert "no such file" in capsys.readouterr().err.lower()


# --- a failing tshark is an error (issue 20) --------------------------------------------------

def test_failing_tshark_fails_compare_and_names_tshark(tmp_path, capsys):
    """tshark that exits non-zero: compare_traces raises TsharkError (not a skipped trace, not
    "nothing to compare"), the CLI exits 1 with one line naming tshark."""
    from httpanalyzer.tshark import TsharkError

    path = ct.write(tmp_path / "mixed_cases.pcap", ct.mixed_cases())
    with pytest.raises(TsharkError, match=r"^tshark failed \(exit status 1\)"):
        compare.compare_traces(path, tshark="false")
    assert cli.main(["compare", path, "--json", "--tshark", "false"]) == 1
    err = capsys.readouterr().err
    assert "httpanalyzer compare: error: tshark failed (exit status 1)" in err


def test_real_tshark_error_status_is_raised(tmp_path):
    """The real tshark refusing its command line (a bad display filter: exit status 4) raises,
    with tshark's own message."""
    from httpanalyzer import tshark

    path = ct.write(tmp_path / "mixed_cases.pcap", ct.mixed_cases())
    cmd = tshark.command(path, "first_packet", ["frame.number"], display_filter="http.nonsense ==")
    with pytest.raises(tshark.TsharkError, match=r"tshark failed \(exit status [1-9]"):
        tshark.run(cmd, path)


def test_tshark_on_a_cut_short_capture_is_not_an_error():
    """A capture cut in the middle of a packet: tshark prints what it read and exits 2; the
    runner accepts that one case (webtap reads the same packets) and says so."""
    from httpanalyzer import tshark

    path = str(require_shared(TRACES / "suricata-verify/http-mime-truncated/input.pcap"))
    r = tshark.run(tshark.command(path, "first_packet", ["frame.number"], display_filter=None), path)
    assert r.damaged and len(r.stdout.split()) > 0


def test_tshark_no_request_in_is_checked_on_tshark_fields():
    """The explainer gives `tshark_no_request_in` only when tshark's response row has no
    http.request_in and its SEQ is the ACK of webtap's request; otherwise `unexplained`."""
    import pandas as pd

    from httpanalyzer.compare_join import _Explainer

    w = pd.DataFrame([dict(q=1, r=2, client="a", client_port=1, server="b", server_port=80,
                           ack=100, seq=100, request_repeat=False, response_repeat=False,
                           unmatched_reason=None)])
    for request_in, seq, want in ((-1, 100, "tshark_no_request_in"),
                                  (7, 100, "unexplained"),        # points at a non-HTTP frame
                                  (-1, 555, "unexplained")):      # SEQ is not the request's ACK
        t = pd.DataFrame([dict(q=-1, r=2, seq=seq, ack=-1, request_in=request_in, q_msgs=0,
                               r_msgs=1, client="a", client_port=1, server="b", server_port=80)])
        ex = _Explainer("first_packet", w, t, None, set(), set(), {}, [0], {})
        assert ex._webtap_pair(w.iloc[0]) == want


def test_response_between_the_segments_of_a_split_request(tmp_path):
    """Issue 31: the request line and Host start in one segment, the server answers, then the
    request's last segment. webtap pairs by SEQ == ACK; tshark's reassembly completes the request
    after the response and pairs nothing: response_mid_request (before: tshark_no_request_in)."""
    out = []
    c = ct.Conn(out, ct.T0, 40002)
    a, b = b"GET /split HTTP/1.1\r\nHost: e", b"xample.com\r\nUser-Agent: t\r\n\r\n"
    c._pkt("c", "PA", a, c.cseq, c.sseq)
    c.cseq += len(a)
    c.response()
    c._pkt("c", "PA", b, c.cseq, c.sseq)
    path = ct.write(tmp_path / "split.pcap", out)
    cmp = compare.compare_traces(path)
    fp, ra = rows(cmp), rows(cmp, "reassembly")
    assert list(fp.how) == ["exact"]
    assert sorted(ra.category) == ["response_mid_request", "response_mid_request"]
    assert cmp.unexplained == 0
