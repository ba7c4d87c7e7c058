"""Shared fixtures: where the real traces and blacklists are (../shared, or $WEBTAP_SHARED), and
the skip policy: under CI (``CI`` set to anything but empty/0/false/no/off) a skip is a failure that
names what is missing, so a machine without the shared data, tshark, httpry, tcpdump, iproute2,
root or a Python package cannot pass by skipping half of the suite. Outside CI the skips stay
skips, each with its reason in the summary (``-ra`` in pyproject.toml lists them)."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import signal

import pytest

# A test run started in the background from a script (`make test &`, nohup, a CI runner's
# non-interactive shell) inherits SIGINT ignored, and Python keeps an inherited SIG_IGN. The
# tests that end a live run as Ctrl-C does (os.kill(SIGINT) to themselves, or to a child they
# started, which would inherit it too) then wait forever: seen here, tests/feeder/
# test_live_loopback.py hung for 20 minutes under `nohup make test &`. Every test process (the
# xdist workers import this file in their main thread) takes Python's default handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared"))
TRACES = SHARED / "traces"
#: files the tests build once and share between runs and xdist workers (the benchmark trace):
#: $WEBTAP_TEST_CACHE, else build/test-cache (ignored by git, removed by `make clean`)
TEST_CACHE = pathlib.Path(os.environ.get("WEBTAP_TEST_CACHE", REPO / "build" / "test-cache"))


def shared_trace_files() -> list[pathlib.Path]:
    """Every capture file under ../shared/traces (empty when that folder is absent)."""
    if not TRACES.is_dir():
        return []
    return sorted(p for p in TRACES.rglob("*") if p.is_file() and p.suffix != ".md")


def require_shared(path: pathlib.Path) -> pathlib.Path:
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    return path


@pytest.fixture
def traces_dir() -> pathlib.Path:
    return require_shared(TRACES)


@pytest.fixture
def small_streams(monkeypatch):
    """setup(tls_rows, exchange_rows, batch) -> the list of httpanalyzer.tls.OnePass objects the
    run then makes: the handshakes (and, given, the exchanges) streamed a few records a part,
    over packet batches of `batch` packets, so that a small trace writes many parts."""
    def setup(tls_rows: int = 8, exchange_rows: int | None = None, batch: int = 64) -> list:
        from httpanalyzer import tls as tlsmod
        from webtap import capture

        monkeypatch.setattr(tlsmod.TlsRun, "STREAM_ROWS", tls_rows)
        if exchange_rows is not None:
            monkeypatch.setattr(tlsmod.ExchangeRun, "STREAM_ROWS", exchange_rows)
        init = capture.Trace.__init__

        def small_batches(self, *a, **kw):
            kw["batch_size"] = batch
            init(self, *a, **kw)
        monkeypatch.setattr(capture.Trace, "__init__", small_batches)
        made = []
        one_init = tlsmod.OnePass.__init__

        def record(self, *a, **kw):
            one_init(self, *a, **kw)
            made.append(self)
        monkeypatch.setattr(tlsmod.OnePass, "__init__", record)
        return made
    return setup


@pytest.fixture(scope="session")
def jumpy(tmp_path_factory) -> pathlib.Path:
    """The Ethernet shared traces concatenated into one pcap, in file order: the capture clock
    jumps back and forth (clock resets, GC), 1xx, repeats and damaged files' leftovers included."""
    from webtap.capture import open_trace, write_pcap

    traces = shared_trace_files()
    if not traces:
        pytest.skip(f"shared traces absent: {TRACES}")
    out = tmp_path_factory.mktemp("jumpy") / "jumpy.pcap"
    batches = []
    for p in traces:
        try:
            with open_trace(p) as t:
                bs = list(t)
                if any(lt != 1 for lt, _ in t.interfaces):
                    continue
        except (OSError, ValueError):
            continue
        batches.extend(bs)
    assert write_pcap(out, batches, linktype=1) > 50_000
    return out


# ---------------------------------------------------------------------------------------------
# Skip policy (issue 20): one place for the whole suite.

def ci() -> bool:
    """True under CI: the variable CI is set to something other than empty, 0, false, no, off."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


# Skips that are not environmental: (test file, start of the skip reason) -> why the skip is by
# design and cannot hide a missing prerequisite. Everything else fails under CI.
NOT_ENVIRONMENTAL = {
    ("tests/fuzz/test_fuzz.py", "atheris' libFuzzer is not run under an externally preloaded"):
        "only under `make sanitize` (WEBTAP_EXT_DIR set): the sanitizer runtime is preloaded there "
        "and libFuzzer brings its own; `make test` (and CI) never sets WEBTAP_EXT_DIR",
}


def _skip_reason(rep) -> tuple[str, str]:
    """(where, reason) of a skipped report; longrepr is (path, lineno, 'Skipped: reason')."""
    lr = rep.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        path, lineno, msg = lr
        msg = str(msg)
        return f"{path}:{lineno}", msg[len("Skipped: "):] if msg.startswith("Skipped: ") else msg
    return "", str(lr)


def _allowed(nodeid: str, reason: str) -> bool:
    return any(nodeid.startswith(f) and reason.startswith(r) for f, r in NOT_ENVIRONMENTAL)


def _fail_environment_skip(rep) -> None:
    if not ci() or not rep.skipped or hasattr(rep, "wasxfail"):
        return
    where, reason = _skip_reason(rep)
    if _allowed(rep.nodeid, reason):
        return
    if reason.startswith("got empty parameter set"):
        reason += " (the parameters are listed from shared data or tools: see 'missing here' in the header)"
    rep.outcome = "failed"
    rep.longrepr = (f"CI is set, so a skip is a failure: this test needs what is missing here: {reason}"
                    + (f" (skipped at {where})" if where else ""))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_environment_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module that skips itself while being collected (pytest.importorskip at module level)."""
    outcome = yield
    _fail_environment_skip(outcome.get_result())


def missing_prerequisites() -> list[str]:
    """What this machine lacks of what the suite uses (for the header; the tests say it again)."""
    missing = []
    for d in (SHARED, TRACES, SHARED / "blacklists"):
        if not d.is_dir():
            missing.append(f"shared data folder {d}")
            break
    for tool in ("tshark", "mergecap", "httpry", "tcpdump", "ip", "tc", "bridge", "cc",
                 "nginx", "nghttp", "curl",           # these three: tests/tlsx/gen_truth.py
                 "slowhttptest"):                     # tests/abuse (issue 34)
        if shutil.which(tool) is None:
            missing.append(f"{tool} on PATH")
    if os.geteuid() != 0:
        missing.append("root (live capture, network namespaces)")
    for mod in ("scapy", "hypothesis", "dask.distributed", "nbclient", "ipykernel", "atheris", "duckdb"):
        try:
            found = importlib.util.find_spec(mod) is not None
        except ImportError:           # a parent package (dask) is absent
            found = False
        if not found:
            missing.append(f"Python package {mod}")
    return missing


def pytest_report_header(config):
    missing = missing_prerequisites()
    mode = "CI is set: a skip is a failure" if ci() else "CI not set: environment skips stay skips"
    return [f"webtap skip policy: {mode}; shared data: {SHARED}",
            "missing here: " + ("; ".join(missing) if missing else "nothing")]
