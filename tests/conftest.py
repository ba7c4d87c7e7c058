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
