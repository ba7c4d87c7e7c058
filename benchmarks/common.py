"""Benchmark plumbing shared by every benchmark: the trace, timing one process, the table.

Each contender runs in its own process (as msgspec's and cyvcf2's benchmarks do), started through
benchmarks/rss_exec.c so that its peak RSS is its own: Linux keeps a process's peak RSS across
exec, and a child forked (or vforked) by this driver starts with the driver's pages mapped, so
os.wait4 on a direct child reported the driver's high-water mark (1.3 GB for every contender of
bench_feeder, 134 MB for a C loop). The launcher is small; the command it forks starts from it.

How contenders are compared (`paired`): every contender gets the same number of runs (REPEAT,
from $WEBTAP_BENCH_REPEAT, the one variable every benchmark reads), the runs alternate between
contenders (A B C A B C ...: a change of machine load hits each contender alike), and the
headline of each contender is the median over rounds of its time relative to the reference's
time in the same round (the median of per-pair ratios of whole processes), printed with the load
average of the moment. The trace is in the page cache before the first run.
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


#: runs per contender, for every benchmark (one name: $WEBTAP_BENCH_REPEAT)
REPEAT = int(os.environ.get("WEBTAP_BENCH_REPEAT", "3"))


def load_average() -> str:
    a = os.getloadavg()
    return f"load average {a[0]:.1f} {a[1]:.1f} {a[2]:.1f} on {len(os.sched_getaffinity(0))} cores"


def command(name: str) -> list[str]:
    """The installed command `name` (httpanalyzer, urlfilter, webtap) of PYTHON's environment, as
    a user runs it: the console script beside PYTHON, else `PYTHON -P -m name` (the package's
    __main__, which the script runs too). Both start through webtap.startup (Arrow's memory pool
    chosen, the collector paused during the imports and frozen after them); a contender started
    as `python -c "from httpanalyzer.cli import main; ..."` or `-m httpanalyzer.cli` skips it and
    is a process no user runs (bench_tls did so until the sixteenth session:
    docs/PERFORMANCE.md). -P: the working directory (the repository) is not put on sys.path, so
    the installed package is the one that runs."""
    exe = os.path.join(os.path.dirname(PYTHON), name)
    return [exe] if os.path.exists(exe) else [PYTHON, "-P", "-m", name]


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


def c_tool(name: str, *libs: str) -> str:
    """benchmarks/<name>.c built with cc -O2 into bench-out/<name> (again when the source is
    newer); built under a temporary name and renamed, so concurrent benchmarks never run a
    half-written binary."""
    exe = OUT / name
    src = REPO / "benchmarks" / f"{name}.c"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        OUT.mkdir(parents=True, exist_ok=True)
        tmp = OUT / f".{name}.{os.getpid()}"
        subprocess.run(["cc", "-O2", "-o", str(tmp), str(src), *libs], check=True)
        os.replace(tmp, exe)
    return str(exe)


def run(cmd: list[str], stdout=subprocess.PIPE) -> tuple[float, int, bytes]:
    """Run `cmd`; return (wall seconds, its own peak RSS in bytes, stdout). The wall time
    includes the launcher's fork (well under a millisecond)."""
    launcher = c_tool("rss_exec")
    r, w = os.pipe()
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen([launcher, str(w), *cmd], stdout=stdout, stderr=subprocess.PIPE,
                                pass_fds=(w,))
    finally:
        os.close(w)
    with os.fdopen(r) as peak:
        out = proc.stdout.read() if stdout == subprocess.PIPE else b""
        err = proc.stderr.read()
        proc.wait()
        wall = time.perf_counter() - t0
        text = peak.read().strip()
    if proc.returncode != 0 or not text:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {err.decode(errors='replace')[-500:]}")
    return wall, int(text) * 1024, out


def best_of(cmd: list[str], repeats: int, stdout=subprocess.PIPE) -> tuple[float, int, bytes]:
    results = [run(cmd, stdout) for _ in range(repeats)]
    wall = min(r[0] for r in results)
    return wall, max(r[1] for r in results), results[-1][2]


def median(xs) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def paired(contenders: list[tuple[str, list[str]]], repeats: int = REPEAT,
           stdout=subprocess.PIPE) -> dict[str, dict]:
    """Run every contender (name, cmd[, stdout]) `repeats` times, alternating (round r runs
    each contender once, in the given order). Returns per name: walls (one per round), rss
    (max), outs (stdouts)."""
    res = {c[0]: {"walls": [], "rss": 0, "outs": []} for c in contenders}
    for _ in range(repeats):
        for name, cmd, *own in contenders:
            wall, rss, out = run(cmd, own[0] if own else stdout)
            r = res[name]
            r["walls"].append(wall)
            r["rss"] = max(r["rss"], rss)
            r["outs"].append(out)
    return res


def pair_ratios(res: dict[str, dict], name: str, ref: str) -> list[float]:
    """Per round: the reference's time / this contender's time (> 1: the reference is slower)."""
    return [a / b for a, b in zip(res[ref]["walls"], res[name]["walls"])]


def paired_table(res: dict[str, dict], ref: str, packets: int, wire_bytes: int,
                 extra: dict[str, float] | None = None) -> str:
    """Median seconds, Mpps at the median, peak RSS and the median of per-round ratios
    `contender time / reference time` for every contender; `extra`: labelled in-process
    figures (seconds) printed below, not ratios of whole processes."""
    lines = [f"{'contender (whole process)':<34} {'median s':>9} {'min s':>8} {'Mpps':>7} "
             f"{'peak RSS':>10} {'time / ' + ref + ' (median of pairs)':>40}"]
    for name, r in res.items():
        m = median(r["walls"])
        ratio = median([1 / x for x in pair_ratios(res, name, ref)])
        lines.append(f"{name:<34} {m:>9.3f} {min(r['walls']):>8.3f} {packets / m / 1e6:>7.2f} "
                     f"{r['rss'] / 2**20:>8.1f}MB {ratio:>39.3f}x")
    for label, sec in (extra or {}).items():
        lines.append(f"{label:<34} {sec:>9.3f} {'':>8} {packets / sec / 1e6:>7.2f}   "
                     f"(in-process loop figure, not a whole process)")
    lines.append(f"{len(next(iter(res.values()))['walls'])} alternating rounds; {load_average()}")
    return "\n".join(lines)


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
