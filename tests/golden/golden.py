"""Golden records: what the commands print on a fixed set of shared traces (issue 19's guard rail).

    python -m tests.golden.golden            # check: exit 1 and name every file that differs
    python -m tests.golden.golden --write    # regenerate tests/golden/records/

The refactors of issue 19 must not change behaviour: every step keeps these files byte for byte
(tests/golden/test_golden.py). Regenerate only on purpose, in a commit whose message says what
changed in the behaviour and why.

For each trace of traces.txt (relative to the shared traces folder; the commands run with that
folder as working directory and the relative path as argument, so no machine path enters a
record):

- `httpanalyzer/NAME.csv`: `httpanalyzer TRACE -o NAME.csv` (every record column), its rows
  sorted: with several consumer processes (the default) the order in which records leave the
  consumers depends on scheduling, the records themselves do not;
- `scan/NAME.csv` and `scan/NAME.json`: `urlfilter scan TRACE --blacklist DB -o NAME.csv --json`
  with DB built by `urlfilter --db DB import blacklist.txt --category golden`; the columns and
  counters that measure time on this machine (match/forge nanoseconds, `seconds`, `rule_ns`) are dropped,
  everything else is kept;
- `compare/NAME.json`: `httpanalyzer compare TRACE --json`, re-indented (one key a line) so that
  a difference shows as a readable diff.

For each trace of traces_tls.txt (relative to the shared TLS traces folder, issue 29's guard rail
before the one-walk pipeline):

- `tls/NAME.csv`: `httpanalyzer TRACE -o H.csv --tls-out NAME.csv` (the one-pass TLS/QUIC
  handshake records, every column);
- `scan-tls/NAME.csv` and `.json`: `urlfilter scan TRACE --blacklist DB -o NAME.csv --json
  --forged-out F.pcap` with DB built from blacklist_tls.txt (SNI hits over TLS and QUIC), timed
  columns dropped as for `scan`; `forged/NAME.txt`: the forged frames, one hex line each, sorted
  (the pcap's order and timestamps follow each run's measured reaction times; the bytes do not);
- `timing/NAME.csv`: `urlfilter timing TRACE --blacklist DB --t-proc-us 5 -o NAME.csv` (a fixed
  T_proc, so that no measured time enters the file).

NAME is the relative path with '/' replaced by '__'.
"""
from __future__ import annotations

import csv
import io
import json
import os
import pathlib
import struct
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
RECORDS = HERE / "records"
KINDS = ("httpanalyzer", "scan", "compare")
TLS_KINDS = ("tls", "scan-tls", "timing")


def shared_traces() -> pathlib.Path:
    return pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared")) / "traces"


def shared_tls_traces() -> pathlib.Path:
    return pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared")) / "traces-tls"


def _list(fname: str) -> list[str]:
    out = []
    for line in (HERE / fname).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def traces() -> list[str]:
    return _list("traces.txt")


def tls_traces() -> list[str]:
    return _list("traces_tls.txt")


def record_names(rel: str, kind: str) -> list[str]:
    """The record files one (trace, kind) produces."""
    n = name(rel)
    return {"httpanalyzer": [f"httpanalyzer/{n}.csv"], "scan": [f"scan/{n}.csv", f"scan/{n}.json"],
            "compare": [f"compare/{n}.json"], "tls": [f"tls/{n}.csv"],
            "scan-tls": [f"scan-tls/{n}.csv", f"scan-tls/{n}.json", f"forged/{n}.txt"],
            "timing": [f"timing/{n}.csv"]}[kind]


def pcap_frames(path: pathlib.Path) -> list[bytes]:
    """The frames of a classic pcap file (either byte order), read here with struct rather than
    through the project's own reader."""
    data = path.read_bytes()
    if len(data) < 24:
        return []
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, off = [], 24
    while off + 16 <= len(data):
        _s, _f, incl, _orig = struct.unpack_from(endian + "IIII", data, off)
        out.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return out


def name(rel: str) -> str:
    return rel.replace("/", "__")


