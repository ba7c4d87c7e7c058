"""The TLS stage's messages come from the dissector's walk (ext/walk/dissect.pyx, MSG_TLS / MSG_QUIC
of ext/walk/message.pxd): the HTTP messages of that walk do not change, split hellos complete whatever
the batch boundaries (the watch list, ext/tls/tls.pxd TlsWatch, carries their flows from one batch
to the next), and a watch list that fills up hands over every TCP payload instead of losing
continuations."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED
from tests.tls import hellobuild as hb


def _batches(path, batch_size=8192):
    from webtap.capture import open_trace

    with open_trace(str(path), progress=False, batch_size=batch_size) as tr:
        for b in tr:
            yield b.packets.copy(), np.frombuffer(bytes(b.data), np.uint8)


def _records(path, cuts=None, batch_size=8192):
    """The TLS stage fed batch by batch; cuts: split every batch into slices of this many
    packets (the slices share the batch's buffer)."""
    from httpanalyzer.tls import TlsRun

    run = TlsRun()
    for pk, data in _batches(path, batch_size):
        step = cuts or len(pk) or 1
        for i in range(0, len(pk), step):
            assert run.feed(pk[i:i + step], data) is None   # records leave at the end, in order
    tab = run.finish()
    return (tab.to_pylist() if tab is not None else []), run.counters()


def _split_pcap(path, n):
    """n ClientHellos of two segments each: every first segment, then every second one, then
    the ServerHellos (so n flows wait for their continuation at once)."""
    from tests.pcapbuild import pcap

    t, first, second, sh = 1_700_000_000 * 10**9, [], [], []
    stream = hb.records(hb.client_hello(exts=[hb.keyshare_ext([(0x11EC, b"\x01" * 1216)]),
                                              hb.sni_ext(b"two.example")]))
    srv = _sh()
    for i in range(n):
        cli = f"10.1.{i >> 8 & 255}.{i & 255}"
        first.append(hb.tcp_packet(cli, "10.0.0.2", 40000, 443, 1000, 5000, stream[:1000]))
        second.append(hb.tcp_packet(cli, "10.0.0.2", 40000, 443, 2000, 5000, stream[1000:]))
        sh.append(hb.tcp_packet("10.0.0.2", cli, 443, 40000, 5000, 1000 + len(stream), srv))
    pkts = [(t + k * 1000, p) for k, p in enumerate(first + second + sh)]
    path.write_bytes(pcap(pkts))


def _sh():
    return hb.records(hb.server_hello(cipher=0x1302, exts=[hb.ext(43, b"\x03\x04")]))


def test_http_messages_unchanged_and_tls_kinds_apart():
    """The walk with the watch list gives the same HTTP messages and counters, and the TLS
    stage's messages (kinds 3 and 4 only) in their own array."""
    from webtap.dissect import dissect
    from webtap.records.message import MSG_REQUEST
    from httpanalyzer.tls import TlsRun

    path = SHARED / "traces" / "arkime" / "arkime_synthetic.pcap"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    run, kinds, http = TlsRun(), set(), 0
    for pk, data in _batches(path):
        a = dissect(pk, data)
        b = dissect(pk, data, tls_watch=run.watch)
        assert a.tls is None
        assert a.msgs.tobytes() == b.msgs.tobytes() and a.counters == b.counters
        kinds |= set(np.unique(b.tls["kind"]).tolist())
        http += int((a.msgs["kind"] == MSG_REQUEST).sum())
        run.feed(pk, data, b.tls)
    assert http > 0 and kinds == {3, 4}      # this trace has HTTP, TLS over TCP and QUIC
    assert run.counters()["client_hello"] > 0


def test_split_hellos_whatever_the_batching(tmp_path):
    """A ClientHello whose second segment is in a later batch completes as when both are in
    one batch: the same records for batches of 1, 2, 3 packets and one batch."""
    p = tmp_path / "split.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.chrome_like(sni=f"s{i}.example".encode())),
                           "ch_split": [700, 500, 10_000], "sh": _sh()} for i in range(5)])
    ref, c = _records(p)
    assert len(ref) == 5 and all(r["matched"] and r["ch_segments"] == 3 for r in ref)
    assert c["split_hello"] == 5
    for cuts in (1, 2, 3):
        got, _ = _records(p, cuts=cuts)
        assert got == ref, cuts


