"""Importing the toolkit starts no BLAS thread pool (numpy's OpenBLAS spins one thread per
core for a while after import: on 2 cores that took a core from the packet loop)."""
import os
import subprocess
import sys

import pytest

PROBE = """
import os
import {module}
tasks = os.listdir("/proc/self/task")
print(os.environ.get("OPENBLAS_NUM_THREADS"),
      ",".join(open(f"/proc/self/task/{{t}}/comm").read().strip() for t in tasks))
"""


def _threads(module: str, **env_over) -> tuple[str, list[str]]:
    """OPENBLAS_NUM_THREADS in a fresh interpreter after `import module`, and the names of its
    threads other than pyarrow's jemalloc background thread."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update(env_over)
    setting, names = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], env=env,
                                    capture_output=True, text=True, check=True).stdout.split()
    return setting, [n for n in names.split(",") if n != "jemalloc_bg_thd"]


# httpanalyzer.stream, not httpanalyzer: the package itself loads no numpy any more (lazy names)
@pytest.mark.parametrize("module", ["httpanalyzer.stream", "urlfilter.tree", "webtap.capture"])
def test_no_blas_threads(module):
    setting, threads = _threads(module)
    assert setting == "1"
    assert len(threads) == 1, threads           # the main thread alone


def test_user_setting_wins():
    setting, threads = _threads("httpanalyzer.stream", OPENBLAS_NUM_THREADS="2")
    assert setting == "2"
    assert len(threads) == 2, threads           # main + the one extra OpenBLAS thread


def test_package_import_loads_nothing_heavy():
    """`import httpanalyzer` (what every command does first) loads neither numpy nor pyarrow:
    its names load on first use, so a command pays only for what its run needs."""
    probe = ("import sys, httpanalyzer, webtap, urlfilter; "
             "print(','.join(m for m in ('numpy', 'pyarrow', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout
    # and the lazy names still resolve
    out = subprocess.run([sys.executable, "-c", "import httpanalyzer, webtap; "
                          "print(httpanalyzer.SCHEMA.names[0], callable(httpanalyzer.analyze), "
                          "webtap.libpcap_version().startswith('libpcap'))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["client_ip", "True", "True"], out.stdout
