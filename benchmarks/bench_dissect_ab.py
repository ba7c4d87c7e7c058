"""The dissector's speed at two git revisions, in the same run: has a change slowed the walk?

    python -m benchmarks.bench_dissect_ab [REV_A [REV_B]]     # defaults: main HEAD

Each revision's ext/walk/dissect.pyx (with its .pxd/.h files) is taken with `git archive`, compiled
with the flags meson uses (-O3) into a temporary folder, and loaded in its own process together
with that revision's message/packet dtypes (webtap/records/message.py, webtap/schema.py before
2026-11-28; so struct sizes match). Every process dissects the same
packet batch, read once from $WEBTAP_BENCH_TRACE or from plain-Ethernet shared traces (the
path a change to the tunnel walk must leave alone), WEBTAP_BENCH_REPEATS times in-process.
Runs alternate A B, B A, ... (WEBTAP_BENCH_PAIRS pairs); the headline is the median of the
per-pair ratios B/A of whole processes, printed with the median ratio of the in-process dissect
loop (labelled as such). Both revisions must find the same messages.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TRACES = ["elcabezzonn-pcaps/aug16_part2.pcap.gz",
          "elcabezzonn-pcaps/capture-Thu-11-24-16-10-28-11_cerber.pcap.gz",
          "pcapplusplus/Pcap++Test/PcapExamples/example.pcap", "acandeias-intrusiondetection/Misc2.pcap"]

CHILD = r"""
import json, sys, time, types
t_start = time.perf_counter()
root, work, loops = sys.argv[1], sys.argv[2], int(sys.argv[3])
pkg = types.ModuleType("webtap"); pkg.__path__ = [root + "/webtap"]; sys.modules["webtap"] = pkg
ext = types.ModuleType("webtap._ext"); ext.__path__ = [root + "/webtap/_ext"]; sys.modules["webtap._ext"] = ext
import glob, importlib.util
import numpy as np
# load both modules from their files: the editable install's finder would otherwise hand out
# the working tree's build for any revision
rec = types.ModuleType("webtap.records"); rec.__path__ = []; sys.modules["webtap.records"] = rec
for name, path in (("webtap.records.message", root + "/webtap/schema.py"),
                   ("webtap._ext.dissect", glob.glob(root + "/webtap/_ext/dissect*.so")[0])):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    if name == "webtap.records.message":
        sys.modules["webtap.schema"] = mod        # its name in revisions before 2026-11-28
d = sys.modules["webtap._ext.dissect"]
assert d.__file__.startswith(root), d.__file__
pk = np.load(work + "/packets.npy"); data = np.load(work + "/data.npy")
times = []
for _ in range(loops):
    t0 = time.perf_counter()
    msgs, cnt = d.dissect_batch(pk, data)
    times.append(time.perf_counter() - t0)
