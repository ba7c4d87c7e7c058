"""The corrupt-trace corpus (tests/tools/corrupt_corpus.py): every damaged file is read as far as
it can be, what was skipped is counted under its reason, nothing crashes or hangs, and the CLIs
exit 0 (1 only when nothing at all could be read)."""
import re
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

from tests.tools.corrupt_corpus import ROOT, default_traces, generate
from webtap.capture import NotACapture, open_trace
from webtap.dissect import dissect


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from tests.urlfilter.conftest import shared_dir

    traces = default_traces(shared_dir())
    if not traces:
        pytest.skip("no shared traces")
    out = tmp_path_factory.mktemp("corrupt")
    return out, generate(out, traces, max_cuts=8)


@contextmanager
def deadline(cpu_s: float, wall_s: int):
    """A hang is a failure, told apart from a slow machine: a busy loop uses CPU time, caught by
    a CPU-time budget (ITIMER_PROF counts this process's own CPU, all threads, so other
    processes' load does not count); a deadlock uses none, caught by a wall-clock backstop set
    far above what waiting for a core can cost."""
    def fire(signum, _):
        what = "CPU time" if signum == signal.SIGPROF else "wall clock"
        raise TimeoutError(f"no answer within {cpu_s if signum == signal.SIGPROF else wall_s} s of {what} (hang)")
    old_prof = signal.signal(signal.SIGPROF, fire)
    old_alrm = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    signal.alarm(wall_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alrm)


#: The corpus's files are at most ~0.3 MB; reading and dissecting one took at most 2 ms of CPU
#: and 0.1 s of wall clock (load average 13 on 2 cores, 2026-11-24). 5 s of CPU is > 1000x that;
#: 300 s of wall clock is > 1000x the loaded wall time, so only a deadlock reaches it.
HANG_CPU_S, HANG_WALL_S = 5.0, 300


def read_all(path):
    """(packets, counters, warnings, dissect counters) of one file, in-process."""
    with open_trace(path, progress=False) as t:
        n = 0
        http = 0
        for b in t:
            n += len(b)
            http += len(dissect(b.packets, b.data))
        return n, t.counters, list(t.warnings), http


def test_every_corrupt_file_is_read_as_far_as_it_can_be(corpus):
    out, cases = corpus
    kinds = {c.kind for c in cases}
    for k in ("truncated_at_boundary", "truncated_in_header", "truncated_in_data", "flipped_length",
              "caplen_gt_snaplen", "zero_length_packet", "unknown_blocks", "wrong_byte_order_magic",
              "gzip", "gzip_truncated"):
        assert k in kinds, f"no case of kind {k}"
    failures = []
    for c in cases:
        try:
            with deadline(HANG_CPU_S, HANG_WALL_S):
                try:
                    n, counters, warnings, _ = read_all(out / c.name)
                except NotACapture:
                    if not c.unreadable:
                        failures.append(f"{c.name}: refused as not a capture")
                    continue
        except Exception as exc:           # a crash of the reader is a failure, whatever it is
            failures.append(f"{c.name}: {type(exc).__name__}: {exc}")
            continue
        if c.unreadable:
            failures.append(f"{c.name}: expected to be refused, read {n} packets")
            continue
        if c.packets is not None and n != c.packets:
            failures.append(f"{c.name} ({c.kind}): {n} packets, expected {c.packets}")
        if c.min_packets is not None and n < c.min_packets:
            failures.append(f"{c.name} ({c.kind}): {n} packets, expected >= {c.min_packets}")
        for k in c.counters:
            if not counters[k]:
                failures.append(f"{c.name} ({c.kind}): counter {k} is 0: {counters}")
        for k in c.zero:
            if counters[k]:
                failures.append(f"{c.name} ({c.kind}): counter {k} is {counters[k]}")
        if (counters["truncated"] or counters["bad_record"]) and not warnings:
            failures.append(f"{c.name}: skipped bytes without a warning")
        if c.kind.startswith("gzip_") and not any("gzip" in w for w in warnings):
            failures.append(f"{c.name}: damaged gzip stream not reported: {warnings}")
    assert not failures, "\n".join(failures[:40])


def _names(line: str, path: str) -> bool:
    """Whether an error line names this file (as '..., PATH' or 'PATH: ...'; not a longer name
    that starts with it, as cut0_hdr starts with cut0)."""
    return line.endswith(", " + path) or f" {path}: " in line


