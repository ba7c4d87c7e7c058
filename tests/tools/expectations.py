"""Pinned comparison results: per trace, how many pairs / frames / transactions each tool finds
and how many differences of each category there are, compared EXACTLY by the tests (issue 20:
a listed trace can no longer gain differences in silence, and a tshark that reads nothing
fails on the pinned pair counts).

    python -m tests.tools.expectations KIND [--write] [--traces LIST] [TRACE_DIR]

KIND: `pairs` (tests/tools/pair_table.py: webtap's pairs vs tshark's first-packet
http.request_in), `frames` (tests/tools/accuracy_table.py: HTTP first packets frame by frame),
`transactions` (httpanalyzer.compare: transactions in tshark's first-packet AND reassembly
modes). Without --write, compares with tests/expectations/KIND.json and prints every trace
that differs (exit 1). With --write, rewrites that file: do it only in a commit that says
which counts changed and why.

The files are keyed by the trace's path relative to the shared traces folder.
"""
from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECT = HERE.parent / "expectations"
KINDS = ("pairs", "frames", "transactions")


def shared_traces() -> Path:
    return Path(os.environ.get("WEBTAP_SHARED", HERE.parent.parent.parent / "shared")) / "traces"


def all_traces(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.suffix != ".md")


def _counts(values) -> dict:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def pairs(path: str) -> dict:
    import httpanalyzer
    from httpanalyzer.tshark import tshark_frames
    from tests.tools import pair_table

    df = httpanalyzer.analyze(path)
    frames = tshark_frames(path)
    diff = pair_table.compare(df, frames, path=path)
    return {"webtap_pairs": int(df.matched.sum()),
            "tshark_pairs": int(len(pair_table.tshark_pairs(frames))),
            "reasons": _counts(f"{s}:{r}" for s, r in zip(diff.side, diff.reason))}


def frames(path: str) -> dict:
    from tests.tools.accuracy_table import compare_trace

    r = compare_trace(path)
    return {"error": r.error, "tshark_frames": r.tshark_frames, "webtap_frames": r.webtap_frames,
            "both": r.both, "agree": r.agree, "categories": dict(sorted(r.categories.items()))}


def transactions(path: str) -> dict:
    from httpanalyzer.compare import MODES, compare_trace

    try:
        t, fd, w, tx, _ = compare_trace(path, jobs=1)
    except (OSError, ValueError) as e:       # webtap cannot read it (a TsharkError propagates)
        return {"error": type(e).__name__}
    out = {"webtap": int(len(w)), "webtap_pairs": int(((w.q >= 0) & (w.r >= 0)).sum())}
    for m in MODES:
        tm, fm = t[t["mode"] == m], fd[fd["mode"] == m]
        rows = tx[m]
        out[m] = {"tshark": int(len(rows)), "tshark_pairs": int(((rows.q >= 0) & (rows.r >= 0)).sum()),
                  "both": int((tm.side == "both").sum()),
                  "only_tshark": int((tm.side == "only_tshark").sum()),
                  "only_webtap": int((tm.side == "only_webtap").sum()),
                  "categories": _counts(list(tm[tm.differs].category) + list(fm.category))}
    return out


def _one(args):
    kind, root, rel = args
    return rel, {"pairs": pairs, "frames": frames, "transactions": transactions}[kind](
        str(Path(root) / rel))


def compute(kind: str, root: Path, rels: list[str], workers: int = 2) -> dict:
    with ProcessPoolExecutor(max_workers=workers) as ex:
        return dict(ex.map(_one, [(kind, str(root), r) for r in rels], chunksize=1))


def load(kind: str) -> dict:
    return json.loads((EXPECT / f"{kind}.json").read_text())


def main(argv: list[str]) -> int:
    kind = argv[0]
    write = "--write" in argv
    rest = [a for a in argv[1:] if a != "--write"]
    rels = None
    if "--traces" in rest:
        i = rest.index("--traces")
        rels = [x.split("#")[0].strip() for x in Path(rest[i + 1]).read_text().splitlines()]
        rels = [x for x in rels if x]
        del rest[i:i + 2]
    root = Path(rest[0]) if rest else shared_traces()
    rels = rels or all_traces(root)
    got = compute(kind, root, rels)
    if write:
        EXPECT.mkdir(exist_ok=True)
        old = load(kind) if (EXPECT / f"{kind}.json").exists() else {}
        old.update(got)
        (EXPECT / f"{kind}.json").write_text(json.dumps(dict(sorted(old.items())), indent=1) + "\n")
        print(f"expectations: wrote {len(got)} traces to {kind}.json")
        return 0
    want = load(kind)
    bad = [r for r in rels if want.get(r) != got[r]]
    for r in bad:
        print(f"{r}: expected {want.get(r)}\n{' ' * len(r)}  got      {got[r]}")
    print(f"expectations {kind}: {len(rels) - len(bad)} of {len(rels)} traces as pinned")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
