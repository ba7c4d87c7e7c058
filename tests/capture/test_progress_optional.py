"""The progress bar is tqdm's, the optional extra webtap[progress] (issue 29): with tqdm a bar is
drawn when asked; without it (not installed) a trace asked for a bar (open_trace(progress=True),
plan_chunks(progress=True)) reads the same packets and draws none, instead of failing."""
from __future__ import annotations

import sys

import pytest

from tests import pcapbuild as pb
from webtap.capture import open_trace, plan_chunks, progress_bar

PACKETS = [(i * 1_000_000, bytes(60 + i)) for i in range(5)]


def _trace(tmp_path):
    p = tmp_path / "t.pcap"
    p.write_bytes(pb.pcap(PACKETS))
    return p


def _count(path) -> int:
    return sum(len(b) for b in open_trace(path, progress=True))


def test_a_bar_with_tqdm(tmp_path):
    pytest.importorskip("tqdm")
    bar = progress_bar(10, "x")
    assert bar is not None and type(bar).__module__.startswith("tqdm")
    bar.close()
    assert _count(_trace(tmp_path)) == len(PACKETS)


def test_no_tqdm_no_bar_same_packets(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)          # `import tqdm` raises ImportError
    assert progress_bar(10, "x") is None
    path = _trace(tmp_path)
    assert _count(path) == len(PACKETS)
    assert list(plan_chunks(path, progress=True)) == list(plan_chunks(path, progress=False))
