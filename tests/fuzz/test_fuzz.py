"""Fuzz targets in make test: every regression input replayed, every seed accepted, and a
few seconds of real atheris fuzzing per target (the long runs are make fuzz, docs/ROBUSTNESS.md)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common import c_tool
from tests.fuzz.run import REGRESSIONS, ROOT
from tests.fuzz.targets import CHECKS, SEEDS, TARGETS

SMOKE_SECONDS = int(os.environ.get("WEBTAP_FUZZ_SMOKE_SECONDS", "3"))

_regressions = sorted(p for p in REGRESSIONS.glob("*/*") if p.is_file())


@pytest.mark.parametrize("path", _regressions, ids=[f"{p.parent.name}/{p.name}" for p in _regressions])
def test_regression_input(path: Path):
    """Each input that once crashed a target (or broke one of its checks) now passes it."""
    CHECKS[path.parent.name](path.read_bytes())


def test_every_target_has_regressions_dir_or_none_found():
    for d in REGRESSIONS.iterdir():
        assert d.name in TARGETS, f"regressions for an unknown target: {d}"


@pytest.mark.parametrize("target", TARGETS)
def test_seeds_pass(target):
    shared = os.environ.get("WEBTAP_SHARED")
    seeds = SEEDS[target](shared if shared and os.path.isdir(shared) else None)
    assert seeds
    for s in seeds:
        CHECKS[target](s)


@pytest.mark.skipif(bool(os.environ.get("WEBTAP_EXT_DIR")), reason="atheris' libFuzzer is not run under an "
                    "externally preloaded sanitizer runtime (make sanitize); make fuzz does that itself")
@pytest.mark.parametrize("target", TARGETS)
def test_smoke_fuzz(target, tmp_path):
    """A short real fuzzing run: libFuzzer starts, executes inputs, finds nothing and exits 0."""
    pytest.importorskip("atheris")
    # through benchmarks/rss_exec (a small launcher that forks the run): libFuzzer's RSS limit
    # reads the process's peak RSS, which Linux keeps across exec from the process that started
    # it, so a run started straight from this test worker inherited whatever peak an earlier
    # test of the same worker had reached (a full `make test` once saw 4,018 MB in every target's
    # run: "out-of-memory (limit: 3072Mb)" before the first input)
    r, w = os.pipe()
    try:
        p = subprocess.run([c_tool("rss_exec"), str(w), sys.executable, "-m", "tests.fuzz.run", target,
                            "--seconds", str(SMOKE_SECONDS), "--workdir", str(tmp_path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120 + SMOKE_SECONDS, pass_fds=(w,))
    finally:
        os.close(w)
        os.close(r)
    assert p.returncode == 0, p.stderr[-4000:]
    done = [ln for ln in p.stderr.splitlines() if ln.startswith("stat::number_of_executed_units")]
    assert done and int(done[0].split(":")[-1]) > 0, p.stderr[-2000:]
    assert not list((tmp_path / "artifacts" / target).iterdir())
