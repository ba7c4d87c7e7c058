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
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from urlfilter.policy import Policy
from urlfilter.store import UrlManager
from urlfilter.tree import UrlTree
from urlfilter.urlstore import BASE_MAGIC, UrlStore
from webtap._ext import dissect as _dissect
from webtap._ext import urlmatch as _um
from webtap.dissect import dissect
from webtap.records import columns
from webtap.records.urlhit import CONN_DTYPE, RECORD_SCHEMA

__all__ = ["UrlAnalyzer", "Blacklist", "load_blacklist", "FILTER_REASONS", "SNI_REASONS",
           "LOOKUP_COUNTERS", "summary_line", "policy_line", "DECISIONS", "POLICY_COUNTERS",
           "RECORD_SCHEMA", "CONN_DTYPE"]

FILTER_REASONS = _um.FILTER_REASONS
SNI_REASONS = _um.SNI_REASONS
assert not set(FILTER_REASONS) & set(SNI_REASONS), "GET and SNI reasons share one counters dict"
PROTO_NAMES = _um.PROTO_NAMES
_PROTO_CODES = columns.Codes(PROTO_NAMES)

#: The lookup counters of a pass, each named for what it counts, in the order the summary of
#: `urlfilter scan`, its plot title and the demo print them (summary_line())
LOOKUP_COUNTERS = {
    "get": "GETs seen",
    "get_lookups": "GETs looked up",          # = `extracted` (its older name)
    "get_hits": "GET hits",
    "tls_lookups": "TLS SNIs looked up",
    "tls_hits": "TLS SNI hits",
    "quic_lookups": "QUIC SNIs looked up",
    "quic_hits": "QUIC SNI hits",
    "lookups": "lookups (GETs + SNIs)",
    "hits": "hits (GETs + SNIs)",
    "forged_frames": "frames forged",
}


def summary_line(c: dict) -> str:
    """The one-line summary of a pass's counters (UrlAnalyzer.counters): every number named for
    what it counts, the totals last and said to be totals."""
    return (f"{c['get']} GETs seen, {c['get_lookups']} GETs looked up, {c['get_hits']} GET hits; "
            f"{c['tls_lookups']} TLS SNIs looked up, {c['tls_hits']} TLS SNI hits; "
            f"{c['quic_lookups']} QUIC SNIs looked up, {c['quic_hits']} QUIC SNI hits; "
            f"total {c['lookups']} lookups, {c['hits']} hits, {c['forged_frames']} frames forged")

def policy_line(c: dict) -> str:
    """The policy's counters (issue 34) in one line."""
    per = c["rule_ns"] / c["rule_lookups"] if c["rule_lookups"] else 0.0
    return (f"{c['blocked']} blacklist hits cut, {c['allowed']} let through by the allow list; "
            f"rules: {c['rule_cut']} cut, {c['rule_allow']} allowed, {c['rule_log']} logged "
            f"({c['rule_lookups']} lookups, {per:.0f} ns each in the rule pass)")


@dataclass
class Blacklist:
    """A tree plus what names its categories; `store` is set when it came from an SQLite store
    (then filtering periods are honoured and `reload()` follows the store)."""

    tree: object
    categories: dict[int, str] = field(default_factory=dict)
    manager: object = None
    path: Path | None = None
    mtime: float = 0.0
    #: the allow list and rules (urlfilter.policy.Policy, issue 34); None or empty: none
    policy: object = None

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
            self.policy = Policy.from_store(self.manager.store)
            return True
        if self.path is not None:
            m = self.path.stat().st_mtime
            if m != self.mtime:
                self.tree, self.mtime = _load_snapshot(self.path), m
                return True
        return False


def _load_snapshot(p: Path):
    """A snapshot file mapped read-only: the URL store's (WTURLB, issue 35) or an older bare
    tree's (WTAVL); each loader refuses other versions with a clear error."""
    with open(p, "rb") as f:
        magic = f.read(8)
    return (UrlStore if magic[:5] == BASE_MAGIC[:5] else UrlTree).load(p)


