import os
from pathlib import Path

import pytest


def shared_dir() -> Path:
    env = os.environ.get("WEBTAP_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".." / "shared"


@pytest.fixture
def shared():
    """Path of a file under the shared data folder; skips the test when it is absent."""
    def get(rel: str) -> Path:
        p = shared_dir() / rel
        if not p.exists():
            pytest.skip(f"shared file absent: {p}")
        return p
    return get
