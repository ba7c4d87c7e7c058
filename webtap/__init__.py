"""webtap core: the stages shared by httpanalyzer and urlfilter (capture and dissect).

Data flow: capture (webtap.capture) -> dissect (webtap.dissect) -> pair (httpanalyzer) |
match (urlfilter) -> records -> analysis.
"""
__version__ = "0.1.0"

import os as _os

# numpy's OpenBLAS starts one thread per core at import, and each spins for a while before it
# sleeps. webtap does no linear algebra; on a 2-core machine those threads took a core from the
# packet loop (bench-4: 0.34 -> 0.27 s wall for one analyzer process, 0.63 -> 0.48 s with two
# feeder consumers, each of which imports numpy too). Only a default: a value the user set
# wins, and it applies only if numpy was not imported before webtap.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from webtap._ext.source import libpcap_version  # noqa: E402

__all__ = ["__version__", "libpcap_version"]
