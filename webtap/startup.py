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
"""
from __future__ import annotations

import gc


def run_command(load) -> int:
    """Run a command: `load()` imports its module and returns its `main`; returns main's code."""
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

