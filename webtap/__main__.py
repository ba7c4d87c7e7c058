"""The `webtap` command (pyproject's entry point) and `python -m webtap`: webtap.cli's main,
started through webtap.startup (the collector paused during the imports, frozen at exit)."""
import sys

from webtap.startup import entry


def main() -> int:
    return entry("webtap.cli")


if __name__ == "__main__":
    sys.exit(main())
