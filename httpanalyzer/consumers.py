"""How many consumer processes the analyzer uses when the user does not say (`--consumers`).

Kept apart from httpanalyzer.feeder so that the command line can decide without importing the
feeder (numpy, pyarrow, multiprocessing): start-up is part of every run.

The offline feeder has one reader that only it can run: a read-ahead thread (the read() copy
out of the page cache and the record walk) and a classify-and-dispatch thread; the consumers
dissect and pair. On this project's 2-core machine every configuration with consumers was
slower than one process with its read-ahead thread (docs/FEEDER.md, docs/PERFORMANCE.md: the
reader's two threads already fill both cores, and reading is ~60 % of the single process's
work), so consumers are only worth starting when cores are left over for them after the
reader's two threads, and at least two (one consumer only moves the work elsewhere).
"""
from __future__ import annotations

import os

#: cores the feeder's reader keeps busy by itself (read-ahead thread + dispatch thread)
READER_CORES = 2
#: consumers below this number cannot gain over one process (one consumer moves the work)
MIN_CONSUMERS = 2
#: --consumers at most PER_CORE per core this process may run on, and never more than HARD_MAX:
#: each consumer is a process with a 4 MiB ring that spins while it waits, so consumers beyond
#: the cores only take turns (issue 30: 1000 on 2 cores forked for minutes)
PER_CORE = 4
HARD_MAX = 64


def available_cores() -> int:
    """The number of cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:          # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def max_consumers(cores: int | None = None) -> int:
    """The largest consumer count a run accepts: min(PER_CORE x cores, HARD_MAX)."""
    cores = available_cores() if cores is None else cores
    return max(1, min(PER_CORE * cores, HARD_MAX))


def choose_consumers(cores: int | None = None) -> tuple[int, str]:
    """(consumers, why) for a run where the user did not choose: 0 (one process and its
    read-ahead thread) unless the cores left after the reader's READER_CORES give at least
    MIN_CONSUMERS consumers."""
    cores = available_cores() if cores is None else cores
    spare = cores - READER_CORES
    if spare >= MIN_CONSUMERS:
        return spare, (f"{cores} cores: the reader keeps {READER_CORES} busy, "
                       f"{spare} consumer processes on the rest")
    return 0, (f"{cores} core{'s' if cores != 1 else ''}: one process and its read-ahead thread "
               f"(consumers gain only with {READER_CORES + MIN_CONSUMERS}+ cores; "
               f"--consumers N overrides)")
