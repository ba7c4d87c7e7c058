"""Findings of the fuzzers whose input is too large to commit: rebuilt here, then checked the
same way as tests/fuzz/regressions/* (docs/ROBUSTNESS.md, "Findings")."""
from tests.fuzz.targets import check_blacklist


def test_csv_field_longer_than_csv_module_limit():
    """A CSV blacklist with one 200 KB field raised _csv.Error (field larger than field limit)
    and lost the whole file; now that line is rejected as too_long and the rest imported."""
    body = b"url,category\n" + b"a" * 200_000 + b",x\nb.example,y\n"
    check_blacklist(b"\1" + body)

    import tempfile
    from pathlib import Path

    from urlfilter import importers
    from urlfilter.store import Store

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "l.csv"
        p.write_bytes(body)
        s = Store(":memory:")
        (res,) = importers.import_path(s, p)
        assert (res.lines, res.added, dict(res.rejected)) == (2, 1, {"too_long": 1})
        import csv

        assert csv.field_size_limit() == 131072      # the process-wide limit is restored


def test_truncated_gzip_list_is_one_clear_oserror():
    """A list file with gzip's magic but cut short raised EOFError (not the documented OSError,
    so the CLI printed a traceback); a bad header raised gzip.BadGzipFile (found by fuzzing,
    tests/fuzz/regressions/blacklist/gzip-bad-method)."""
    import gzip
    import tempfile
    from pathlib import Path

    import pytest

    from urlfilter import importers
    from urlfilter.store import Store

    z = gzip.compress(b"a.example\nb.example\n" * 1000)
    check_blacklist(b"\0" + z[: len(z) // 2])
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "list"
        p.write_bytes(z[: len(z) // 2])
        with pytest.raises(OSError, match="damaged or truncated gzip"):
            importers.import_path(Store(":memory:"), p, fmt="list")
