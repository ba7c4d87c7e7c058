"""Live mode: capture mirrored traffic with libpcap, cut blacklisted GETs with forged FIN/RST.

    >>> stats = run_live("mirror0", "blacklist.db")        # doctest: +SKIP

Each capture batch goes through dissect -> UrlAnalyzer (extract, match, forge) and the forged
frames of the batch leave in one nogil loop of ``pcap_inject`` (``LiveCapture.inject_many``), on
the capture interface or on ``inject_iface``. Capture runs in libpcap's immediate mode so that a
request is handed over as soon as it arrives: the time from capture to injection is the T_proc of
the timing condition that matters in practice, and every hit record carries it (``reaction_ns``:
the time the FIN's pcap_inject call started, taken in the inject loop, minus the request's
capture time; both are CLOCK_REALTIME).

Checksums: on a real mirror port every packet carries its final checksums, but a capture of
locally sent traffic (veth pairs in one machine, as in the namespace test) carries partial
checksums left for offload, so checksum verification is off by default here and on in scan().
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from urlfilter.analyzer import Blacklist, UrlAnalyzer, load_blacklist
from webtap.capture import open_live

__all__ = ["run_live", "LiveStats"]


@dataclass
class LiveStats:
    packets: int = 0
    gets: int = 0
    hits: int = 0
    injected: int = 0
    inject_failed: int = 0
    drops: int = 0
    reloads: int = 0
    counters: dict = field(default_factory=dict)
    records: list = field(default_factory=list)
    stopped_by: str | None = None        # the signal that ended the run (SIGINT, SIGTERM)

    tls_hits: int = 0
    quic_hits: int = 0
    tls_injected: int = 0        # FIN/RST frames forged for TLS hits and handed to pcap_inject
    quic_injected: int = 0       # server Initial closes forged for QUIC hits

    def line(self) -> str:
        return (f"packets {self.packets}  GETs {self.gets}  hits {self.hits}  "
                f"TLS hits {self.tls_hits} inj {self.tls_injected}  "
                f"QUIC hits {self.quic_hits} inj {self.quic_injected}  "
                f"injected {self.injected}  drops {self.drops}  reloads {self.reloads}")

    def table(self) -> pa.Table:
        return pa.Table.from_batches(self.records) if self.records else pa.table({})


def run_live(iface: str, blacklist, *, inject_iface: str | None = None, bpf: str | None = "tcp or udp",
             duration: float | None = None, status: bool = True, verify_checksums: bool = False,
             reload_every: float = 1.0, ready: threading.Event | None = None, on_ready=None,
             stop: threading.Event | None = None, out=sys.stderr) -> LiveStats:
    """Filter until Ctrl-C / SIGTERM, `duration` seconds, or `stop` is set. Returns the stats with
    one record batch of hits (RECORD_SCHEMA + reaction_ns) per batch that had hits.
    ready (an Event) is set and on_ready(capture) called once the filter is in place, the
    injector open and the signal handlers installed (the command prints its readiness line)."""

    bl = blacklist if isinstance(blacklist, Blacklist) else load_blacklist(blacklist)
    st = LiveStats()
    cap = open_live(iface, bpf=bpf, immediate=True, timeout_ms=50, batch_size=1024)
    inj = cap if inject_iface in (None, iface) else open_live(inject_iface, bpf="less 1", timeout_ms=50)
    sent_at = [np.zeros(0, np.int64)]

    def on_forged(frames, offsets, ts, linktypes):
        sent = np.zeros(len(offsets) - 1, np.int64)
        s, f = inj.inject_many(frames, offsets, sent)
        sent_at[0] = sent
        st.injected += s
        st.inject_failed += f

    an = UrlAnalyzer(bl, forge=True, verify_checksums=verify_checksums, on_forged=on_forged,
                     handshakes=False, keep_records=True, hits_only=True)
    dissect = an.dissector()
    old = {}

    def _stop(signum, frame):
        st.stopped_by = signal.Signals(signum).name
        cap.stop()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, _stop)
    t_end = time.monotonic() + duration if duration else None
    last_tick = time.monotonic()
    if ready is not None:
        ready.set()
    if on_ready is not None:           # capture filtered, injector open, signals handled
        on_ready(cap)
    try:
        while not cap.stopped:
            now = time.monotonic()
            if (t_end is not None and now >= t_end) or (stop is not None and stop.is_set()):
                break
            if now - last_tick >= reload_every:
                last_tick = now
                if bl.reload():
                    st.reloads += 1
                st.drops = int(cap.stats().get("dropped", 0))
                if status:
                    print("\r" + st.line(), end="", file=out, flush=True)
            batch = cap.poll()
            if batch is None:
                continue
            pk = batch.packets
            st.packets += len(pk)
            mb = dissect(pk, batch.data)               # one walk: GETs and SNIs
            rb = an.feed(batch, mb)
            if rb is not None and rb.num_rows:
                # each hit record's first frame (the FIN to the client, or the QUIC close) is the
                # one racing the server's answer to the client
                react = sent_at[0][an.last_frame_index] - rb.column("ts_ns").to_numpy()
                st.records.append(rb.append_column("reaction_ns", pa.array(react.astype(np.int64))))
            st.gets = an.counters["get"]
            st.hits = an.counters["hits"]
            st.tls_hits, st.quic_hits = an.counters["tls_hits"], an.counters["quic_hits"]
            st.tls_injected, st.quic_injected = an.counters["tls_forged"], an.counters["quic_forged"]
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        try:
            st.drops = int(cap.stats().get("dropped", 0))
        except Exception:   # the handle may already be gone after an interface vanished
            pass
        st.counters = dict(an.counters)
        if status:
            print("\r" + st.line(), file=out, flush=True)
        cap.close()
        if inj is not cap:
            inj.close()
    return st
