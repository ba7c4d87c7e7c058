"""The `httpanalyzer` command (pyproject's entry point) and `python -m httpanalyzer`: httpanalyzer.cli's main,
started through webtap.startup (the collector paused during the imports, frozen at exit)."""
import sys

from webtap.startup import entry


def main() -> int:
    return entry("httpanalyzer.cli")


if __name__ == "__main__":
    sys.exit(main())
