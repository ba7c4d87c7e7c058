"""Benchmark plumbing shared by every benchmark: the trace, timing one process, the table.

Each contender runs in its own process (as msgspec's and cyvcf2's benchmarks do) so that its
peak RSS is its own: os.wait4 returns the resource usage of exactly that child. Times are the
minimum over repeats, with the trace already in the page cache.
"""
from __future__ import annotations

import os
import pathlib
import resource
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared"))
OUT = REPO / "bench-out"
#: the interpreter that runs webtap contenders: $WEBTAP_BENCH_PYTHON (`make bench` points it at
#: a venv with webtap installed from a wheel, benchmarks/wheel_env.py), else this one
PYTHON = os.environ.get("WEBTAP_BENCH_PYTHON", sys.executable)


def webtap_cmd(module: str, *args: str) -> list[str]:
    """Command running benchmarks/<module>.py under PYTHON. By path, not with -m, so that the
    repository's source packages do not shadow an installed webtap."""
    return [PYTHON, str(REPO / "benchmarks" / f"{module}.py"), *args]


def bench_trace(folder: pathlib.Path | None = None) -> pathlib.Path:
    """The benchmark trace: $WEBTAP_BENCH_TRACE, or one built from the shared captures by
    ../shared/scripts/make-bench-trace ($WEBTAP_BENCH_ROUNDS rounds, default 4) in `folder`
    (default bench-out/; the tests pass their cache folder). Built once under an exclusive lock
    into a temporary name and renamed into place, so that concurrent callers (pytest -n 2, two
    benchmarks) neither build it twice nor read it half-written."""
    import fcntl
    import tempfile

    env = os.environ.get("WEBTAP_BENCH_TRACE")
    if env:
        return pathlib.Path(env)
    rounds = int(os.environ.get("WEBTAP_BENCH_ROUNDS", "4"))
    folder = pathlib.Path(folder) if folder is not None else OUT
    path = folder / f"bench-{rounds}.pcap"
    if path.exists():                  # only ever complete: it appears by rename
        return path
    folder.mkdir(parents=True, exist_ok=True)
    script = SHARED / "scripts" / "make-bench-trace"
    if not script.exists():
        sys.exit(f"no benchmark trace: set WEBTAP_BENCH_TRACE or provide {script}")
    with open(folder / f".bench-{rounds}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)       # released when the file closes, even on a crash
        if not path.exists():                  # another process may have built it meanwhile
            fd, tmp = tempfile.mkstemp(prefix=f".bench-{rounds}.", suffix=".pcap", dir=folder)
            os.close(fd)
            os.chmod(tmp, 0o644)                   # as a plain open() would have made it
            try:
                subprocess.run([sys.executable, str(script), tmp, "--rounds", str(rounds)], check=True,
                               stdout=subprocess.DEVNULL)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    return path


def warm(path: pathlib.Path) -> None:
    """Read the file once so every contender starts with it in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run(cmd: list[str], stdout=subprocess.PIPE) -> tuple[float, int, bytes]:
    """Run `cmd`; return (wall seconds, peak RSS in bytes, stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    out = proc.stdout.read() if stdout == subprocess.PIPE else b""
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {err.decode(errors='replace')[-500:]}")
    return wall, usage.ru_maxrss * 1024, out


def best_of(cmd: list[str], repeats: int, stdout=subprocess.PIPE) -> tuple[float, int, bytes]:
    results = [run(cmd, stdout) for _ in range(repeats)]
    wall = min(r[0] for r in results)
    return wall, max(r[1] for r in results), results[-1][2]


def table(rows: list[dict], packets: int, wire_bytes: int, ref: str) -> str:
    """A text table: seconds, Mpps, Gb/s, peak RSS and the ratio of each row to `ref`."""
    base = next(r["seconds"] for r in rows if r["name"] == ref)
    lines = [f"{'contender':<34} {'seconds':>9} {'Mpps':>8} {'Gb/s':>8} {'peak RSS':>10} "
             f"{'time vs ' + ref:>18}"]
    for r in rows:
        s = r["seconds"]
        lines.append(f"{r['name']:<34} {s:>9.3f} {packets / s / 1e6:>8.2f} "
                     f"{wire_bytes * 8 / s / 1e9:>8.2f} {r['rss'] / 2**20:>8.1f}MB {s / base:>17.2f}x")
    return "\n".join(lines)


def peak_rss_self() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