times.sort()
print(json.dumps({"loop_s": times[len(times) // 2], "msgs": len(msgs), "packets": int(cnt[0])}))
"""


def build(rev: str, dest: Path) -> Path:
    """Compile rev's dissect extension into dest/webtap/_ext; returns dest."""
    src = dest / "src"
    src.mkdir(parents=True)
    tree = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", rev, "webtap"],
                          capture_output=True, check=True, text=True).stdout.split()
    dtypes = "webtap/records/message.py" if "webtap/records/message.py" in tree else "webtap/schema.py"
    arch = subprocess.run(["git", "-C", str(REPO), "archive", rev, "ext", dtypes],
                          capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=arch, check=True)
    (dest / "webtap" / "_ext").mkdir(parents=True)
    (dest / "webtap" / "schema.py").write_bytes((src / dtypes).read_bytes())
    # ext/ is one flat folder up to 1eaf372 and folders by stage since (ext/walk/dissect.pyx ...);
    # the hand-written C of the wtc library (ext/meson.build) is compiled in beside the module
    ext = src / "ext"
    dirs = [ext] + sorted(d for d in ext.rglob("*") if d.is_dir())
    pyx = next(ext.rglob("dissect.pyx"))
    own_c = sorted(p for p in ext.rglob("*.c"))
    c = src / "dissect.c"
    subprocess.run([sys.executable, "-m", "cython", "-3", "-X", "language_level=3", "-X", "cdivision=True",
                    "-X", "boundscheck=False", "-X", "wraparound=False", "-X", "initializedcheck=False",
                    "--module-name", "webtap._ext.dissect", *[a for d in dirs for a in ("-I", str(d))], str(pyx),
                    "-o", str(c)], check=True)
    so = dest / "webtap" / "_ext" / ("dissect" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["cc", *[f"-I{d}" for d in dirs], f"-I{np.get_include()}", f"-I{sysconfig.get_paths()['include']}",
                    "-fvisibility=hidden", "-DNDEBUG", "-D_FILE_OFFSET_BITS=64", "-std=gnu11", "-O3", "-fPIC",
                    "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION", "-w", "-shared", "-o", str(so), str(c),
                    *map(str, own_c), "-lcrypto"],
                   check=True)
    return dest


def batch(work: Path) -> None:
    """One packet batch (PACKET_DTYPE array + buffer) saved as .npy files in work."""
    from webtap.capture import open_trace

    trace = os.environ.get("WEBTAP_BENCH_TRACE")
    shared = Path(os.environ.get("WEBTAP_SHARED", REPO / ".." / "shared")) / "traces"
    paths = [Path(trace)] if trace else [shared / t for t in TRACES]
    pks, datas, base = [], [], 0
    for p in paths:
        with open_trace(str(p)) as t:
            for b in t:
                pk = np.array(b.packets, copy=True)
                d = np.array(b.data, copy=True)
                pk["offset"] += base
                pks.append(pk)
                datas.append(d)
                base += len(d)
    pk, data = np.concatenate(pks), np.concatenate(datas)
    # the same packets several times over (WEBTAP_BENCH_TILE): a batch well beyond the caches,
    # and a loop long enough to time on a busy machine
    tile = int(os.environ.get("WEBTAP_BENCH_TILE", "8"))
    tiles = []
    for k in range(tile):
        q = pk.copy()
        q["offset"] += k * len(data)
        tiles.append(q)
    np.save(work / "packets.npy", np.concatenate(tiles))
    np.save(work / "data.npy", np.tile(data, tile))


def main(argv: list[str]) -> int:
    rev_a = argv[1] if len(argv) > 1 else "main"
    rev_b = argv[2] if len(argv) > 2 else "HEAD"
    pairs = int(os.environ.get("WEBTAP_BENCH_PAIRS", "10"))
    loops = int(os.environ.get("WEBTAP_BENCH_REPEATS", "9"))
    with tempfile.TemporaryDirectory(prefix="wt-ab-") as tmp:
        work = Path(tmp)
        roots = {rev_a: build(rev_a, work / "a"), rev_b: build(rev_b, work / "b")}
        batch(work)
        res: dict[str, list] = {rev_a: [], rev_b: []}
        r_proc, r_loop = [], []
        for i in range(pairs):
            row = {}
            for rev in ((rev_a, rev_b) if i % 2 == 0 else (rev_b, rev_a)):
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", CHILD, str(roots[rev]), str(work), str(loops)],
                                     capture_output=True, text=True, check=True).stdout
                j = json.loads(out)
                j["wall_s"] = time.perf_counter() - t0
                row[rev] = j
                res[rev].append(j)
            if row[rev_a]["msgs"] != row[rev_b]["msgs"]:
                print(f"the revisions disagree: {row[rev_a]['msgs']} vs {row[rev_b]['msgs']} messages")
                return 1
            r_proc.append(row[rev_b]["wall_s"] / row[rev_a]["wall_s"])
            r_loop.append(row[rev_b]["loop_s"] / row[rev_a]["loop_s"])
    n = res[rev_a][0]["packets"]
    print(f"{n} packets, {res[rev_a][0]['msgs']} messages; {pairs} pairs alternating, {loops} loops per process")
    for rev in (rev_a, rev_b):
        w = statistics.median(r["wall_s"] for r in res[rev])
        lp = statistics.median(r["loop_s"] for r in res[rev])
        print(f"  {rev:>12}: whole process {w:.3f} s; in-process dissect loop {lp * 1e3:.1f} ms "
              f"({n / lp / 1e6:.2f} Mpkt/s)")
    print(f"  {rev_b}/{rev_a} whole process: median of per-pair ratios {statistics.median(r_proc):.3f} "
          f"(min {min(r_proc):.3f}, max {max(r_proc):.3f})")
    print(f"  {rev_b}/{rev_a} in-process dissect loop: median of per-pair ratios {statistics.median(r_loop):.3f} "
          f"(min {min(r_loop):.3f}, max {max(r_loop):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
