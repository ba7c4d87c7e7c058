"""The packet feeder (paper section 2.1.4): one reader, N consumer processes, shared-memory rings.

The parent reads and classifies (the cheap part: link/IP/TCP and the first payload bytes, the
dissector's own rule, ext/run/feeder.pyx classify_packets) and drives a `FeederPairer` in place of the pairing
table: each HTTP first packet goes to consumer Eq. 3 mod N (ext/pair/hashes.pxd, ext/run/feeder.pyx),
stamped with the capture clock of the whole stream, through a single-producer/single-consumer
ring in shared memory (ext/run/spsc.h). Each consumer dissects its packets, runs the ordinary
pairing table and sends its records back as Arrow IPC batches over a pipe. Because a request and its
response meet in the same consumer and every consumer's GC sees the single table's clock, the
multiset of records equals the single-process run (docs/FEEDER.md has the argument and limits).

Shared memory: with the default "fork" start, one anonymous shared mapping per ring, made by the
parent and inherited by the consumers: it has no name, so nothing can be left behind, whatever
kills the run. With "spawn", one /dev/shm file per ring, unlinked as soon as every consumer has
mapped it and in any case when the run ends; files a killed run left behind (their creator's
pid is gone) are removed by the next feeder. Consumers ignore SIGINT (Ctrl-C reaches the
parent, which ends the run) and are killed by the kernel when the parent dies
(PR_SET_PDEATHSIG), so no consumer outlives a SIGKILL of the run. The consumer count is bounded
(httpanalyzer.consumers.max_consumers).
"""
from __future__ import annotations

import mmap
import multiprocessing as mp
import os
import pickle
import secrets
import signal
import sys
import time
import traceback
from multiprocessing.connection import wait as mp_wait

import numpy as np
import pyarrow as pa

from httpanalyzer.consumers import choose_consumers, max_consumers
from httpanalyzer.errors import ConsumerFailed  # noqa: F401  (raised here; its home is errors)
from httpanalyzer.pairing import Pairer
from webtap._ext import feeder as _fx
from webtap._ext.dissect import dissect_batch
from webtap.records import http as records
from webtap.records.message import DISSECT_REASONS, MSGF_MID_SEGMENT

__all__ = ["FeederPairer", "ConsumerFailed", "default_consumers", "hash_eq1", "hash_eq2", "hash_eq3",
           "classify_packets", "FEED_DTYPE"]

hash_eq1, hash_eq2, hash_eq3 = _fx.hash_eq1, _fx.hash_eq2, _fx.hash_eq3
#: dtype of the reader's HTTP first packets (ext/run/feeder.pyx FeedPkt)
FEED_DTYPE = _fx.feed_dtype()
#: dissector counters only parsing a message can tell: the consumers count these, the reader
#: (classify_packets) counts every other one
MESSAGE_COUNTERS = ("uri_truncated", "headers_incomplete", "line_too_long", "mid_segment_request",
                    "mid_segment_response", "body_continues", "length_unknown", "rest_not_http",
                    "after_continuation_request", "after_continuation_response")


class PacketBatch:
    """The reader's view of one packet batch: `msgs`, its HTTP first packets (FEED_DTYPE, with
    ts_ns like a message batch, so the stream merges traces the same way) and the dissector
    `counters` the reader can give without parsing the messages."""

    __slots__ = ("msgs", "data", "counters")

    def __init__(self, msgs, data, counters):
        self.msgs, self.data, self.counters = msgs, data, counters

    def __len__(self):
        return len(self.msgs)


def classify_packets(packets: np.ndarray, data: np.ndarray) -> PacketBatch:
    """The reader's pass (a drop-in for webtap.dissect.dissect in webtap.stream.messages):
    link/IP/TCP and the first payload bytes of every packet, no HTTP parsing."""
    pk, cnt = _fx.classify_batch(packets, data)
    return PacketBatch(pk, data, {name: int(cnt[i]) for i, name in enumerate(DISSECT_REASONS)})

