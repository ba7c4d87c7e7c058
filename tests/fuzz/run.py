"""Run one fuzz target under atheris (libFuzzer), or replay inputs through it.

    python -m tests.fuzz.run TARGET --seconds 600               # fuzz the normal build
    python -m tests.fuzz.run TARGET --seconds 600 --ext-dir build/fuzz-ext/ext
                                                                # fuzz the clang build with
                                                                # coverage + ASan/UBSan inside C
    python -m tests.fuzz.run TARGET --replay FILE...            # run inputs once, no atheris

Targets: tests/fuzz/targets.py. The corpus grows in build/fuzz/corpus/TARGET (kept between
runs); seeds are written to build/fuzz/seeds/TARGET from the shared traces and blacklists, and
every input of tests/fuzz/regressions/TARGET is a seed too. Crashing inputs land in
build/fuzz/artifacts/TARGET/. libFuzzer's final statistics (executions, coverage "cov",
features "ft", corpus size) are printed at the end, as in docs/ROBUSTNESS.md.

--ext-dir re-executes the process with atheris's ASan+libFuzzer runtime preloaded
(asan_with_fuzzer.so) and WEBTAP_EXT_DIR pointing webtap._ext at the instrumented modules
(see webtap/_ext/__init__.py), so that libFuzzer sees the edges taken inside the Cython/C code.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = Path(__file__).resolve().parent / "regressions"

#: libFuzzer's -max_len per target: room for a few records / lines, small enough to stay fast.
MAX_LEN = {"source": 16384, "dissect": 4096, "encap": 2048, "http": 4096, "segment": 4096, "canon": 1024,
           "blacklist": 4096, "tree": 4096, "urlbase": 4096, "tls": 20000, "quic": 8192, "sni": 8192,
           "exchange": 8192, "rules": 2048, "truth": 4096}


def _shared() -> str | None:
    env = os.environ.get("WEBTAP_SHARED")
    if env and os.path.isdir(env):
        return env
    cand = ROOT.parent / "shared"
    return str(cand) if cand.is_dir() else None


def write_seeds(target: str, out: Path) -> int:
    from tests.fuzz.targets import SEEDS

    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for s in SEEDS[target](_shared()):
        (out / hashlib.sha1(s).hexdigest()).write_bytes(s)
        n += 1
    return n


def _reexec_instrumented(ext_dir: str) -> None:
    import atheris

    preload = os.path.join(atheris.path(), "asan_with_fuzzer.so")
    env = dict(os.environ)
    if env.get("WEBTAP_FUZZ_CHILD") == "1":
        return
    env["WEBTAP_FUZZ_CHILD"] = "1"
    env["WEBTAP_EXT_DIR"] = os.path.abspath(ext_dir)
    env["LD_PRELOAD"] = preload + ((" " + env["LD_PRELOAD"]) if env.get("LD_PRELOAD") else "")
    # Python itself leaks by design at exit and is not built with ASan: leak checks off.
    # allocator_may_return_null: a huge malloc returns NULL (MemoryError) as in production.
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0:allocator_may_return_null=1:"
                                   "halt_on_error=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    env.setdefault("PYTHONMALLOC", "malloc")
    os.execve(sys.executable, [sys.executable, "-m", "tests.fuzz.run"] + sys.argv[1:], env)


def main(argv=None) -> int:
    from tests.fuzz.targets import TARGETS

    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run")
    ap.add_argument("target", choices=TARGETS)
    ap.add_argument("--seconds", type=int, default=180, help="libFuzzer -max_total_time")
    ap.add_argument("--runs", type=int, default=None, help="libFuzzer -runs (stop after N inputs)")
    ap.add_argument("--ext-dir", help="instrumented extension modules (make fuzz builds build/fuzz-ext/ext)")
    ap.add_argument("--workdir", default=str(ROOT / "build" / "fuzz"))
    ap.add_argument("--replay", nargs="+", metavar="FILE", help="run these inputs once, no fuzzing")
    ap.add_argument("libfuzzer", nargs="*", help="extra libFuzzer flags (after --)")
    a = ap.parse_args(argv)

    from tests.fuzz.targets import CHECKS

    if a.replay:
        for f in a.replay:
            CHECKS[a.target](Path(f).read_bytes())
            print(f"ok {f}")
        return 0

    if a.ext_dir:
        _reexec_instrumented(a.ext_dir)

    import atheris

    # Heavy third-party modules first, uninstrumented; then the project's own Python code with
    # atheris' bytecode coverage (the parsers' Python halves: capture, importers, tree, canon).
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401

    for name in [m for m in sys.modules if m.startswith(("tests.fuzz.targets", "tests.strategies"))]:
        del sys.modules[name]          # imported above for argparse: import again, instrumented
    with atheris.instrument_imports(include=["webtap", "urlfilter", "httpanalyzer.tls_truth",
                                             "tests.fuzz", "tests.strategies"]):
        import tests.fuzz.targets as targets
        import urlfilter.importers  # noqa: F401
        import urlfilter.policy  # noqa: F401
        import urlfilter.store  # noqa: F401
        import urlfilter.tree  # noqa: F401
        import webtap.capture  # noqa: F401
        import webtap.dissect  # noqa: F401
        import httpanalyzer.tls_truth  # noqa: F401
    if a.ext_dir:
        import webtap._ext.source as s

        assert os.path.abspath(s.__file__).startswith(os.path.abspath(a.ext_dir)), s.__file__

    work = Path(a.workdir)
    corpus = work / "corpus" / a.target
    seeds = work / "seeds" / a.target
    arts = work / "artifacts" / a.target
    for d in (corpus, arts):
        d.mkdir(parents=True, exist_ok=True)
    n_seeds = write_seeds(a.target, seeds)
    dirs = [str(corpus), str(seeds)]
    reg = REGRESSIONS / a.target
    if reg.is_dir():
        dirs.append(str(reg))
    flags = [f"-max_total_time={a.seconds}", f"-max_len={MAX_LEN[a.target]}", "-timeout=20",
             "-rss_limit_mb=3072", "-print_final_stats=1", f"-artifact_prefix={arts}/"]
    if a.runs is not None:
        flags.append(f"-runs={a.runs}")
    print(f"fuzz {a.target}: {n_seeds} seeds, corpus {corpus}, instrumented C: {bool(a.ext_dir)}",
          file=sys.stderr, flush=True)
    atheris.Setup([sys.argv[0]] + flags + list(a.libfuzzer) + dirs, targets.CHECKS[a.target])
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