def load_blacklist(path: str | os.PathLike) -> Blacklist:
    """A store made with ``urlfilter --db DB import ...`` or a snapshot file (DB.tree)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no blacklist at {p}")
    with open(p, "rb") as f:
        magic = f.read(16)
    if magic.startswith((b"WTAVL", b"WTURL")):
        return Blacklist(_load_snapshot(p), {}, None, p, p.stat().st_mtime)
    if not magic.startswith(b"SQLite format 3"):
        raise ValueError(f"{p}: neither an SQLite store nor a tree snapshot")
    mgr = UrlManager(p)
    tree = mgr.load_tree()
    mgr.save_snapshot()
    return Blacklist(tree, mgr.store.categories(), mgr, p, policy=Policy.from_store(mgr.store))


#: the `decision` column's values by code (0: nothing cut or let through by a list or rule)
DECISIONS = (None, "blacklist", "exception", "rule_cut", "rule_allow")
_DECISION_CODES = columns.Codes(DECISIONS)
#: counters of the policy (issue 34), in every pass's counters (0 without a policy)
POLICY_COUNTERS = ("blocked", "allowed", "rule_cut", "rule_log", "rule_allow", "rule_lookups",
                   "rule_ns")


class UrlAnalyzer:
    """Extract, match and (optionally) forge, batch by batch. See the module docstring.

    blacklist: a Blacklist (or a bare UrlTree). forge: build FIN/RST frames for hits.
    on_forged: callback(frames uint8, offsets int64, ts_ns int64 per frame, linktypes per frame).
    handshakes: keep the per-connection table the timing condition needs.
    keep_records: keep every record batch (scan, timing); a live run keeps only counts.
    records_at_end: feed returns None and the records are built in large batches (at
    RECORDS_EVERY lookups and at the end): scan and timing, which read table() after the run.
    """

    def __init__(self, blacklist, *, forge: bool = True, verify_checksums: bool = True,
                 on_forged: Callable | None = None, handshakes: bool = True,
                 keep_records: bool = True, idle_ns: int = 0, hits_only: bool = False,
                 time_forge_all: bool = False, sni: bool = True, records_at_end: bool = False):
        self.blacklist = blacklist if isinstance(blacklist, Blacklist) else Blacklist(blacklist)
        self.forge = forge
        self.verify = verify_checksums
        self.on_forged = on_forged
        self.conns = _um.ConnTable(idle_ns=idle_ns) if handshakes else None
        self.keep_records = keep_records
        self.records_at_end = records_at_end      # feed returns None; table() has the records
        self._parts: list[dict] = []
        self._nparts = 0
        self.hits_only = hits_only
        self.time_forge_all = time_forge_all   # timing report: forge time of misses too
        self.counters = dict.fromkeys(FILTER_REASONS, 0)
        self.counters.update(hits=0, misses=0, inactive=0, forged_frames=0)
        # TLS/QUIC (issue 18): the SNI pass's reasons and per-protocol lookups, hits, frames
        self.sni = _um.SniTable() if sni else None
        self.server_initials: list[np.ndarray] = []   # timing: QUIC Initials not from clients
        if self.sni is not None and handshakes:
            self.sni.keep_undecryptable = True
        self.counters.update(dict.fromkeys(SNI_REASONS, 0))
        self.counters.update(tls_lookups=0, tls_hits=0, tls_forged=0, quic_lookups=0,
                             quic_hits=0, quic_forged=0)
        # one set of lookup counters, named for what they count (issue 30; LOOKUP_COUNTERS):
        # `extracted` is get_lookups under its older name, `hits` = get_hits + sni_hits
        self.counters.update(lookups=0, get_lookups=0, get_hits=0, sni_lookups=0, sni_hits=0)
        # the policy's (issue 34): blacklist hits cut (blocked) and let through by the allow
        # list (allowed); lookups decided or logged by a rule; the rule pass's time
        self.counters.update(dict.fromkeys(POLICY_COUNTERS, 0))
        self.last_frame_index = np.zeros(0, np.int64)
        # (record batch, its MESSAGE rows) per commit: one list, appended in one call, so that a
        # signal's KeyboardInterrupt (raised between any two bytecodes of the main thread)
        # never leaves records without their connection rows or the other way round
        self._done: list[tuple] = []
        self._timed = 0                             # commits whose connection rows are looked up
        self.timing_rows: list[np.ndarray] = []     # ConnTiming of each record's connection
        self.finished = False

    @property
    def tls_watch(self):
        """The SNI pass's watch list, for webtap.dissect.dissect(tls_watch=): with it the HTTP
        dissector's walk also hands over the ClientHello candidates (MessageBatch.tls) and feed
        does not walk the packets a second time. None without the SNI pass."""
        return self.sni.watch if self.sni is not None else None

    @property
    def tcp_events(self) -> bool:
        """Whether this stage's timing table wants the walk's TCP events (webtap.pipeline)."""
        return self.conns is not None

    def dissector(self):
        """The dissector for webtap.stream.messages/run that makes the one walk serve this
        analyzer's GETs, SNIs and (with handshakes) the connection table's TCP events."""
        if self.sni is None and self.conns is None:
            return dissect
        return partial(dissect, tls_watch=self.tls_watch, tcp_events=self.conns is not None)

    # -- one batch ------------------------------------------------------------------------------
    def _lookup(self, keys, offs, n):
        """Tree match of n keys; hits restricted to entries active now. (ids, cats, hit, ns)."""
        tree = self.blacklist.tree
        match_ns = np.zeros(n, dtype=np.int64)
        ids = tree.match_batch(keys, offs, True, False, match_ns)
        cats, pers = tree.payload_batch(ids)
        hit = ids > 0
        if hit.any():
            act = self.blacklist.active(pers[hit])
            self.counters["inactive"] += int((~act).sum())
            hit[np.flatnonzero(hit)[~act]] = False
        return ids, cats, hit, match_ns

    def feed(self, packets, msgs) -> pa.RecordBatch | None:
        """HTTP GETs of the dissector's messages, then the SNIs of the batch's TLS ClientHellos
        and QUIC Initials (SniTable). Returns the batch's records (http rows first, then tls and
        quic), or None; forged frames go to on_forged in one call, in record order
        (`last_frame_index[i]`: the first frame of hit record i of the returned batch)."""
        if isinstance(packets, np.ndarray):
            # a bare PACKET_DTYPE array (an ndarray's own .data is its buffer, not the bytes)
            pk, data = packets, msgs.data
        else:
            pk = getattr(packets, "packets", packets)
            data = getattr(packets, "data", None)
            if data is None:
                data = msgs.data
        if self.conns is not None and len(pk):
            ev = getattr(msgs, "tcp_events", None)
            if ev is not None:
                self.conns.feed_events(ev)          # the dissector's walk (dissector())
            else:
                self.conns.feed(pk, data)           # walks the batch itself
        out = []          # (msgs, rows, keys, offs, proto, sni, flags, ids, cats, hit, match_ns, forge_ns, forged)
        frames = []       # (frames, offsets, ts, linktypes) in record order
        m = msgs.msgs
        if len(m):
            rows, keys, offs, cnt = _um.extract(m, msgs.data, self.verify)
            for name, v in zip(FILTER_REASONS, cnt.tolist()):
                self.counters[name] += v
            if len(rows):
                out.append(self._part(m, msgs.data, rows, keys, offs, 0, None, None, frames, None))
        if self.sni is not None:
            pol = self.blacklist.policy
            want = pol is not None and pol.wants_ja4
            if self.sni.want_ja4 != want:   # JA4 per ClientHello only for rules on JA4
                self.sni.want_ja4 = want
        if self.sni is not None and len(pk):
            if getattr(msgs, "tls", None) is not None and msgs.tls_watch is self.sni.watch:
                # the candidates of the dissector's one walk (dissector() above)
                sm, proto, flags, skeys, skoff, sni, soff, scnt = self.sni.extract_messages(
                    msgs.tls, data, self.verify)
            else:               # a caller's plain dissect(): the SNI pass walks the batch itself
                sm, proto, flags, skeys, skoff, sni, soff, scnt = self.sni.extract(pk, data, self.verify)
            for name, v in zip(SNI_REASONS, scnt.tolist()):
                self.counters[name] += v
            if self.conns is not None:
                u = self.sni.take_undecryptable()
                if len(u):
                    self.server_initials.append(u[["ts_ns", "src_ip", "dst_ip", "src_port", "dst_port"]].copy())
            if len(sm):
                out.append(self._part(sm, data, np.arange(len(sm)), skeys, skoff, proto,
                                      (sni, soff), flags, frames, self.sni.last_dcids,
                                      self.sni.last_ja4))
        if out:
            # first frame of each hit, in record order (http hits, then tls/quic hits by row)
            self.last_frame_index = np.concatenate([o[-1][o[9]] for o in out]).astype(np.int64)
        if frames and self.on_forged is not None:
            base = np.concatenate([[0], np.cumsum([len(f[0]) for f in frames])[:-1]])
            offs = np.concatenate([[0]] + [f[1][1:] + b for f, b in zip(frames, base)]).astype(np.int64)
            self.on_forged(np.concatenate([f[0] for f in frames]), offs,
                           np.concatenate([f[2] for f in frames]), np.concatenate([f[3] for f in frames]))
        if not self.keep_records or not out:
            return None
        parts = [r for r in (self._rows(*o[:-1]) for o in out) if r is not None]
        if not parts:
            return None
        if self.records_at_end:
            # Arrow once per RECORDS_EVERY lookups, not per batch: the build has a fixed cost
            # per call (~25 pyarrow calls), a fifth of a scan when paid per packet batch
            self._parts.extend(parts)
            self._nparts += sum(len(p["hid"]) for p in parts)
            if self._nparts >= self.RECORDS_EVERY:
                self._take_parts()
            return None
        rb = self._batch(parts)
        self._done.append((rb, self._subs(parts), None))
        return rb

    #: lookups gathered as numpy columns before they become one record batch (records_at_end)
    RECORDS_EVERY = 1 << 16

    @property
    def batches(self) -> list:
        """The record batches so far."""
        return [d[0] for d in self._done]

    def _subs(self, parts) -> list | None:
        """The parts' MESSAGE rows, kept for the connection table's lookup (timing) only."""
        return [p["sub"] for p in parts] if self.conns is not None else None

    def _take_parts(self) -> None:
        """The gathered parts as one record batch. Safe to call again after an interruption
        anywhere in it: the parts leave self._parts only once their batch is in self._done."""
        parts = self._parts
        if not parts:
            return
        if not (self._done and self._done[-1][2] is parts):
            self._done.append((self._batch(parts), self._subs(parts), parts))
        self._parts, self._nparts = [], 0

    def _policy(self, m, data, rows, keys, offs, proto, sni, ja4, hit):
        """Apply the allow list and the rules (urlfilter.policy: rules first, first match wins;
        then the allow list over the blacklist's hits). Returns (hit, rule int32, decision
        uint8: DECISIONS)."""
        n = len(rows)
        pol = self.blacklist.policy
        c = self.counters
        if pol is None or pol.empty:
            c["blocked"] += int(hit.sum())
            return hit, np.zeros(n, np.int32), np.where(hit, 1, 0).astype(np.uint8)
        exc = np.zeros(n, bool)
        if pol.allow is not None and hit.any():
            hi = np.flatnonzero(hit)        # only the blacklist's hits are looked up again
            hoffs, hkeys = columns.gather_bytes(offs, keys, hi)
            exc[hi] = pol.allowed(hkeys, hoffs)
        if pol.rules is not None:
            rule, act, ns = pol.rules.match(m, data, rows, keys, offs, proto, sni, ja4)
            c["rule_lookups"] += n
            c["rule_ns"] += int(ns)
        else:
            rule, act = np.zeros(n, np.int32), np.zeros(n, np.uint8)
        cut, allow = act == 1, act == 3
        decided = cut | allow
        c["rule_cut"] += int(cut.sum())
        c["rule_allow"] += int(allow.sum())
        c["rule_log"] += int((act == 2).sum())
        listed = hit & ~decided
        c["allowed"] += int((listed & exc).sum())
        c["blocked"] += int((listed & ~exc).sum())
        decision = np.zeros(n, np.uint8)
        decision[listed & ~exc] = 1
        decision[listed & exc] = 2
        decision[cut] = 3
        decision[allow] = 4
        return np.where(decided, cut, listed & ~exc), rule, decision

    def _part(self, m, data, rows, keys, offs, proto, sni, flags, frames, dcids, ja4=None):
        """Match and forge one kind of lookup (proto 0 http, else per row 1 tls / 2 quic).
        dcids: SniTable.last_dcids (the DCID whose keys protect each QUIC connection); ja4:
        SniTable.last_ja4 (rules on JA4)."""
        def forge_quic(m, data, rows):
            return _um.forge_quic(m, data, rows, dcids)

        n = len(rows)
        ids, cats, hit, match_ns = self._lookup(keys, offs, n)
        hit, rule, decision = self._policy(m, data, rows, keys, offs, proto, sni, ja4, hit)
        nh = int(hit.sum())
        self.counters["hits"] += nh
        self.counters["misses"] += n - nh
        proto_a = np.full(n, proto, np.uint8) if np.isscalar(proto) else proto
        self.counters["lookups"] += n
        for k, name in ((0, "get"), (1, "tls"), (2, "quic")):
            self.counters[f"{name}_lookups"] += int((proto_a == k).sum())
            self.counters[f"{name}_hits"] += int((hit & (proto_a == k)).sum())
        self.counters["sni_lookups"] = self.counters["tls_lookups"] + self.counters["quic_lookups"]
        self.counters["sni_hits"] = self.counters["tls_hits"] + self.counters["quic_hits"]
        forge_ns = np.zeros(n, dtype=np.int64)
        forged = np.zeros(n, dtype=np.int8)
        tcp = proto_a != 2
        first_all = np.full(n, -1, np.int64)     # index of each hit's first frame in this feed
        if self.forge:
            # A lookup inside a tunnel (issue 23: GRE, VXLAN, ...) is matched but not forged: the
            # forged frames would carry the tunnel's outer headers with stale lengths. Counted
            # (tunnel_hits_not_forged, present once it happens), never silent.
            plain = m["encap"][rows] == 0
            nt = int((hit & ~plain).sum())
            if nt:
                self.counters["tunnel_hits_not_forged"] = self.counters.get("tunnel_hits_not_forged", 0) + nt
            for sel_kind, fn, per in ((tcp, _um.forge, 2), (~tcp, forge_quic, 1)):
                sel = hit & sel_kind & plain
                if not sel.any():
                    continue
                hrows = rows[sel]
                fr, foffs, fns = fn(m, data, hrows)
                forge_ns[sel] = fns
                forged[sel] = per
                self.counters["forged_frames"] += per * int(sel.sum())
                if per == 1:
                    self.counters["quic_forged"] += int(sel.sum())
                else:
                    self.counters["tls_forged"] += 2 * int((sel & (proto_a == 1)).sum())
                ts = np.repeat(m["ts_ns"][hrows] + match_ns[sel] + fns, per)
                lts = np.repeat(m["linktype"][hrows], per)
                done = sum(len(f[1]) - 1 for f in frames)
                first_all[sel] = done + np.arange(int(sel.sum())) * per
                frames.append((fr, foffs, ts, lts))
        if self.time_forge_all:
            for sel_kind, fn in ((tcp, _um.forge), (~tcp, forge_quic)):
                sel = ~hit & sel_kind
                if sel.any():
                    forge_ns[sel] = fn(m, data, rows[sel])[2]
        return (m, rows, keys, offs, proto_a, sni, flags, ids, cats, hit, match_ns, forge_ns, forged,
                rule, decision, first_all)

    def _rows(self, m, rows, keys, offs, proto, sni, flags, ids, cats, hit, match_ns, forge_ns,
              forged, rule, decision) -> dict | None:
        """One part's records as numpy columns (the selected lookups); None when none."""
        sel = np.flatnonzero(hit) if self.hits_only else np.arange(len(rows))
        if len(sel) == 0:
            return None
        sub = m[rows[sel]]
        if sni is not None:
            sni_b = columns.gather_bytes(sni[1], sni[0], sel)
            has_sni = np.ones(len(sel), bool)
            ech = (flags & 1).astype(bool)[sel]
        else:
            sni_b = (np.zeros(len(sel) + 1, np.int64), np.zeros(0, np.uint8))
            has_sni = np.zeros(len(sel), bool)
            ech = np.zeros(len(sel), bool)
        return {"sub": sub, "url": columns.gather_bytes(offs, _um.flip_keys(keys, offs), sel),
                "sni": sni_b, "has_sni": has_sni, "ech": ech, "hit": hit[sel],
                "hid": np.where(hit, ids, 0)[sel].astype(np.int32), "match_ns": match_ns[sel],
                "forge_ns": forge_ns[sel], "forged": forged[sel], "proto": proto[sel].astype(np.int64),
                "rule": rule[sel].astype(np.int32), "decision": decision[sel].astype(np.int64)}

    def _batch(self, parts: list) -> pa.RecordBatch:
        """The records (RECORD_SCHEMA) of parts from _rows, every column built from numpy buffers
        with the records kit (webtap.records.columns): no pa.array over objects and no
        pyarrow.compute call, each of which would import pandas (~0.3-0.5 s of a scan)."""
        def cat(k):
            return parts[0][k] if len(parts) == 1 else np.concatenate([p[k] for p in parts])
        sub, hid = cat("sub"), cat("hid")
        uniq = np.unique(hid[hid > 0])
        tree = self.blacklist.tree
        # One Python call per distinct entry hit (not per packet): their text and category.
        catn = self.blacklist.categories
        cat_ids = tree.payload_batch(uniq)[0] if len(uniq) else []
        e_text = [tree.get(int(u)) for u in uniq]
        e_offs, e_data = columns.texts(e_text)
        c_offs, c_data = columns.texts([catn.get(int(c), str(int(c)) if c else None) for c in cat_ids])
        e_ok = np.array([t is not None for t in e_text] + [False], bool)
        c_ok = np.array([bool(c) or int(c) in catn for c in cat_ids] + [False], bool)
        found = hid != 0
        pos = np.where(found, np.searchsorted(uniq, hid), len(uniq))
        e_valid, c_valid = found & e_ok[pos], found & c_ok[pos]
        pos = np.where(found, pos, 0)
        url = columns.concat_bytes(p["url"] for p in parts)
        sni = columns.concat_bytes(p["sni"] for p in parts)
        return pa.RecordBatch.from_arrays(
            [
                columns.num(sub["ts_ns"]),
                columns.num(sub["pkt_index"] + 1, pa.uint64()),
                _dissect.ip_to_arrow(sub, "src_ip"),
                columns.num(sub["src_port"], pa.uint16()),
                _dissect.ip_to_arrow(sub, "dst_ip"),
                columns.num(sub["dst_port"], pa.uint16()),
                columns.text_column(*url),
                columns.boolean(cat("hit")),
                columns.num(hid, pa.int32()),
                columns.gather(e_offs, e_data, pos, valid=e_valid),
                columns.gather(c_offs, c_data, pos, valid=c_valid),
                columns.num(cat("match_ns"), pa.int64()),
                columns.num(cat("forge_ns"), pa.int64()),
                columns.num(cat("forged"), pa.int8()),
                _PROTO_CODES.column(cat("proto")),
                columns.text_column(*sni, valid=cat("has_sni")),
                columns.boolean(cat("ech")),
                columns.num(cat("rule"), pa.int32()),
                _DECISION_CODES.column(cat("decision"), valid=cat("decision") != 0),
            ],
            schema=RECORD_SCHEMA,
        )

    def finish(self) -> None:
        """Join every record with its connection's handshake times (timing condition)."""
        self._take_parts()
        if self.conns is not None:
            done = self._done[self._timed:]
            for _, subs, _ in done:
                for sub in subs:
                    self.timing_rows.append(
                        self.conns.lookup(sub, np.arange(len(sub))).view(CONN_DTYPE))
            self._timed += len(done)
        self.finished = True

    # -- results -------------------------------------------------------------------------------
    def table(self) -> pa.Table:
        self._take_parts()              # an interrupted run's records so far too
        return pa.Table.from_batches(self.batches, schema=RECORD_SCHEMA)

    def to_pandas(self):
        return self.table().to_pandas()

    def connection_times(self) -> np.ndarray:
        """CONN_DTYPE rows aligned with table() (after finish())."""
        if not self.timing_rows:
            return np.zeros(0, CONN_DTYPE)
        return np.concatenate(self.timing_rows)
