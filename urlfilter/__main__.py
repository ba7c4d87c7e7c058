"""The `urlfilter` command (pyproject's entry point) and `python -m urlfilter`: urlfilter.cli's main,
started through webtap.startup (the collector paused during the imports, frozen at exit)."""
import sys

from webtap.startup import entry


def main() -> int:
    return entry("urlfilter.cli")


if __name__ == "__main__":
    sys.exit(main())
