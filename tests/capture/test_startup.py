"""Importing the toolkit starts no BLAS thread pool (numpy's OpenBLAS spins one thread per
core for a while after import: on 2 cores that took a core from the packet loop)."""
import os
import subprocess
import sys

import pytest

# Threads are counted by name in /proc. pyarrow's jemalloc background thread names itself
# "jemalloc_bg_thd" once it runs; until then (on a loaded machine: until it gets a core) it is
# called "python" like the main thread and OpenBLAS's workers. So the probe waits for the event
# "the threads other than jemalloc's are the expected number" rather than reading once; it gives
# up after 60 s (a failure then, naming the threads: a real extra thread never goes away).
PROBE = """
import os, time
import {module}
deadline = time.monotonic() + 60
while True:
    names = [open(f"/proc/self/task/{{t}}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    if len([n for n in names if n != "jemalloc_bg_thd"]) == {expected} or time.monotonic() > deadline:
        break
    time.sleep(0.01)
print(os.environ.get("OPENBLAS_NUM_THREADS"), ",".join(names))
"""


def _threads(module: str, expected: int, **env_over) -> tuple[str, list[str]]:
    """OPENBLAS_NUM_THREADS in a fresh interpreter after `import module`, and the names of its
    threads other than pyarrow's jemalloc background thread (once `expected` many, see PROBE)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update(env_over)
    setting, names = subprocess.run([sys.executable, "-c", PROBE.format(module=module, expected=expected)],
                                    env=env, capture_output=True, text=True, check=True).stdout.split()
    return setting, [n for n in names.split(",") if n != "jemalloc_bg_thd"]


# httpanalyzer.stream, not httpanalyzer: the package itself loads no numpy any more (lazy names)
@pytest.mark.parametrize("module", ["httpanalyzer.stream", "urlfilter.tree", "webtap.capture"])
def test_no_blas_threads(module):
    setting, threads = _threads(module, 1)
    assert setting == "1"
    assert len(threads) == 1, threads           # the main thread alone


def test_user_setting_wins():
    setting, threads = _threads("httpanalyzer.stream", 2, OPENBLAS_NUM_THREADS="2")
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


def _mapped_after(code: str) -> list[str]:
    """The shared libraries named libpcap* mapped in a fresh interpreter after `code` ran."""
    probe = code + ("\nimport sys\nprint(' '.join(sorted({l.split()[-1].rsplit('/', 1)[-1] "
                    "for l in open('/proc/self/maps') if '/libpcap' in l})))")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.split()


def test_file_read_without_filter_maps_no_libpcap(tmp_path):
    """Reading a trace without a BPF filter never calls libpcap, so libpcap (and the nine
    libraries it links on Debian) is not mapped (ext/read/pcapload.h); a filter, the version or
    a link-type name load it."""
    trace = tmp_path / "one.pcap"
    # pcap header (LINKTYPE_ETHERNET) + one 60-byte record of zeros
    trace.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000")
                      + bytes.fromhex("01000000000000003c0000003c000000") + bytes(60))
    read = (f"from webtap.capture import open_trace\n"
            f"with open_trace({str(trace)!r}{{bpf}}) as t:\n"
            f"    n = sum(len(b) for b in t)\n"
            f"assert n == {{n}}, n\n")
    assert _mapped_after(read.format(bpf="", n=1)) == []
    assert _mapped_after(read.format(bpf=", bpf='tcp'", n=0))[0].startswith("libpcap.so")
    assert _mapped_after("import webtap; webtap.libpcap_version()")[0].startswith("libpcap.so")
    assert _mapped_after("from webtap._ext.source import linktype_name\n"
                         "assert linktype_name(1) == ('EN10MB', 'Ethernet')")[0].startswith("libpcap.so")