#: bytes of one ring (frames of up to a quarter of it). Small on purpose: a ring that stays in
#: the cache and whose pages are touched once beats a large one (measured: 32 MiB rings made
#: the dispatch of the benchmark trace 2-4x slower, page faults on first touch).
DEFAULT_RING_BYTES = 4 << 20
SHM_DIR = "/dev/shm"
#: a consumer sends its records when this many wait, or when the oldest waited SEND_EVERY_S
SEND_RECORDS = 16384
SEND_EVERY_S = 0.25
#: the reader looks at the consumers' pipes and exit codes at most this often while it feeds
POLL_EVERY_S = 0.02
_TAG_BATCH = b"B"
_TAG_CTRL = b"P"
_EMPTY = records.empty_batch()


def default_consumers() -> int:
    """The consumer count a run uses when none is given (httpanalyzer.consumers: 0 on a
    machine where consumers cannot gain over one process)."""

    return choose_consumers()[0]


# ------------------------------------------------------------------------------ consumer side

def _send_batch(conn, batch: pa.RecordBatch) -> None:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    conn.send_bytes(_TAG_BATCH + sink.getvalue().to_pybytes())


def _send_ctrl(conn, obj) -> None:
    conn.send_bytes(_TAG_CTRL + pickle.dumps(obj))


def _segment_clocks(found, first, clocks, gc_ns: int) -> np.ndarray:
    """Per message, the single table's clock just before it, when messages inside a segment
    (MSGF_MID_SEGMENT) follow their packet's first message: the reader stamped only the first
    (`clocks`, one per packet). After that message the single table's clock is the packet's time,
    unless the time is behind the clock by no more than the window (counted clock_backwards, the
    clock stays); a reset or a step forward leaves it at the packet's time."""
    c = np.asarray(clocks)[np.cumsum(first) - 1]
    ts = found["ts_ns"]
    stays = first | ((ts < c) & (c - ts <= gc_ns))
    return np.ascontiguousarray(np.where(stays, c, ts), dtype=np.int64)


