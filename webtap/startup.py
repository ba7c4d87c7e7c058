"""Start-up and exit of the installed commands (`webtap`, `httpanalyzer`, `urlfilter`).

A command's process spends most of a short run importing (numpy, the extensions, argparse) and
tearing the interpreter down. CPython's cyclic garbage collector runs during both: allocation
counts trigger collections while the imports build hundreds of thousands of objects (module
dicts, functions, types), and `Py_FinalizeEx` collects everything again at exit. None of those
objects is garbage: they live as long as the process. So the entry point

- pauses the collector while the command's module and its imports load, then moves everything
  they made into the permanent generation (`gc.freeze()`) and resumes it: the packet loop and
  the record building run with the collector on, as any Python program does, but no
  collection ever scans the start-up objects again;
- freezes again when the command returns: the final collections of interpreter shutdown skip
  what the run leaves (the outputs are committed and stdout flushed by then: webtap.clikit).

Measured (callgrind, the wheel install, `httpanalyzer HEADER-ONLY.pcap`, docs/PERFORMANCE.md):
441.0 M -> 399.8 M instructions; the collector's passes (46.1 M) are gone and shutdown falls
from 35.1 M to 8.8 M. Only the installed commands and `python -m PACKAGE` go through here:
importing a package (a notebook, the tests) leaves the collector as it was.

The entry point also chooses Arrow's memory pool before pyarrow is imported: the system
allocator (glibc malloc) instead of the pyarrow wheels' default, mimalloc, unless the user set
ARROW_DEFAULT_MEMORY_POOL. mimalloc asks the kernel for transparent huge pages for its arenas,
and a short command that touches a few MB of each pays for zeroing whole 2 MiB pages: in `perf
record` of `httpanalyzer TLS-TRACE --tls-out ... --exchanges-out ...` the kernel's clear_page
took 2-29 % of all samples (varying run to run with where the arenas landed); with the system
pool it is gone, and the run's peak memory falls from ~192 to ~137 MiB (docs/PERFORMANCE.md).
"""
from __future__ import annotations

import gc
import os

#: Arrow's memory pool for the installed commands (module docstring)
ARROW_POOL = "system"


def run_command(load) -> int:
    """Run a command: `load()` imports its module and returns its `main`; returns main's code."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_POOL)
    was = gc.isenabled()
    gc.disable()
    try:
        main = load()
    finally:
        gc.freeze()
        if was:
            gc.enable()
    rc = main()
    gc.freeze()
    return rc


def entry(module: str) -> int:
    """`module`'s `main()` as a command (the body of each package's __main__)."""
    return run_command(lambda: getattr(__import__(module, fromlist=["main"]), "main"))

