"""The golden records (tests/golden/golden.py): the commands' output on the fixed traces is byte
for byte what tests/golden/records/ holds. A refactor that changes one byte fails here; a change
of behaviour regenerates the records (`python -m tests.golden.golden --write`) in a commit that
says what changed and why.

Under CI (CI=true) a missing shared traces folder or a missing tshark is a failure, not a skip.
"""
from __future__ import annotations

import os
import shutil

import pytest

from tests.golden import golden

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _require(ok: bool, what: str) -> None:
    if ok:
        return
    if CI:
        pytest.fail(f"golden records: {what} (CI=true: a missing prerequisite fails)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("golden")


def test_records_cover_every_trace_and_kind():
    """The committed records are exactly what golden.py produces names for (no stale file, no
    trace without its records)."""
    have = {str(p.relative_to(golden.RECORDS)) for p in golden.RECORDS.rglob("*") if p.is_file()}
    want = set()
    for rel in golden.traces():
        n = golden.name(rel)
        want |= {f"httpanalyzer/{n}.csv", f"scan/{n}.csv", f"scan/{n}.json", f"compare/{n}.json"}
    for rel in golden.tls_traces():
        for kind in golden.TLS_KINDS:
            want |= set(golden.record_names(rel, kind))
    assert have == want
    for p in golden.RECORDS.rglob("*"):
        if p.is_file():
            text = p.read_text(encoding="utf-8")
            assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text, p


@pytest.mark.parametrize("kind", golden.KINDS)
@pytest.mark.parametrize("rel", golden.traces())
def test_golden(rel, kind, tmp):
    _require(golden.shared_traces().is_dir(), f"shared traces absent: {golden.shared_traces()}")
    _require((golden.shared_traces() / rel).exists(), f"shared trace absent: {rel}")
    if kind == "compare":
        _require(shutil.which("tshark") is not None, "tshark is not on PATH")
    (tmp / kind).mkdir(exist_ok=True)
    _check(golden.produce(rel, kind, tmp / kind))


def _check(got: dict) -> None:
    for name, data in got.items():
        want = (golden.RECORDS / name).read_bytes()
        if data != want:
            a = want.decode(errors="replace").splitlines()
            b = data.decode(errors="replace").splitlines()
            import difflib

            diff = "\n".join(list(difflib.unified_diff(a, b, "golden", "now", lineterm=""))[:60])
            pytest.fail(f"{name} differs from its golden record:\n{diff}")


@pytest.mark.parametrize("kind", golden.TLS_KINDS)
@pytest.mark.parametrize("rel", golden.tls_traces())
def test_golden_tls(rel, kind, tmp):
    root = golden.shared_tls_traces()
    _require(root.is_dir(), f"shared TLS traces absent: {root}")
    _require((root / rel).exists(), f"shared trace absent: {rel}")
    (tmp / kind).mkdir(exist_ok=True)
    _check(golden.produce(rel, kind, tmp / kind))


def test_golden_tls_records_have_hits_and_forged_frames():
    """The TLS golden set exercises what it is for: SNI hits over TLS and QUIC, forged frames,
    and timing rows (a blacklist that stopped matching would make the records trivially stable)."""
    import csv

    hits = {"tls": 0, "quic": 0}
    for p in (golden.RECORDS / "scan-tls").glob("*.csv"):
        for r in csv.DictReader(p.open()):
            if r["hit"] == "true":
                hits[r["proto"]] += 1
    forged = sum(len(p.read_text().split()) for p in (golden.RECORDS / "forged").glob("*.txt"))
    timing = sum(max(0, len(p.read_text().splitlines()) - 1)
                 for p in (golden.RECORDS / "timing").glob("*.csv"))
    assert hits["tls"] >= 3 and hits["quic"] >= 1, hits
    assert forged == 2 * hits["tls"] + hits["quic"], (forged, hits)
    assert timing >= 5