def _cli(tool, args, timeout=300):
    return subprocess.run([sys.executable, "-m", tool] + args, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_cli_reads_the_whole_corpus_and_exits_0(corpus, tmp_path):
    out, cases = corpus
    files = [str(out / c.name) for c in cases]
    p = _cli("webtap.cli", ["info"] + files)
    assert p.returncode == 0, p.stderr[-3000:]
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("webtap: error: ")]
    for c in cases:
        path = str(out / c.name)
        if c.unreadable:
            # one error line, naming the file (docs/CLI.md: `tool: error: ...`)
            assert sum(_names(ln, path) for ln in errors) == 1, (path, errors)
            assert not re.search(rf"^{re.escape(path)}\n(  .*\n)*  read:", p.stdout, re.M)
            continue
        # the file's block: its name, the capinfos-like lines (webtap info), then read:
        blocks = re.findall(rf"^{re.escape(path)}\n(?:  (?!read:).*\n)*  read:(.*)$", p.stdout, re.M)
        assert len(blocks) == 1, (path, p.stdout[-2000:])
        read = blocks[0]
        if c.packets is not None:      # the exact count the corpus was built with
            assert (f" packets={c.packets}," in read + ",") if c.packets else "packets=" not in read, \
                (path, c.packets, read)
    assert len(errors) == sum(c.unreadable for c in cases), errors
    assert "the file ends in the middle of a packet record" in p.stdout
    assert "pcapng block(s) of unknown type skipped" in p.stdout
    assert "corrupt record/block header(s)" in p.stdout
    p = _cli("httpanalyzer.cli", files + ["-o", str(tmp_path / "r.csv"), "--summary", "--consumers", "0"])
    assert p.returncode == 0, p.stderr[-3000:]
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("httpanalyzer: error: ")]
    assert sorted(e.rsplit(", ", 1)[-1] for e in errors) == sorted(
        str(out / c.name) for c in cases if c.unreadable), errors


def test_cli_exit_1_when_nothing_could_be_read(corpus):
    out, cases = corpus
    bad = [str(out / c.name) for c in cases if c.unreadable]
    assert bad
    assert _cli("webtap.cli", ["info"] + bad).returncode == 1
    assert _cli("httpanalyzer.cli", bad + ["--consumers", "0"]).returncode == 1


def test_dissect_and_scan_skip_unreadable_files(corpus, tmp_path):
    """webtap dissect raised a traceback for a missing file and urlfilter scan stopped at the first
    unreadable file (exit 2, nothing scanned); both now skip it, say so, and exit 0, or 1 when
    nothing at all could be read."""
    from tests.tools.hostile import make_blacklist

    out, cases = corpus
    bad = [str(out / c.name) for c in cases if c.unreadable] + [str(tmp_path / "missing.pcap")]
    good = [str(out / c.name) for c in cases if c.kind == "truncated_in_data"][:3]
    bl = tmp_path / "bl.tree"
    make_blacklist(bl)
    p = _cli("webtap.cli", ["dissect"] + bad)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    p = _cli("webtap.cli", ["dissect"] + bad + good + ["-o", str(tmp_path / "d.csv")])
    assert p.returncode == 0, p.stderr[-2000:]
    # one error line per unreadable file (the missing one included), each naming it
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("webtap: error: ")]
    assert len(errors) == len(bad) and all(any(_names(ln, b) for ln in errors) for b in bad), errors
    # and every HTTP message of the readable files written, from all their packets
    npk = nmsg = 0
    for g in good:
        n, _, _, http = read_all(g)
        npk, nmsg = npk + n, nmsg + http
    assert nmsg > 0 and f"read: packets={npk}," in p.stderr, p.stderr[-2000:]
    with open(tmp_path / "d.csv") as f:
        assert sum(1 for _ in f) == 1 + nmsg
    p = _cli("urlfilter.cli", ["scan"] + bad + ["--blacklist", str(bl)])
    assert p.returncode == 1 and "urlfilter: error: " in p.stderr, p.stderr[-2000:]
    p = _cli("urlfilter.cli", ["scan"] + bad + good + ["--blacklist", str(bl), "-o", str(tmp_path / "s.csv")])
    assert p.returncode == 0 and "urlfilter: error: " in p.stderr, p.stderr[-2000:]
