"""The URL analyzer and session controller as a one-pass consumer (issue 8).

``UrlAnalyzer`` is a ``webtap.stream`` consumer: ``feed(packets, msgs)`` per batch, ``finish()``
at the end, so it shares one pass over the trace with the HTTP analyzer. Per batch:

1. ``ConnTable.feed``: SYN / SYN-ACK / ACK / first payload times per connection (C, nogil);
2. ``extract``: every GET (any port) -> key-form URL straight from the packet bytes (C, nogil),
   everything skipped counted by reason (``FILTER_REASONS``);
3. ``UrlTree.match_batch``: one call for the whole batch, per-URL match time in ns;
4. ``forge``: FIN+ACK to the client and RST+ACK to the server for every hit (C, nogil);
5. one ``pyarrow.RecordBatch`` of records (``RECORD_SCHEMA``), and the forged frames handed to
   ``on_forged(frames, offsets, hit_ts_ns, linktypes)`` (live injection, pcap writer).

No Python runs per packet or per GET; the only Python loops are over the distinct entries hit in
a batch (their text) and over forged frames when a caller asks for them one by one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from webtap._ext import dissect as _dissect
from webtap._ext import urlmatch as _um

__all__ = ["UrlAnalyzer", "Blacklist", "load_blacklist", "FILTER_REASONS", "RECORD_SCHEMA",
           "CONN_DTYPE"]

FILTER_REASONS = _um.FILTER_REASONS

#: ext/urlmatch.pxd ConnTiming
CONN_DTYPE = np.dtype(
    [
        ("client_ip", "u1", (16,)),
        ("server_ip", "u1", (16,)),
        ("client_port", "<u2"),
        ("server_port", "<u2"),
        ("ip_version", "u1"),
        ("state", "u1"),
        ("_pad", "<u2"),
        ("client_isn", "<u4"),
        ("server_isn", "<u4"),
        ("t_syn", "<i8"),
        ("t_synack", "<i8"),
        ("t_ack", "<i8"),
        ("t_req", "<i8"),
        ("t_resp", "<i8"),
        ("t_last", "<i8"),
    ],
    align=True,
)

#: One row per GET that reached the matcher. Times in ns; match_ns includes the tree search only
#: (the key is built in the extraction pass), forge_ns the FIN+RST pair (0 for misses).
RECORD_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),            # capture time of the request packet
        ("pkt_index", pa.uint64()),       # its position in the trace
        ("src_ip", pa.string()),          # client address
        ("src_port", pa.uint16()),
        ("dst_ip", pa.string()),          # server address
        ("dst_port", pa.uint16()),
        ("url", pa.string()),             # canonical form (ext/urlcanon.h) of Host + URI
        ("hit", pa.bool_()),              # matched an entry active at the time
        ("entry_id", pa.int32()),         # tree id of the matched entry (0: miss)
        ("entry", pa.string()),           # the entry's canonical URL (null: miss)
        ("category", pa.string()),        # the entry's category (null: miss / unknown)
        ("match_ns", pa.int64()),         # tree match time of this URL
        ("forge_ns", pa.int64()),         # time to forge the FIN + RST pair (hits)
        ("forged", pa.int8()),            # frames forged for this GET (2 for a hit, else 0)
    ]
)


@dataclass
class Blacklist:
    """A tree plus what names its categories; `store` is set when it came from an SQLite store
    (then filtering periods are honoured and `reload()` follows the store)."""

    tree: object
    categories: dict[int, str] = field(default_factory=dict)
    manager: object = None
    path: Path | None = None
    mtime: float = 0.0

    def active(self, periods: np.ndarray, at: float | None = None) -> np.ndarray:
        if self.manager is None or len(periods) == 0:
            return np.ones(len(periods), dtype=bool)
        return np.asarray(self.manager.store.active(periods, at), dtype=bool)

    def reload(self) -> bool:
        """Pick up changes of the store (or a rewritten snapshot file); True when the tree changed."""
        if self.manager is not None:
            if self.manager.store.last_seq() == self.manager.seq:
                return False
            self.manager.refresh()
            self.tree = self.manager.tree
            self.categories = self.manager.store.categories()
            return True
        if self.path is not None:
            m = self.path.stat().st_mtime
            if m != self.mtime:
                from urlfilter.tree import UrlTree
                self.tree, self.mtime = UrlTree.load(self.path), m
                return True
        return False


def load_blacklist(path: str | os.PathLike) -> Blacklist:
    """A store made with ``urlfilter --db DB import ...`` or a tree snapshot file (DB.tree)."""
    from urlfilter.store import UrlManager
    from urlfilter.tree import UrlTree

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no blacklist at {p}")
    with open(p, "rb") as f:
        magic = f.read(16)
    if magic.startswith(b"WTAVL"):      # UrlTree.load refuses other versions with a clear error
        return Blacklist(UrlTree.load(p), {}, None, p, p.stat().st_mtime)
    if not magic.startswith(b"SQLite format 3"):
        raise ValueError(f"{p}: neither an SQLite store nor a tree snapshot")
    mgr = UrlManager(p)
    tree = mgr.load_tree()
    mgr.save_snapshot()
    return Blacklist(tree, mgr.store.categories(), mgr, p)


def _strings(buf: np.ndarray, offsets: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(buf)]
                                 ).cast(pa.string())


class UrlAnalyzer:
    """Extract, match and (optionally) forge, batch by batch. See the module docstring.

    blacklist: a Blacklist (or a bare UrlTree). forge: build FIN/RST frames for hits.
    on_forged: callback(frames uint8, offsets int64, ts_ns int64 per frame, linktypes per frame).
    handshakes: keep the per-connection table the timing condition needs.
    keep_records: keep every record batch (scan, timing); a live run keeps only counts.
    """

    def __init__(self, blacklist, *, forge: bool = True, verify_checksums: bool = True,
                 on_forged: Callable | None = None, handshakes: bool = True,
                 keep_records: bool = True, idle_ns: int = 0, hits_only: bool = False,
                 time_forge_all: bool = False):
        self.blacklist = blacklist if isinstance(blacklist, Blacklist) else Blacklist(blacklist)
        self.forge = forge
        self.verify = verify_checksums
        self.on_forged = on_forged
        self.conns = _um.ConnTable(idle_ns=idle_ns) if handshakes else None
        self.keep_records = keep_records
        self.hits_only = hits_only
        self.time_forge_all = time_forge_all   # timing report: forge time of misses too
        self.counters = dict.fromkeys(FILTER_REASONS, 0)
        self.counters.update(hits=0, misses=0, inactive=0, forged_frames=0)
        self.batches: list[pa.RecordBatch] = []
        self.timing_rows: list[np.ndarray] = []     # ConnTiming of each record's connection
        self._pending: list[tuple] = []
        self.finished = False

    # -- one batch ------------------------------------------------------------------------------
    def feed(self, packets, msgs) -> pa.RecordBatch | None:
        pk = getattr(packets, "packets", packets)
        data = getattr(packets, "data", None)
        if data is None:
            data = msgs.data
        if self.conns is not None and len(pk):
            self.conns.feed(pk, data)
        m = msgs.msgs
        if len(m) == 0:
            return None
        rows, keys, offs, cnt = _um.extract(m, msgs.data, self.verify)
        for name, v in zip(FILTER_REASONS, cnt.tolist()):
            self.counters[name] += v
        if len(rows) == 0:
            return None
        tree = self.blacklist.tree
        match_ns = np.zeros(len(rows), dtype=np.int64)
        ids = tree.match_batch(keys, offs, True, False, match_ns)
        cats, pers = tree.payload_batch(ids)
        hit = ids > 0
        if hit.any():
            act = self.blacklist.active(pers[hit])
            self.counters["inactive"] += int((~act).sum())
            hit[np.flatnonzero(hit)[~act]] = False
        nh = int(hit.sum())
        self.counters["hits"] += nh
        self.counters["misses"] += len(rows) - nh
        forge_ns = np.zeros(len(rows), dtype=np.int64)
        forged = np.zeros(len(rows), dtype=np.int8)
        if nh and self.forge:
            # A request inside a tunnel (issue 23: GRE, VXLAN, ...) is matched but not forged:
            # the forged frames would carry the tunnel's outer headers with stale lengths. Counted
            # (tunnel_hits_not_forged, present once it happens), never silent.
            fhit = hit & (m["encap"][rows] == 0)
            if int(fhit.sum()) != nh:
                self.counters["tunnel_hits_not_forged"] = (self.counters.get("tunnel_hits_not_forged", 0)
                                                           + nh - int(fhit.sum()))
            hrows = rows[fhit]
            frames, foffs, fns = _um.forge(m, msgs.data, hrows)
            forge_ns[fhit] = fns
            forged[fhit] = 2
            self.counters["forged_frames"] += 2 * len(hrows)
            if self.on_forged is not None and len(hrows):
                ts = np.repeat(m["ts_ns"][hrows] + match_ns[fhit] + fns, 2)
                lts = np.repeat(m["linktype"][hrows], 2)
                self.on_forged(frames, foffs, ts, lts)
        if self.time_forge_all and (~hit).any():
            # what forging would cost for the misses (frames dropped): T_proc of every connection
            forge_ns[~hit] = _um.forge(m, msgs.data, rows[~hit])[2]
        if not self.keep_records:
            return None
        sel = np.flatnonzero(hit) if self.hits_only else np.arange(len(rows))
        if len(sel) == 0:
            return None
        rb = self._records(m, rows, keys, offs, ids, cats, hit, match_ns, forge_ns, forged, sel)
        self.batches.append(rb)
        if self.conns is not None:
            self._pending.append((m[rows[sel]].copy(),))
        return rb

    def _records(self, m, rows, keys, offs, ids, cats, hit, match_ns, forge_ns, forged, sel):
        sub = m[rows[sel]]
        url = _strings(_um.flip_keys(keys, offs), offs)
        if len(sel) != len(rows):
            url = url.take(pa.array(sel))
        hid = np.where(hit, ids, 0)[sel].astype(np.int32)
        uniq = np.unique(hid[hid > 0])
        tree = self.blacklist.tree
        # One Python call per distinct entry hit in the batch (not per packet): their text.
        text = {int(u): tree.get(int(u)) for u in uniq}
        catn = self.blacklist.categories
        ctext = {int(u): catn.get(int(c), str(int(c)) if c else None)
                 for u, c in zip(uniq, tree.payload_batch(uniq)[0])} if len(uniq) else {}
        entry = pa.array([text.get(int(x)) for x in uniq], pa.string())
        category = pa.array([ctext.get(int(x)) for x in uniq], pa.string())
        pos = np.searchsorted(uniq, hid)
        mask = hid == 0
        entries = entry.take(pa.array(np.where(mask, 0, pos), mask=mask)) if len(uniq) else pa.nulls(len(hid), pa.string())
        categories = category.take(pa.array(np.where(mask, 0, pos), mask=mask)) if len(uniq) else pa.nulls(len(hid), pa.string())
        return pa.RecordBatch.from_arrays(
            [
                pa.array(sub["ts_ns"]),
                pa.array(sub["pkt_index"]),
                _dissect.ip_to_arrow(sub, "src_ip"),
                pa.array(sub["src_port"]),
                _dissect.ip_to_arrow(sub, "dst_ip"),
                pa.array(sub["dst_port"]),
                url,
                pa.array(hit[sel]),
                pa.array(hid),
                entries,
                categories,
                pa.array(match_ns[sel]),
                pa.array(forge_ns[sel]),
                pa.array(forged[sel]),
            ],
            schema=RECORD_SCHEMA,
        )

    def finish(self) -> None:
        """Join every record with its connection's handshake times (timing condition)."""
        if self.conns is not None and self._pending:
            for (sub,) in self._pending:
                self.timing_rows.append(
                    self.conns.lookup(sub, np.arange(len(sub))).view(CONN_DTYPE))
            self._pending.clear()
        self.finished = True

    # -- results -------------------------------------------------------------------------------
    def table(self) -> pa.Table:
        return pa.Table.from_batches(self.batches, schema=RECORD_SCHEMA)

    def to_pandas(self):
        return self.table().to_pandas()

    def connection_times(self) -> np.ndarray:
        """CONN_DTYPE rows aligned with table() (after finish())."""
        if not self.timing_rows:
            return np.zeros(0, CONN_DTYPE)
        return np.concatenate(self.timing_rows)