def _consumer_main(cid: int, path: str, region_bytes: int, conn, ppid: int, gc_timeout: float,
                   table_options: dict, drain_only: bool = False) -> None:
    """One consumer: frames from its ring into a pairing table; records back over `conn`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _fx.die_with_parent(ppid):
        os._exit(1)                         # the feeder died before we could ask to follow it
    ring = None
    try:
        if isinstance(path, mmap.mmap):     # fork: the parent's anonymous mapping, inherited
            mm = path
        else:
            fd = os.open(path, os.O_RDWR)
            try:
                mm = mmap.mmap(fd, region_bytes)
            finally:
                os.close(fd)
        ring = _fx.Ring(mm)
        _send_ctrl(conn, ("ready", cid))

        pairer = Pairer(gc_timeout=gc_timeout, **table_options)
        table = pairer.table
        dissect_counts = np.zeros(len(DISSECT_REASONS), dtype=np.uint64)
        pair_s = send_s = 0.0
        last_send = time.perf_counter()
        while True:
            fr = ring.next_frame(0.2)
            t0 = time.perf_counter()
            if fr is None:
                if os.getppid() != ppid:     # the feeder is gone: nobody to report to
                    return
                if table.records_waiting:    # idle ring (live): let the records out
                    _send_batch(conn, pairer.take())
                    last_send = t0
                continue
            kind, trace, tick, msgs, clocks, data, size = fr
            if drain_only:
                pass
            elif kind == _fx.FRAME_PKTS:
                # HTTP first packets: dissect here (the reader only routed them), then pair
                found, cnt = dissect_batch(msgs, data)
                dissect_counts += cnt
                first = (found["flags"] & MSGF_MID_SEGMENT) == 0
                if int(first.sum()) != len(msgs):
                    raise RuntimeError(f"reader and dissector disagree: {len(msgs)} HTTP first "
                                       f"packets routed, {int(first.sum())} dissected")
                if len(found) != len(msgs):
                    clocks = _segment_clocks(found, first, clocks, table.gc_timeout_ns)
                table.trace = trace
                table.feed(found, data, clocks)
                del found
            elif kind == _fx.FRAME_TICK:
                table.advance(tick)
            n = len(msgs)
            del msgs, clocks, data, fr      # views into the ring: drop before releasing
            ring.release(size, n)
            t1 = time.perf_counter()
            pair_s += t1 - t0
            if kind == _fx.FRAME_END:
                break
            # Records leave in large batches (a take() and an Arrow batch cost ~3 ms whatever
            # their size), or after SEND_EVERY_S so that live runs stream.
            if table.records_waiting >= SEND_RECORDS or (
                    table.records_waiting and t1 - last_send > SEND_EVERY_S):
                _send_batch(conn, pairer.take())
                last_send = t1
            send_s += time.perf_counter() - t1
        pairer.flush()
        b = pairer.take()
        if b.num_rows:
            _send_batch(conn, b)
        _send_ctrl(conn, ("done", cid, pairer.counters(), {"pair_s": pair_s, "send_s": send_s},
                          dict(zip(DISSECT_REASONS, map(int, dissect_counts)))))
    except BaseException:
        try:
            _send_ctrl(conn, ("error", cid, traceback.format_exc()))
        except OSError:
            pass
        sys.exit(1)
    finally:
        ring = None


# ------------------------------------------------------------------------------ feeder side

def sweep_rings() -> list[str]:
    """Remove the /dev/shm ring files of feeders whose process is gone (a run killed between
    making its named rings and its consumers mapping them); returns what was removed."""
    gone = []
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return gone
    for name in names:
        if not name.startswith("webtap-feeder-"):
            continue
        pid = name[len("webtap-feeder-"):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue                        # alive (or not ours to signal): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            gone.append(name)
        except OSError:
            pass
    return gone


class FeederPairer:
    """The Pairer interface (feed/advance/flush/take/counters) over N consumer processes.

    consumers: N. live: a full ring drops (counted) instead of blocking. ring_bytes: size of each
    ring. Use as a context manager, or call close(): it ends every process and removes every
    shared-memory file, whatever happened."""

    def __init__(self, consumers: int, gc_timeout: float = 60.0, live: bool = False,
                 ring_bytes: int = DEFAULT_RING_BYTES, start_timeout: float = 60.0,
                 start_method: str = "fork", drain_only: bool = False, **table_options):

        if not 1 <= consumers <= max_consumers():
            raise ValueError(f"consumers must be in 1 .. {max_consumers()} (4 per core, at most "
                             f"64), not {consumers}")
        self.n = consumers
        self.live = live
        self._paths: list[str] = []
        self._maps: list[mmap.mmap] = []
        self._procs: list = []
        self._conns: list = []
        self._ready = [False] * consumers
        self._done = [False] * consumers
        self._counters: list[dict | None] = [None] * consumers
        self._dissect: list[dict] = [{} for _ in range(consumers)]
        self._times: list[dict] = [{} for _ in range(consumers)]
        self._batches: list[pa.RecordBatch] = []
        self._rows = [0] * consumers
        self._failed: ConsumerFailed | None = None
        self._last_take = time.monotonic()
        self._last_poll = 0.0
        self.dispatcher = None
        self.rings: list = []
        tag = f"webtap-feeder-{os.getpid()}-{secrets.token_hex(4)}"
        named = start_method != "fork"
        try:
            if named:
                sweep_rings()
            for c in range(consumers):
                if not named:               # no name: nothing a killed run could leave behind
                    self._maps.append(mmap.mmap(-1, ring_bytes, flags=mmap.MAP_SHARED))
                    self.rings.append(_fx.Ring(self._maps[c], init=True))
                    continue
                path = os.path.join(SHM_DIR, f"{tag}-{c}")
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                self._paths.append(path)
                try:
                    os.ftruncate(fd, ring_bytes)
                    self._maps.append(mmap.mmap(fd, ring_bytes))
                finally:
                    os.close(fd)
                self.rings.append(_fx.Ring(self._maps[c], init=True))
            # fork: a consumer starts in milliseconds with the modules it needs already loaded
            # (spawn re-imports them: ~0.6 s per consumer); "spawn" stays available.
            ctx = mp.get_context(start_method)
            for c in range(consumers):
                r, w = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_consumer_main, name=f"webtap-consumer-{c}", daemon=True,
                                args=(c, self._paths[c] if named else self._maps[c],
                                      ring_bytes, w, os.getpid(),
                                      gc_timeout, table_options, drain_only))
                p.start()
                w.close()
                self._procs.append(p)
                self._conns.append(r)
            deadline = time.monotonic() + start_timeout
            while not all(self._ready):
                self._poll(timeout=0.05)
                if self._failed is not None:
                    raise self._failed
                if time.monotonic() > deadline:
                    raise RuntimeError("feeder consumers did not start in time")
            self._unlink()                  # every consumer has it mapped: nothing to leave behind
            self.dispatcher = _fx.Dispatcher(self._maps, gc_timeout_ns=int(round(gc_timeout * 1e9)),
                                             live=live, check=self._check)
        except BaseException:
            self.close()
            raise

    # -- pipes and liveness

    def _handle(self, c: int, raw: bytes) -> None:
        if raw[:1] == _TAG_BATCH:
            b = pa.ipc.open_stream(pa.py_buffer(raw)[1:]).read_next_batch()
            self._rows[c] += b.num_rows
            self._batches.append(b)
            return
        msg = pickle.loads(raw[1:])
        if msg[0] == "ready":
            self._ready[c] = True
        elif msg[0] == "done":
            self._done[c] = True
            self._counters[c] = msg[2]
            self._times[c] = msg[3]
            self._dissect[c] = msg[4]
        elif msg[0] == "error":
            self._fail(c, msg[2])

    def _fail(self, c: int, detail: str = "") -> None:
        if self._failed is None:
            ring = self.rings[c] if c < len(self.rings) else None
            p = self._procs[c]
            self._failed = ConsumerFailed(c, p.exitcode, ring.msgs_done if ring else 0,
                                          ring.frames_done if ring else 0, detail)

    def _poll(self, timeout: float = 0.0) -> None:
        """Read everything the consumers have sent; notice a consumer that is gone."""
        live = {conn: c for c, conn in enumerate(self._conns) if not conn.closed}
        if not live:
            return
        for conn in mp_wait(list(live), timeout):
            c = live[conn]
            try:
                while conn.poll():
                    self._handle(c, conn.recv_bytes())
            except (EOFError, OSError):
                conn.close()
                if not self._done[c]:
                    self._procs[c].join(1.0)
                    self._fail(c)
        for c, p in enumerate(self._procs):
            if not self._done[c] and p.exitcode is not None and not self._conns[c].closed:
                # dead: read what it managed to send, then report it
                try:
                    while self._conns[c].poll():
                        self._handle(c, self._conns[c].recv_bytes())
                except (EOFError, OSError):
                    pass
                if not self._done[c]:
                    self._fail(c)

    def _check(self) -> None:
        """Called by the dispatcher while a ring is full: drain the pipes (a consumer blocked
        on a full pipe would never free its ring) and stop if a consumer failed."""
        self._last_poll = time.monotonic()
        self._poll()
        if self._failed is not None:
            raise self._failed

    def _check_now_and_then(self) -> None:
        """_check at most every POLL_EVERY_S: a poll of N pipes and N exit codes costs ~0.3 ms,
        once per capture batch that was a third of the reader's dispatch time. A full ring
        still checks every ~20 ms (Dispatcher), a failure is reported at the next check."""
        if time.monotonic() - self._last_poll >= POLL_EVERY_S or self._failed is not None:
            self._check()

    @property
    def pids(self) -> list[int]:
        """Process ids of the consumers, by consumer id."""
        return [p.pid for p in self._procs]

    # -- the Pairer interface

    def feed(self, msgs: np.ndarray, data: np.ndarray, trace: int = 0) -> None:
        """msgs: the HTTP first packets of a packet batch as classify_packets() gives them
        (FEED_DTYPE; the consumers dissect, then pair). The name is the Pairer interface's."""
        self._check_now_and_then()
        if msgs.dtype != FEED_DTYPE:
            raise TypeError("FeederPairer.feed takes classify_packets() output (FEED_DTYPE), "
                            "not dissected messages")
        self.dispatcher.feed_packets(msgs, data, trace)

    def advance(self, now_ns: int) -> None:
        self._check_now_and_then()
        self.dispatcher.tick(int(now_ns))

    def due(self) -> bool:
        """Whether take() is worth calling now (as Pairer.due): records the consumers sent
        amount to SEND_RECORDS, or some waited SEND_EVERY_S."""
        if not self._batches:
            return False
        return (sum(b.num_rows for b in self._batches) >= SEND_RECORDS
                or time.monotonic() - self._last_take >= SEND_EVERY_S)

    def take(self) -> pa.RecordBatch:
        self._last_take = self._last_poll = time.monotonic()
        self._poll()
        if self._failed is not None:
            raise self._failed
        return self._take()

    def _take(self) -> pa.RecordBatch:
        if not self._batches:
            return _EMPTY
        out = pa.Table.from_batches(self._batches, schema=self._batches[0].schema).combine_chunks()
        self._batches.clear()
        return out.to_batches()[0]

    def flush(self) -> None:
        """End of input: every consumer flushes its table; wait for all their records."""
        self._check()
        self.dispatcher.end()
        self._wait_done()

    def _wait_done(self) -> None:
        while not all(self._done):
            self._poll(timeout=0.05)
            if self._failed is not None:
                raise self._failed

    def salvage(self) -> pa.RecordBatch:
        """After a consumer failed: the surviving consumers flush and send what they hold (their
        waiting messages leave as 'end' records); returns every record not yet taken."""
        survivors = [c for c in range(self.n) if not self._done[c] and self._procs[c].exitcode is None
                     and (self._failed is None or c != self._failed.consumer)]
        deadline = time.monotonic() + 30
        survivors = [c for c in survivors if self._end_one(c, deadline)]
        while time.monotonic() < deadline and not all(self._done[c] for c in survivors):
            self._poll(timeout=0.05)
            if any(self._procs[c].exitcode is not None and not self._done[c] for c in survivors):
                break
        return self._take()

    def _end_one(self, c: int, deadline: float) -> bool:
        """An END frame to consumer c alone: waits for room (draining the pipes meanwhile) until
        `deadline` or until c exits. False if it could not be written."""
        def check():
            self._poll()
            if self._procs[c].exitcode is not None or time.monotonic() > deadline:
                raise TimeoutError
        try:
            _fx.Dispatcher([self._maps[c]], check=check).end()
        except TimeoutError:
            return False
        return True

    def dissect_counters(self) -> dict[str, int]:
        """What the consumers' dissectors counted (PKTS frames), summed; of these only
        MESSAGE_COUNTERS are not already in the reader's classify_packets() counts."""
        out: dict[str, int] = dict.fromkeys(DISSECT_REASONS, 0)
        for d in self._dissect:
            for k, v in d.items():
                out[k] += v
        return out

    def counters(self) -> dict[str, int]:
        """Pairing counters summed over the consumers (peak_pending: the largest)."""
        out: dict[str, int] = {}
        for cnt in self._counters:
            for k, v in (cnt or {}).items():
                out[k] = max(out.get(k, 0), v) if k == "peak_pending" else out.get(k, 0) + v
        return out

    def balance(self) -> dict:
        """Per consumer: what the feeder sent (messages, bytes, frames, stalls, drops) and the
        transactions (paired records) its table produced: the paper's Table 3 as data."""
        st = self.dispatcher.stats if self.dispatcher is not None else np.zeros((self.n, len(_fx.STAT_NAMES)))
        rows = []
        for c in range(self.n):
            row = {"consumer": c}
            row.update({k: int(st[c, i]) for i, k in enumerate(_fx.STAT_NAMES)})
            cnt = self._counters[c] or {}
            row["transactions"] = int(cnt.get("paired", 0))
            row["records"] = self._rows[c]
            row["pair_s"] = self._times[c].get("pair_s", 0.0)     # consumer CPU in its table
            row["send_s"] = self._times[c].get("send_s", 0.0)     # consumer CPU sending records
            rows.append(row)
        return {"consumers": rows,
                "interim_route_overwritten": int(self.dispatcher.interim_overwritten)
                if self.dispatcher is not None else 0}

    # -- teardown

    def _unlink(self) -> None:
        for p in self._paths:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self._paths = []

    def close(self) -> None:
        """Stop every consumer (SIGTERM, then SIGKILL), unmap and remove the rings."""
        for p in self._procs:
            if p.exitcode is None:
                p.terminate()
        for p in self._procs:
            p.join(2.0)
            if p.exitcode is None:
                p.kill()
                p.join(2.0)
        for conn in self._conns:
            conn.close()
        self.dispatcher = None
        self.rings = []
        for m in self._maps:
            try:
                m.close()
            except BufferError:
                pass
        self._maps = []
        self._unlink()
        for p in self._procs:
            try:
                p.close()
            except ValueError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
