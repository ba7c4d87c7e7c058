"""Live capture split by the kernel: N consumer processes, each with its own AF_PACKET ring.

`httpanalyzer -i IFACE --consumers N` (and `iter_record_batches(iface, live=True, consumers=N,
capture="fanout")`): the parent opens N TPACKET_V3 sockets joined to one PACKET_FANOUT group
(webtap._ext.afpacket), the kernel picks each packet's socket (by default its symmetric flow
hash, so a connection's packets meet in one socket; or the paper's Eq. 3 as a classic-BPF
program, see DEFAULT_MODE), and each consumer process reads its ring in place (no copy), dissects, pairs and
sends its records back as Arrow IPC batches over a pipe (the feeder's wire format). Unlike the
offline feeder (docs/FEEDER.md) nothing in user space reads every packet: the reader, which
is the feeder's bottleneck, is the kernel here.

Each consumer's pairing clock moves with the packets its socket gets (the end of every ring
block, as the single live process moves with the end of every batch), and at the end every
consumer is brought to the latest clock of all before it flushes. The records equal those of
one process over the same packets (tests/live/test_fanout.py replays a trace into a veth and
compares with the offline one-process run); the kernel's drop counters (PACKET_STATISTICS)
are read at the end and reported per consumer.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
import traceback
from multiprocessing.connection import wait as mp_wait

import numpy as np
import pyarrow as pa

from httpanalyzer.consumers import max_consumers
from httpanalyzer.feeder import _TAG_BATCH, ConsumerFailed, _fx, _send_batch, _send_ctrl
from httpanalyzer.pairing import Pairer
from webtap import runctx
from webtap._ext import afpacket
from webtap._ext.dissect import dissect_batch
from webtap.records.message import DISSECT_REASONS, PACKET_DTYPE

__all__ = ["iter_fanout_batches", "fanout_available"]

#: a ring block is handed over when full or this long after its first packet (latency bound)
RETIRE_MS = 20
#: The kernel's symmetric flow hash (PACKET_FANOUT_HASH): every packet of a connection goes to
#: one consumer, so a final response after a 1xx (keyed SEQ = the 1xx's SEQ + its length, a
#: number Eq. 3 of its request cannot predict) still meets its request. 'eq3' (the paper's
#: Eq. 3, ext/read/afpacket.pyx eq3_program) balances by transaction, not by connection, but a
#: classic-BPF program has no state to remember where a 1xx went (the offline feeder keeps a
#: route table for it), so such final responses may land elsewhere and come out unpaired: the
#: records then differ from one process's (measured in tests/fanout on a trace with 100
#: Continue). Exactness first: 'hash' is the default, 'eq3' an option.
DEFAULT_MODE = "hash"
SEND_RECORDS = 16384
SEND_EVERY_S = 0.25


def fanout_available() -> bool:
    """Whether this platform has AF_PACKET fanout (Linux) and webtap was built with it."""
    try:
        from webtap._ext import afpacket  # noqa: F401
    except ImportError:
        return False
    return sys.platform.startswith("linux")


def _consumer_main(cid, ring, others, conn, ppid, counts, stop, clock, gc_timeout,
                   table_options) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _fx.die_with_parent(ppid):       # killed with the run (PR_SET_PDEATHSIG)
        os._exit(1)
    for r in others:                  # the parent's other sockets: not this process's to read
        r.close()
    try:
        pairer = Pairer(gc_timeout=gc_timeout, **table_options)
        table = pairer.table
        pk = np.empty(ring.max_packets_per_block, dtype=PACKET_DTYPE)
        data = ring.data
        dcount = np.zeros(len(DISSECT_REASONS), dtype=np.uint64)
        source = {"packets": 0, "captured_bytes": 0, "wire_bytes": 0}
        kinds = np.zeros(3, dtype=np.int64)
        last_send = time.monotonic()
        stopping = False
        _send_ctrl(conn, ("ready", cid))
        while True:
            n = ring.next_block(pk, 3 * RETIRE_MS if stopping else 100)
            if n:
                p = pk[:n]
                msgs, cnt = dissect_batch(p, data)
                dcount += cnt
                if len(msgs):
                    table.feed(msgs, data)
                    kinds += np.bincount(msgs["kind"], minlength=3)[:3]
                last = int(p["ts_ns"].max())
                table.advance(last)
                if last > clock[cid]:
                    clock[cid] = last
                source["packets"] += n
                source["captured_bytes"] += int(p["caplen"].sum())
                source["wire_bytes"] += int(p["wirelen"].sum())
                del msgs, p
                ring.release()             # the table copied what it keeps
                counts[cid] += n
            elif stopping:
                break                      # a retire period passed with nothing new: drained
            elif stop.is_set():
                stopping = True            # read what the kernel still holds, then end
            elif os.getppid() != ppid:
                return
            now = time.monotonic()
            if table.records_waiting >= SEND_RECORDS or (
                    table.records_waiting and now - last_send > SEND_EVERY_S):
                _send_batch(conn, pairer.take())
                last_send = now
        # every consumer ends at the latest clock any of them reached (the single process's
        # clock at the end), so the end-of-input GC agrees with one process
        stop_clock = max(clock[:])
        if stop_clock:
            table.advance(stop_clock)
        pairer.flush()
        b = pairer.take()
        if b.num_rows:
            _send_batch(conn, b)
        st = ring.stats()
        _send_ctrl(conn, ("done", cid, pairer.counters(), dict(zip(DISSECT_REASONS, map(int, dcount))),
                          source, st, {"requests": int(kinds[1]), "responses": int(kinds[2])}))
    except BaseException:
        try:
            _send_ctrl(conn, ("error", cid, traceback.format_exc()))
        except OSError:
            pass
        sys.exit(1)


def iter_fanout_batches(iface: str, consumers: int, bpf: str | None = None,
                        gc_timeout: float = 60.0, totals=None, mode: str = DEFAULT_MODE,
                        max_packets: int | None = None, balance: dict | None = None,
                        start_timeout: float = 60.0, on_ready=None, **table_options):
    """Record batches of a live capture on `iface` split over `consumers` fanout sockets and
    processes, until Ctrl-C (KeyboardInterrupt in this process) or, with max_packets, until the
    consumers together have processed that many packets. totals: a webtap.stream.Totals that
    receives the capture and dissector counts; balance: a dict that receives per consumer
    packets, HTTP messages, transactions, records and the kernel's counters. Yields, at the
    end the summed pairing counters in balance['pairing']. mode: 'hash' (the kernel's
    symmetric flow hash) or 'eq3' (the paper's Eq. 3 as a classic-BPF program; see DEFAULT_MODE
    for why it is not the default). on_ready: called once every consumer reads its ring."""

    run_ctx = runctx.current()       # the run's context: the command line's Ctrl-C of a live run

    if not 1 <= consumers <= max_consumers():
        raise ValueError(f"fanout capture needs 1 .. {max_consumers()} consumers, not {consumers}")
    rings = afpacket.open_group(iface, consumers, mode=mode, bpf=bpf, retire_ms=RETIRE_MS)
    ctx = mp.get_context("fork")
    counts = ctx.Array("q", consumers, lock=False)
    clock = ctx.Array("q", consumers, lock=False)
    stop = ctx.Event()
    procs, conns = [], []
    state = {"ready": [False] * consumers, "done": [None] * consumers, "rows": [0] * consumers}
    failed: list = []
    interrupted = False

    def handle(c, raw):
        if raw[:1] == _TAG_BATCH:
            b = pa.ipc.open_stream(pa.py_buffer(raw)[1:]).read_next_batch()
            state["rows"][c] += b.num_rows
            return b
        msg = pickle.loads(raw[1:])
        if msg[0] == "ready":
            state["ready"][c] = True
        elif msg[0] == "done":
            state["done"][c] = msg
        elif msg[0] == "error" and not failed:
            failed.append(ConsumerFailed(c, None, 0, 0, msg[2]))
        return None

    def poll(timeout):
        out = []
        open_ = {conn: c for c, conn in enumerate(conns) if not conn.closed}
        for conn in mp_wait(list(open_), timeout):
            c = open_[conn]
            try:
                while conn.poll():
                    b = handle(c, conn.recv_bytes())
                    if b is not None and b.num_rows:
                        out.append(b)
            except (EOFError, OSError):
                conn.close()
                if state["done"][c] is None and not failed:
                    procs[c].join(1)
                    failed.append(ConsumerFailed(c, procs[c].exitcode, 0, 0))
        return out

    try:
        for c in range(consumers):
            r, w = ctx.Pipe(duplex=False)
            others = [x for i, x in enumerate(rings) if i != c]
            p = ctx.Process(target=_consumer_main, name=f"webtap-fanout-{c}", daemon=True,
                            args=(c, rings[c], others, w, os.getpid(), counts, stop, clock,
                                  gc_timeout, table_options))
            p.start()
            w.close()
            procs.append(p)
            conns.append(r)
        for r in rings:                # the consumers hold the sockets now
            r.close()
        deadline = time.monotonic() + start_timeout
        while not all(state["ready"]) and not failed:
            yield from poll(0.05)
            if time.monotonic() > deadline:
                raise RuntimeError("fanout consumers did not start in time")
        if on_ready is not None and not failed:
            on_ready()
        while not failed and not all(d is not None for d in state["done"]):
            try:
                yield from poll(0.05)
                if max_packets is not None and sum(counts[:]) >= max_packets:
                    stop.set()
                if run_ctx.stop_requested and not stop.is_set():
                    # the command line's Ctrl-C of a live run: the consumers drain and end
                    interrupted = True
                    stop.set()
            except KeyboardInterrupt:
                interrupted = True
                stop.set()
        if failed:
            stop.set()
            raise failed[0]
    finally:
        stop.set()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.terminate()
                p.join()
        for r in rings:
            r.close()
        for conn in conns:
            conn.close()
        rows = []
        pairing: dict = {}
        for c, d in enumerate(state["done"]):
            if d is None:
                continue
            _, _, cnt, dis, source, st, kinds = d
            for k, v in cnt.items():
                pairing[k] = max(pairing.get(k, 0), v) if k == "peak_pending" else pairing.get(k, 0) + v
            if totals is not None:
                totals.add_source(source)
                totals.add_dissect(dis)
            rows.append({"consumer": c, "packets": source["packets"],
                         "messages": int(cnt.get("messages", 0)), **kinds,
                         "packet_bytes": source["captured_bytes"],
                         "transactions": int(cnt.get("paired", 0)), "records": state["rows"][c],
                         "kernel_packets": st["kernel_packets"], "kernel_drops": st["kernel_drops"]})
        if balance is not None:
            balance.update({"capture": f"AF_PACKET fanout ({mode})", "consumers": rows,
                            "pairing": pairing, "interrupted": interrupted})
