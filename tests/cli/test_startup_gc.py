"""The installed commands start through webtap.startup: the cyclic collector is paused while the
command's imports load, the start-up objects are frozen, and the collector is on for the run
(docs/PERFORMANCE.md, "Start-up")."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tomllib

import pytest

from webtap.startup import run_command

REPO = pathlib.Path(__file__).resolve().parents[2]

def _collections(code: str) -> int:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(p.stdout.split()[-1])


def test_no_collection_during_the_commands_imports():
    # collections between the start of the imports and the command's main, for the same imports
    # loaded plainly and through run_command. The plain import of httpanalyzer.cli (numpy, the
    # extensions, argparse) triggers collections: checked here, so the comparison has teeth.
    load = ("import gc\n"
            "n = lambda: sum(s['collections'] for s in gc.get_stats())\n"
            "def load():\n"
            "    global before\n"
            "    before = n()\n"
            "    import httpanalyzer.cli\n"
            "    return lambda: print(n() - before) or 0\n")
    assert _collections(load + "load()()\n") > 0
    assert _collections(load + "from webtap.startup import run_command\nrun_command(load)\n") == 0


def test_collector_state_around_the_command():
    import gc

    seen = {}

    def load():
        seen["during_load"] = gc.isenabled()
        junk = []
        junk.append(junk)           # a cycle made during start-up

        def main():
            seen["during_run"] = gc.isenabled()
            seen["frozen"] = gc.get_freeze_count()
            return 7
        return main

    was = gc.isenabled()
    try:
        gc.enable()
        assert run_command(load) == 7
        assert seen["during_load"] is False
        assert seen["during_run"] is True
        assert seen["frozen"] > 0
        assert gc.isenabled()
        # a collector the caller had turned off stays off
        gc.disable()
        assert run_command(load) == 7
        assert not gc.isenabled()
        # a load that fails still gives the collector back
        gc.enable()

        def bad():
            raise ImportError("no such command")
        with pytest.raises(ImportError):
            run_command(bad)
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


def test_entry_points_go_through_startup():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {name: f"{name}.__main__:main" for name in ("webtap", "urlfilter", "httpanalyzer")}
    for name in scripts:
        p = subprocess.run([sys.executable, "-m", name, "--help"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert "usage:" in p.stdout
    # a bad option still gives the contract's exit 2 through the entry
    p = subprocess.run([sys.executable, "-m", "httpanalyzer", "--no-such-option"], capture_output=True, text=True)
    assert p.returncode == 2


@pytest.mark.parametrize("user", [None, "mimalloc", "jemalloc"])
def test_commands_use_the_system_arrow_pool_unless_the_user_chose(user):
    """The installed commands run with Arrow's system allocator (webtap.startup: mimalloc's huge
    pages cost a short command their zeroing); a pool the user names in
    ARROW_DEFAULT_MEMORY_POOL is kept. Checked in a fresh process, pyarrow imported by the
    command's load as a command's module does."""
    import pyarrow as pa

    if user == "jemalloc":
        try:
            pa.jemalloc_memory_pool()
        except NotImplementedError:
            pytest.skip("this pyarrow has no jemalloc")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if user:
        env["ARROW_DEFAULT_MEMORY_POOL"] = user
    code = ("from webtap.startup import run_command\n"
            "def load():\n"
            "    import pyarrow as pa\n"
            "    return lambda: print(pa.default_memory_pool().backend_name) or 0\n"
            "run_command(load)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [user or "system"]
