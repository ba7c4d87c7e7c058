"""Where the blacklist store lives by default: light (no numpy, no SQLite), so that the command
line's help text can say it without loading the store (`urlfilter --help`, start-up)."""
from __future__ import annotations

import os
from pathlib import Path


def default_db_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "webtap" / "urlfilter.db"
