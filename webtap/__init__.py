"""webtap core: the stages shared by httpanalyzer and urlfilter (capture and dissect).

Data flow: capture (webtap.capture) -> dissect (webtap.dissect) -> pair (httpanalyzer) |
match (urlfilter) -> records -> analysis.

Importing the package loads nothing heavy (no numpy, no extension): start-up is part of every
command's run, so each module imports what it needs when it is used (`libpcap_version` loads
the capture extension on first use).
"""
__version__ = "0.1.0"

import os as _os

# numpy's OpenBLAS starts one thread per core at import, and each spins for a while before it
# sleeps. webtap does no linear algebra; on a 2-core machine those threads took a core from the
# packet loop (bench-4: 0.34 -> 0.27 s wall for one analyzer process, 0.63 -> 0.48 s with two
# feeder consumers, each of which imports numpy too). Only a default: a value the user set
# wins, and it applies only if numpy was not imported before webtap.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__all__ = ["__version__", "libpcap_version"]


def __getattr__(name):
    if name == "libpcap_version":
        from webtap._ext.source import libpcap_version

        return libpcap_version
    raise AttributeError(f"module 'webtap' has no attribute {name!r}")
