"""The rule-file parser at the command line (issue 34): whatever a rule file holds, `urlfilter
rules check FILE` exits 0 with its count, or 2 with exactly one stderr line `urlfilter: error:
FILE:LINE: reason` (docs/CLI.md, docs/urlfilter.md), never a traceback. The fuzz target `rules`
(tests/fuzz/targets.py) holds the parser to the same on arbitrary bytes."""
from __future__ import annotations

import subprocess
import sys

import pytest

BAD = [
    (b"cut port=70000\n", 1, "port=70000"),
    (b"allow url=a.b\ncut ua=\"x\n", 2, "unterminated quote"),
    (b"\n\ndrop url=a.b\n", 3, "unknown action"),
    (b"cut client=1.2.3.4 client=5.6.7.8\n", 1, "given twice"),
    (b"cut ua=ok\n\xff\xfe cut\n", 2, "not UTF-8"),
    (b"cut ua=\x01\x02\n", 1, "printable ASCII"),
    (b"cut sni=a\xe2\x80\xa8b\n", 2, "unknown action"),  # U+2028 ends a line for splitlines()
    (b"cut \x00url=a\n", 1, "unknown key"),
    (b"cut ja4=t13d\rcut\n", 1, "ja4="),               # a lone CR ends a line too
]


@pytest.mark.parametrize("data,line,reason", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_rule_file_is_one_error_line_exit_2(tmp_path, data, line, reason):
    f = tmp_path / "p.rules"
    f.write_bytes(data)
    p = subprocess.run([sys.executable, "-m", "urlfilter", "--db", str(tmp_path / "db"), "rules",
                        "check", str(f)], capture_output=True, text=True)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"urlfilter: error: {f}:{line}: "), lines[0]
    assert reason in lines[0], lines[0]
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "db").exists()           # no store made by a check


def test_good_rule_file_counts(tmp_path):
    f = tmp_path / "p.rules"
    f.write_bytes(b"# c\nallow url=www.example.com/help\ncut client=10.20.0.0/16 port=8080-8090 "
                  b"ua=sqlmap,nikto\r\nlog ext=exe,.msi\n")
    p = subprocess.run([sys.executable, "-m", "urlfilter", "rules", "check", str(f)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"{f}: 3 rules, ok"