def test_full_watch_list_loses_no_continuation(tmp_path):
    """3,000 split ClientHellos start in one batch (more than the 4,096-slot watch list holds
    at half load, with the default 1,024 reassemblies): the walk then hands over every TCP
    payload. The reassembly table keeps the last 1,024 (the older ones leave with reason
    reassembly_cap, as before the walk was shared) and every one of those completes, the
    ones the watch list had no room for included."""
    p = tmp_path / "many.pcap"
    _split_pcap(p, 3000)
    recs, c = _records(p, batch_size=1 << 16)
    done = [r for r in recs if r["matched"]]
    assert len(done) == 1024
    assert all(r["ch_segments"] == 2 and r["sni"] == "two.example" for r in done)
    assert {r["client_ip"] for r in done} == {f"10.1.{i >> 8 & 255}.{i & 255}" for i in range(1976, 3000)}
    assert c["split_hello"] == 1024 and c["evicted_reassembly_cap"] == 1976 and c["incomplete"] == 0


# --- the walk ahead of the stage (webtap.pipeline's readahead executor walks in its own thread:
# the watch list is the walk's, and the stage publishes its own after each batch,
# ext/tls/tlswatch.h) ----------------------------------------------------------------------------

def _slices(path, cuts, batch_size=8192):
    out = []
    for pk, data in _batches(path, batch_size):
        step = cuts or len(pk) or 1
        out += [(pk[i:i + step], data) for i in range(0, len(pk), step)]
    return out


def _records_ahead(slices, lags):
    """The TLS stage fed every slice, in order, the walk running ahead of it: before the stage
    takes slice i, the walk has walked slices up to i + lags[i] (lags cycle). Returns the records
    and counters, as _records."""
    from httpanalyzer.tls import TlsRun
    from webtap.dissect import dissect

    run, walked = TlsRun(), []
    for i in range(len(slices)):
        upto = min(len(slices) - 1, i + lags[i % len(lags)])
        while len(walked) <= upto:
            pk, data = slices[len(walked)]
            walked.append(dissect(pk, data, tls_watch=run.watch).tls)
        pk, data = slices[i]
        run.table.feed_messages(walked[i], data, len(pk))   # here: the lead is exactly lags[i]
    tab = run.finish()
    return (tab.to_pylist() if tab is not None else []), run.counters()


def _hrr_pcap(path, n):
    """n connections, each: a ClientHello in two segments, a HelloRetryRequest, then
    ChangeCipherSpec + a second ClientHello in two segments on the same flow (the stage has
    finished the flow's first hello while the walk, ahead, adds the flow again), a ServerHello;
    the connections' packets interleaved."""
    from tests.pcapbuild import pcap

    ch1 = hb.records(hb.client_hello(exts=[hb.keyshare_ext([(0x11EC, b"\x01" * 1216)]),
                                           hb.sni_ext(b"first.example"), hb.versions_ext([0x0304])]))
    ch2 = hb.record(20, b"\x01") + hb.records(hb.client_hello(
        exts=[hb.keyshare_ext([(0x11EC, b"\x02" * 1216)]), hb.sni_ext(b"second.example"),
              hb.versions_ext([0x0304])]))
    hrr = hb.records(hb.server_hello(random=hb.HRR_RANDOM, exts=[hb.ext(43, b"\x03\x04")]))
    sh = hb.records(hb.server_hello(cipher=0x1302, exts=[hb.ext(43, b"\x03\x04")]))
    steps = []
    for i in range(n):
        c, s = f"10.2.{i >> 8 & 255}.{i & 255}", "10.0.0.2"
        cs, ss = 1000, 5000
        steps.append([
            hb.tcp_packet(c, s, 41000, 443, cs, ss, ch1[:900]),
            hb.tcp_packet(c, s, 41000, 443, cs + 900, ss, ch1[900:]),
            hb.tcp_packet(s, c, 443, 41000, ss, cs + len(ch1), hrr),
            hb.tcp_packet(c, s, 41000, 443, cs + len(ch1), ss + len(hrr), ch2[:700]),
            hb.tcp_packet(c, s, 41000, 443, cs + len(ch1) + 700, ss + len(hrr), ch2[700:]),
            hb.tcp_packet(s, c, 443, 41000, ss + len(hrr), cs + len(ch1) + len(ch2), sh)])
    t, pkts = 1_700_000_000 * 10**9, []
    for k in range(6):                  # step k of every connection, then step k + 1
        for i in range(n):
            pkts.append((t, steps[i][k]))
            t += 1000
    path.write_bytes(pcap(pkts))


