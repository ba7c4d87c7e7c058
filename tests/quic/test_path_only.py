"""`urlfilter stats --json` counts the entries an SNI can never match (issue 18: "an entry with a
path cannot be seen inside TLS ... says how many entries are path-only"), and that count is the
number of entries a ClientHello naming each entry's own host (and port) fails to hit."""
from __future__ import annotations

import json

from urlfilter.cli import main
from urlfilter.scan import scan

from .hello import client_hello, frame, records, sni_ext, write

# (line as imported, SNI and server port that name its host, can an SNI match it?)
ENTRIES = [
    ("evil.example", "evil.example", 443, True),
    ("https://www.Evil2.example/", "www.evil2.example", 443, True),      # "/" alone is no path
    ("evil3.example/path/x", "evil3.example", 443, False),
    ("evil4.example/?q=1", "evil4.example", 443, False),
    ("http://evil7.example?x", "evil7.example", 443, False),
    ("evil5.example:8443", "evil5.example", 8443, True),
    ("[2001:db8::1]", "2001:db8::1", 443, True),
    ("10.0.0.1/admin", "10.0.0.1", 443, False),
    ("bücher.example", "xn--bcher-kva.example", 443, True),
    ("evil6.example/#frag", "evil6.example", 443, True),                 # the fragment is dropped
]


def test_path_only_count_is_what_no_sni_matches(tmp_path, capsys):
    lst = tmp_path / "bl.txt"
    lst.write_text("".join(e[0] + "\n" for e in ENTRIES), encoding="utf-8")
    db = str(tmp_path / "bl.db")
    assert main(["--db", db, "import", str(lst), "--category", "c"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "stats", "--json"]) == 0
    st = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert st["urls"] == len(ENTRIES)
    assert st["path_only"] == sum(1 for e in ENTRIES if not e[3]) == 4
    write(tmp_path / "h.pcap", [frame(records(client_hello(sni_ext(sni.encode()))), sport=6000 + i, dport=port)
                                for i, (_, sni, port, _) in enumerate(ENTRIES)])
    df = scan(str(tmp_path / "h.pcap"), db).to_pandas().sort_values("src_port")
    assert list(df["hit"]) == [e[3] for e in ENTRIES]
    assert int((~df["hit"]).sum()) == st["path_only"]
