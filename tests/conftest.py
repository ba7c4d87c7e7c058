"""Shared fixtures: where the real traces and blacklists are (../shared, or $WEBTAP_SHARED)."""
from __future__ import annotations

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared"))
TRACES = SHARED / "traces"


def shared_trace_files() -> list[pathlib.Path]:
    """Every capture file under ../shared/traces (empty when that folder is absent)."""
    if not TRACES.is_dir():
        return []
    return sorted(p for p in TRACES.rglob("*") if p.is_file() and p.suffix != ".md")


def require_shared(path: pathlib.Path) -> pathlib.Path:
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    return path


@pytest.fixture
def traces_dir() -> pathlib.Path:
    return require_shared(TRACES)


@pytest.fixture(scope="session")
def jumpy(tmp_path_factory) -> pathlib.Path:
    """The Ethernet shared traces concatenated into one pcap, in file order: the capture clock
    jumps back and forth (clock resets, GC), 1xx, repeats and damaged files' leftovers included."""
    from webtap.capture import open_trace, write_pcap

    traces = shared_trace_files()
    if not traces:
        pytest.skip(f"shared traces absent: {TRACES}")
    out = tmp_path_factory.mktemp("jumpy") / "jumpy.pcap"
    batches = []
    for p in traces:
        try:
            with open_trace(p) as t:
                bs = list(t)
                if any(lt != 1 for lt, _ in t.interfaces):
                    continue
        except (OSError, ValueError):
            continue
        batches.extend(bs)
    assert write_pcap(out, batches, linktype=1) > 50_000
    return out