def _run(args: list[str], cwd: pathlib.Path) -> bytes:
    """One command of the product (its console script's module), stdout; a failure raises with
    its stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "LC_ALL": "C.UTF-8"}
    r = subprocess.run([sys.executable, "-c", "import sys; from " + args[0] + " import main; "
                        "sys.exit(main())", *args[1:]], cwd=cwd, env=env, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {r.returncode}: "
                           f"{r.stderr.decode(errors='replace')[-2000:]}")
    return r.stdout


#: scan record columns and counters that measure time on this machine
_SCAN_TIMED = ("match_ns", "forge_ns", "seconds", "rule_ns")


def _drop_columns(data: bytes, drop) -> bytes:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    if not rows:
        return data
    keep = [i for i, c in enumerate(rows[0]) if not any(c == d or c.endswith("_" + d) or
                                                        c.startswith(d) for d in drop)]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for r in rows:
        w.writerow([r[i] for i in keep])
    return out.getvalue().encode("utf-8")


def _sorted_rows(data: bytes) -> bytes:
    head, _, body = data.partition(b"\n")
    return b"\n".join([head] + sorted(x for x in body.split(b"\n") if x)) + b"\n"


def produce(rel: str, kind: str, tmp: pathlib.Path) -> dict[str, bytes]:
    """{relative record path: bytes} of one trace and one kind."""
    cwd = shared_traces()
    n = name(rel)
    if kind == "httpanalyzer":
        out = tmp / f"{n}.csv"
        _run(["httpanalyzer.cli", rel, "-o", str(out), "--no-progress"], cwd)
        return {f"httpanalyzer/{n}.csv": _sorted_rows(out.read_bytes())}
    if kind == "scan":
        db = tmp / "blacklist.db"
        if not db.exists():
            _run(["urlfilter.cli", "--db", str(db), "import", str(HERE / "blacklist.txt"),
                  "--category", "golden"], cwd)
        out = tmp / f"{n}.scan.csv"
        counters = json.loads(_run(["urlfilter.cli", "scan", rel, "--blacklist", str(db), "-o",
                                    str(out), "--json"], cwd))
        counters = {k: v for k, v in counters.items() if k not in _SCAN_TIMED}
        return {f"scan/{n}.csv": _drop_columns(out.read_bytes(), _SCAN_TIMED),
                f"scan/{n}.json": (json.dumps(counters, indent=1) + "\n").encode()}
    if kind == "compare":
        summary = json.loads(_run(["httpanalyzer.cli", "compare", rel, "--json"], cwd))
        return {f"compare/{n}.json": (json.dumps(summary, indent=1) + "\n").encode()}
    cwd = shared_tls_traces()
    if kind == "tls":
        out = tmp / f"{n}.tls.csv"
        _run(["httpanalyzer.cli", rel, "-o", str(tmp / f"{n}.http.csv"), "--tls-out", str(out),
              "--no-progress"], cwd)
        return {f"tls/{n}.csv": out.read_bytes()}
    db = tmp / "blacklist_tls.db"
    if not db.exists():
        _run(["urlfilter.cli", "--db", str(db), "import", str(HERE / "blacklist_tls.txt"),
              "--category", "golden"], cwd)
    if kind == "scan-tls":
        out, forged = tmp / f"{n}.scan.csv", tmp / f"{n}.forged.pcap"
        counters = json.loads(_run(["urlfilter.cli", "scan", rel, "--blacklist", str(db), "-o",
                                    str(out), "--forged-out", str(forged), "--json"], cwd))
        counters = {k: v for k, v in counters.items() if k not in _SCAN_TIMED}
        frames = sorted(f.hex() for f in pcap_frames(forged)) if forged.exists() else []
        return {f"scan-tls/{n}.csv": _drop_columns(out.read_bytes(), _SCAN_TIMED),
                f"scan-tls/{n}.json": (json.dumps(counters, indent=1) + "\n").encode(),
                f"forged/{n}.txt": "".join(x + "\n" for x in frames).encode()}
    if kind == "timing":
        out = tmp / f"{n}.timing.csv"
        _run(["urlfilter.cli", "timing", rel, "--blacklist", str(db), "--t-proc-us", "5", "-o",
              str(out)], cwd)
        return {f"timing/{n}.csv": out.read_bytes()}
    raise ValueError(kind)


def produce_all(tmp: pathlib.Path) -> dict[str, bytes]:
    out = {}
    for rel in traces():
        for kind in KINDS:
            out.update(produce(rel, kind, tmp))
    for rel in tls_traces():
        for kind in TLS_KINDS:
            out.update(produce(rel, kind, tmp))
    return out


def main(argv: list[str]) -> int:
    for d in (shared_traces(), shared_tls_traces()):
        if not d.is_dir():
            print(f"golden: a shared traces folder is absent ({d})", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        got = produce_all(pathlib.Path(tmp))
    if "--write" in argv:
        for rel, data in got.items():
            p = RECORDS / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        stale = {str(p.relative_to(RECORDS)) for p in RECORDS.rglob("*") if p.is_file()} - set(got)
        for rel in stale:
            (RECORDS / rel).unlink()
        print(f"golden: wrote {len(got)} records, removed {len(stale)}")
        return 0
    bad = [rel for rel, data in got.items()
           if not (RECORDS / rel).exists() or (RECORDS / rel).read_bytes() != data]
    for rel in bad:
        print(f"golden: differs: {rel}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