@pytest.mark.parametrize("lag", [1, 2, 5, 1000])
@pytest.mark.parametrize("cuts", [1, 2, 7])
def test_walk_ahead_of_the_stage_gives_the_same_records(tmp_path, lag, cuts):
    """The same records and counters (but tcp_messages: the segments of flows the stage no
    longer reassembles that the walk still hands over, as it may for a false positive) when the
    walk is 1, 2, 5 or every slice ahead of the stage: split hellos of interleaved flows, a
    second split ClientHello after a HelloRetryRequest on the same flow."""
    p = tmp_path / "hrr.pcap"
    _hrr_pcap(p, 20)
    slices = _slices(p, cuts)
    ref, rc = _records_ahead(slices, [0])
    second = [r for r in ref if r["sni"] == "second.example"]
    assert len(second) == 20 and all(r["ch_segments"] == 2 for r in second)
    got, gc = _records_ahead(slices, [lag])
    assert got == ref
    rc.pop("tcp_messages"), gc.pop("tcp_messages")
    assert gc == rc


def test_full_watch_list_with_the_walk_ahead(tmp_path):
    """The 3,000 split ClientHellos of test_full_watch_list_loses_no_continuation, the walk 1, 3
    or every batch ahead: overflow hands over every TCP payload until the stage has seen every
    batch walked meanwhile, so the same records as in step."""
    p = tmp_path / "many.pcap"
    _split_pcap(p, 3000)
    slices = _slices(p, 500, batch_size=1 << 16)
    ref, rc = _records_ahead(slices, [0])
    assert sum(r["matched"] for r in ref) == 1024
    for lags in ([1], [3], [1000], [0, 4, 1, 0, 2]):
        got, gc = _records_ahead(slices, lags)
        assert got == ref, lags
        rc.pop("tcp_messages", None), gc.pop("tcp_messages")
        assert gc == rc, lags


@settings(max_examples=25, deadline=None)
@given(lags=st.lists(st.integers(0, 6), min_size=1, max_size=12), cuts=st.integers(1, 9))
def test_walk_ahead_property(tmp_path_factory, lags, cuts):
    """Whatever the walk's lead over the stage from batch to batch: the records of the walk in
    step."""
    p = tmp_path_factory.mktemp("ahead") / "hrr.pcap"
    _hrr_pcap(p, 6)
    slices = _slices(p, cuts)
    ref, _ = _records_ahead(slices, [0])
    got, _ = _records_ahead(slices, lags)
    assert got == ref


def test_pipeline_readahead_walk_equals_inline_on_real_traces():
    """The pipeline's readahead executor (the walk in its own thread, ahead of the TLS stage)
    and the inline one (walk and stage in step) give the same handshake records on the shared
    TLS captures with split ClientHellos, QUIC and HRR, read in small batches."""
    import pyarrow as pa

    from httpanalyzer.tls import TlsRun, TlsStage
    from webtap.pipeline import Pipeline

    names = ["arkime/tls-split-client-hello.pcap", "zeek/tls_hrr.pcap", "ja4/latest.pcapng",
             "ja4/chrome-cloudflare-quic-with-secrets.pcapng"]
    paths = [SHARED / "traces-tls" / n for n in names]
    paths = [p for p in paths if p.exists()]
    if not paths:
        pytest.skip("shared TLS traces absent")
    seen = 0
    for path in paths:
        out = {}
        for ex in ("inline", "readahead"):
            run = TlsRun()
            pipe = Pipeline([path], [TlsStage(run)], executor=ex, batch_size=3)
            assert pipe.walk_ahead == (ex == "readahead")
            tabs = list(pipe.outputs())
            out[ex] = pa.concat_tables(tabs).to_pylist() if tabs else []
        assert out["readahead"] == out["inline"], path
        seen += len(out["inline"])
    assert seen > 0


def test_overflow_outlasts_a_publication_from_before_it(tmp_path):
    """The watch list fills up in slice 1 (2,100 split hellos start: more than its 2,048 flows);
    their continuations are slice 2, walked before the stage has seen slice 1. The stage's list
    published after slice 0 must not end the overflow (the flows slice 1 could not add are in no
    list yet): every continuation still reaches the stage, so the same records as in step."""
    p = tmp_path / "many.pcap"
    _split_pcap(p, 2100)
    (pk, data), = list(_batches(p, batch_size=1 << 16))
    cuts = [0, 1, 2100, 4200, len(pk)]
    slices = [(pk[a:b], data) for a, b in zip(cuts, cuts[1:])]
    ref, _ = _records_ahead(slices, [0])
    done = [r for r in ref if r["matched"]]
    assert len(done) == 1024 and {r["client_ip"] for r in done} == {
        f"10.1.{i >> 8 & 255}.{i & 255}" for i in range(1076, 2100)}
    got, _ = _records_ahead(slices, [1])
    assert got == ref


