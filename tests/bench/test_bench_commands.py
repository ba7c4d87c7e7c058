"""The benchmarks time webtap's commands as a user runs them (benchmarks.common.command): the
console script beside the benchmark's interpreter, else `python -P -m PACKAGE`; either starts
through webtap.startup (Arrow's memory pool, the collector paused and frozen). bench_tls timed
`python -c "from httpanalyzer.cli import main; ..."` until the sixteenth session: a process that
skips that start-up, which no user runs (docs/PERFORMANCE.md). Speed is not checked here."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks import common

NAMES = ("httpanalyzer", "urlfilter", "webtap")


def _starts_through_startup(cmd: list[str], cwd) -> bool:
    """Whether `cmd --help` exits 0 having imported webtap.startup (the interpreter's import
    log, PYTHONPROFILEIMPORTTIME: it reaches a console script's interpreter too)."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    r = subprocess.run(cmd + ["--help"], capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return any(line.startswith("import time:") and line.split("|")[-1].strip() == "webtap.startup"
               for line in r.stderr.splitlines())


def test_the_console_script_beside_the_interpreter_is_chosen(tmp_path, monkeypatch):
    (tmp_path / "python").touch()
    script = tmp_path / "httpanalyzer"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(common, "PYTHON", str(tmp_path / "python"))
    assert common.command("httpanalyzer") == [str(script)]
    # no script of that name there: the package's __main__, the repository kept off sys.path
    assert common.command("urlfilter") == [str(tmp_path / "python"), "-P", "-m", "urlfilter"]


@pytest.mark.parametrize("name", NAMES)
def test_a_benchmarked_command_starts_as_the_installed_one(name, tmp_path):
    assert _starts_through_startup(common.command(name), tmp_path)
    # the fallback's form with this interpreter, too
    assert _starts_through_startup([sys.executable, "-P", "-m", name], tmp_path)


def test_the_old_way_of_starting_skips_the_start_up(tmp_path):
    """The check above can fail: the entry bench_tls used before starts without it."""
    code = "import sys; from httpanalyzer.cli import main; sys.exit(main(sys.argv[1:]))"
    assert not _starts_through_startup([sys.executable, "-P", "-c", code], tmp_path)
