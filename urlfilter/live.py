"""Live mode: capture mirrored traffic with libpcap, cut blacklisted GETs with forged FIN/RST.

    >>> stats = run_live("mirror0", "blacklist.db")        # doctest: +SKIP

Each capture batch goes through the one pipeline (webtap.pipeline: the walk, then UrlAnalyzer:
extract, match, forge) and the forged frames of the batch leave in one nogil loop of
``pcap_inject`` (``LiveCapture.inject_many``), on the capture interface or on ``inject_iface``. Capture runs in libpcap's immediate mode so that a
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
from webtap.pipeline import Pipeline

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


class _LiveStage:
    """The filter as a stage of the live pipeline: the analyzer's hits of each batch, each with
    the time its first forged frame took to leave (reaction_ns)."""

    def __init__(self, an: UrlAnalyzer, st: LiveStats, sent_at: list):
        self.an, self.st, self.sent_at = an, st, sent_at

    @property
    def tls_watch(self):
        return self.an.tls_watch

    @property
    def tcp_events(self):
        return self.an.tcp_events

    def feed(self, batch, mb):
        st, an = self.st, self.an
        st.packets += len(batch.packets)
        rb = an.feed(batch, mb)
        if rb is not None and rb.num_rows:
            # each hit record's first frame (the FIN to the client, or the QUIC close) is the
            # one racing the server's answer to the client
            react = self.sent_at[0][an.last_frame_index] - rb.column("ts_ns").to_numpy()
            st.records.append(rb.append_column("reaction_ns", pa.array(react.astype(np.int64))))
        c = an.counters
        st.gets, st.hits = c["get"], c["hits"]
        st.tls_hits, st.quic_hits = c["tls_hits"], c["quic_hits"]
        st.tls_injected, st.quic_injected = c["tls_forged"], c["quic_forged"]

    def finish(self):
        return None


def run_live(iface: str, blacklist, *, inject_iface: str | None = None, bpf: str | None = "tcp or udp",
             duration: float | None = None, status: bool = True, verify_checksums: bool = False,
             reload_every: float = 1.0, ready: threading.Event | None = None, on_ready=None,
             stop: threading.Event | None = None, out=sys.stderr) -> LiveStats:
    """Filter until Ctrl-C / SIGTERM, `duration` seconds, or `stop` is set. Returns the stats with
    one record batch of hits (RECORD_SCHEMA + reaction_ns) per batch that had hits.
    ready (an Event) is set and on_ready(capture) called once the filter is in place, the
    injector open and the signal handlers installed (the command prints its readiness line).

    The run is webtap.pipeline.Pipeline over the live interface (inline executor: the capture
    loop stays in this thread) with the filter as its stage; between reads (at least every
    50 ms, traffic or not) the pipeline's tick reloads the blacklist, refreshes the status line
    and ends the run at `duration` or `stop`."""

    bl = blacklist if isinstance(blacklist, Blacklist) else load_blacklist(blacklist)
    st = LiveStats()
    sent_at = [np.zeros(0, np.int64)]
    held: dict = {}                       # the capture and the injector, once open

    def on_forged(frames, offsets, ts, linktypes):
        sent = np.zeros(len(offsets) - 1, np.int64)
        s, f = held["inj"].inject_many(frames, offsets, sent)
        sent_at[0] = sent
        st.injected += s
        st.inject_failed += f

    an = UrlAnalyzer(bl, forge=True, verify_checksums=verify_checksums, on_forged=on_forged,
                     handshakes=False, keep_records=True, hits_only=True)

    def _stop(signum, frame):
        st.stopped_by = signal.Signals(signum).name
        if "cap" in held:
            held["cap"].stop()

    def _ready(cap):                      # capture filtered: the injector, then the caller
        held["cap"] = cap
        held["inj"] = (cap if inject_iface in (None, iface)
                       else open_live(inject_iface, bpf="less 1", timeout_ms=50))
        if ready is not None:
            ready.set()
        if on_ready is not None:
            on_ready(cap)

    t_end = time.monotonic() + duration if duration else None
    last_tick = [time.monotonic()]

    def tick() -> bool:
        now = time.monotonic()
        if (t_end is not None and now >= t_end) or (stop is not None and stop.is_set()):
            return True
        if now - last_tick[0] >= reload_every:
            last_tick[0] = now
            if bl.reload():
                st.reloads += 1
            st.drops = int(held["cap"].stats().get("dropped", 0))
            if status:
                print("\r" + st.line(), end="", file=out, flush=True)
        return False

    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, _stop)
    pipe = Pipeline(iface, [_LiveStage(an, st, sent_at)], bpf=bpf, live=True, on_ready=_ready,
                    tick=tick, immediate=True, timeout_ms=50, batch_size=1024)
    try:
        pipe.run()
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        cap = held.get("cap")
        if cap is not None:
            st.drops = int(cap.last_stats.get("dropped", st.drops))
        st.counters = dict(an.counters)
        if status:
            print("\r" + st.line(), file=out, flush=True)
        inj = held.get("inj")
        if inj is not None and inj is not cap:
            inj.close()
    return st