def test_stage_thread_raises_a_batch_error_and_runs_no_later_batch(tmp_path):
    """TlsRun processes its batches in a thread of its own: a batch's error (here messages of the
    wrong dtype) is raised by a later feed or by finish, and the batches handed over after the
    failed one are not processed (their records would follow a gap)."""
    from httpanalyzer.tls import TlsRun

    p = tmp_path / "split.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.chrome_like(sni=b"a.example")), "sh": _sh()}])
    (pk, data), = list(_batches(p))
    run = TlsRun()
    run.feed(pk, data, np.zeros(3, np.uint8))
    with pytest.raises(TypeError, match="MESSAGE_DTYPE"):
        run.feed(pk, data)
        run.finish()
    run.feed(pk, data)              # after the error was raised: runs again
    tab = run.finish()
    assert tab.num_rows == 1 and tab.column("sni").to_pylist() == ["a.example"]
    assert run.counters()["packets"] == len(pk)     # one batch processed: not the skipped one


def test_stage_thread_ends_its_libcrypto_state_before_finish_returns():
    """The TLS stage's thread runs QUIC's AES-GCM through libcrypto, whose per-thread state is
    freed by the thread's exit destructors unless the thread frees it itself. Those ran beside
    the process's exit (OPENSSL_cleanup) when nothing waited for the thread: a segfault at exit,
    1 full TLS bench run in 150. finish() now returns after the thread ended, its last step
    webtap._ext.tls.thread_end (ext/out/digest.h)."""
    import threading

    from httpanalyzer.tls import TlsRun

    path = SHARED / "traces-tls" / "tcpdump" / "quic_handshake.pcap"
    if not path.exists():
        pytest.skip(f"{path} missing")
    run = TlsRun()
    for pk, data in _batches(path):
        run.feed(pk, data)
    workers = [t for t in threading.enumerate() if t.name == "tls-stage"]
    assert workers
    tab = run.finish()
    assert tab is not None and "quic" in set(tab.column("transport").to_pylist())
    assert not any(t.is_alive() for t in workers)
    assert not [t for t in threading.enumerate() if t.name == "tls-stage"]
    # counters() after finish() needs no thread; the stage did decrypt QUIC Initials in it
    # (libcrypto's AES-GCM), and every pair it counts is a row with both hellos
    c = run.counters()
    assert c["quic_initial"] > 0
    both = [a is not None and b is not None for a, b in
            zip(tab.column("client_hello_ts").to_pylist(), tab.column("server_hello_ts").to_pylist())]
    assert c["paired"] == sum(both) > 0


_OUTLIVES = r"""
import gc, sys
import numpy as np
from webtap.capture import open_trace
from webtap.dissect import dissect
from webtap._ext.{mod} import {cls}

watch = {cls}().watch            # the table is gone at once: only the capsule is left
gc.collect()
junk = [bytearray(1 << 16) for _ in range(256)]   # the freed memory written over
n = 0
with open_trace(sys.argv[1], progress=False, batch_size=64) as tr:
    for b in tr:
        data = np.frombuffer(bytes(b.data), np.uint8)
        n += len(dissect(b.packets, data, tls_watch=watch).tls)
print(n)
"""


@pytest.mark.parametrize("mod,cls", [("tls", "TlsTable"), ("urlmatch", "SniTable")])
def test_a_watch_list_outlives_its_stage(mod, cls):
    """The watch list's capsule (TlsTable.watch, SniTable.watch) owns the list: a caller (or a
    MessageBatch's tls_watch) that keeps it after the stage is gone walks with it as with a
    stage that publishes nothing. The list was a field of the stage, and such a walk read freed
    memory (a segfault, seen with `dissect(..., tls_watch=TlsTable().watch)`)."""
    import subprocess
    import sys

    path = SHARED / "traces-tls/ja4/latest.pcapng"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    code = _OUTLIVES.format(mod=mod, cls=cls)
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert int(p.stdout) > 0                       # the walk found the trace's hellos
