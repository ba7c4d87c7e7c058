"""A test process takes Python's default SIGINT handler even when it was started with SIGINT
ignored (a background `make test &`, nohup, a runner's non-interactive shell): the live tests
stop their runs with SIGINT as Ctrl-C does, and hung for good with the inherited SIG_IGN
(tests/conftest.py)."""
from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def _pytest(ignored: bool) -> subprocess.CompletedProcess:
    def pre():
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.SIG_DFL)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(HERE / "_sigint_probe.py")], preexec_fn=pre, capture_output=True, text=True,
                          cwd=HERE.parent.parent)


def test_worker_takes_default_sigint_when_started_ignoring_it():
    p = _pytest(ignored=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed" in p.stdout


def test_probe_has_teeth():
    # the probe itself fails where SIGINT stays ignored: a plain interpreter keeps SIG_IGN
    code = ("import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)")
    p = subprocess.run([sys.executable, "-c", code], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
                       capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "True"
