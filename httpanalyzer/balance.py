"""The paper's load-balancing experiments (Table 3, Fig. 8) on top of the feeder.

    from httpanalyzer import balance
    msgs = balance.trace_messages("trace.pcap")          # every HTTP message of the traces
    balance.hash_histograms(msgs, bins=64)               # Fig. 8: Eq. 1 vs Eq. 3 histograms
    tables = balance.balance_runs("trace.pcap", (2, 4, 8))   # real feeder runs, one per N
    balance.balance_summary(tables)                      # Table 3's layout

    # OpenGate's strategies beside Eq. 1 and Eq. 3 (issue 34), over the same messages:
    mc = balance.message_costs("trace.pcap")             # messages, measured cost of each, pairs
    runs = balance.strategies(mc, consumers=4)           # assignment, queue depth, wait per strategy
    balance.strategy_table(mc, runs)                     # per strategy and consumer: share, lost

These sit ABOVE the one-pass runner (httpanalyzer.stream), which sits above the feeder engine
(httpanalyzer.feeder): they used to live in feeder.py, which made feeder <-> stream a circle.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from httpanalyzer.feeder import hash_eq1, hash_eq3
from httpanalyzer.pairing import Pairer
from httpanalyzer.stream import Summary, iter_record_batches
from webtap._ext import lbsim as _lb
from webtap.dissect import dissect
from webtap.records.message import MESSAGE_DTYPE, MSG_REQUEST, MSG_RESPONSE
from webtap.pipeline import Pipeline

__all__ = ["balance_table", "hash_histograms", "trace_messages", "balance_runs", "balance_summary",
           "STRATEGIES", "MessageCosts", "message_costs", "assign", "strategies",
           "strategy_table", "depth_over_time"]


def balance_table(balance: dict):
    """The paper's Table 3 as a DataFrame: per consumer, share (%) of the HTTP messages (the
    packets the feeder forwards) and of the transactions."""
    df = pd.DataFrame(balance["consumers"]).set_index("consumer")
    for col, share in (("messages", "messages_pct"), ("transactions", "transactions_pct"),
                       ("packet_bytes", "bytes_pct")):
        tot = df[col].sum()
        df[share] = 100.0 * df[col] / tot if tot else 0.0
    return df


def hash_histograms(msgs: np.ndarray, bins: int = 64, consumers: int | None = None) -> dict:
    """Histograms of Eq. 1 (4-tuple) and Eq. 3 (seq/ack) values mod `bins` over messages (the
    paper's Fig. 8), and, with consumers=N, each consumer's share under both."""
    e1 = hash_eq1(msgs)
    e3 = hash_eq3(msgs)
    out = {"bins": np.arange(bins),
           "eq1": np.bincount(e1 % bins, minlength=bins),
           "eq3": np.bincount(e3 % bins, minlength=bins)}
    if consumers:
        out["eq1_share"] = np.bincount(e1 % consumers, minlength=consumers) / max(len(msgs), 1)
        out["eq3_share"] = np.bincount(e3 % consumers, minlength=consumers) / max(len(msgs), 1)
    return out


def trace_messages(traces, bpf: str | None = None) -> np.ndarray:
    """Every HTTP message (HttpMsg struct array, webtap.records.message) of the traces, in one array:
    the input of hash_histograms. Read and dissected in one pass (webtap.pipeline)."""

    parts = [mb.msgs.copy() for _, mb in Pipeline(traces, bpf=bpf).batches()]
    if not parts:
        return np.zeros(0, MESSAGE_DTYPE)
    return np.concatenate(parts)


def balance_runs(traces, consumers=(2, 4, 8), gc_timeout: float = 60.0) -> dict:
    """Run the feeder once per N in `consumers` over the traces; N -> balance_table (the paper's
    Table 3 for each N). Each table's attrs hold the run's `paired` count (single source of truth
    for the transactions the table must add up to)."""

    out = {}
    for n in consumers:
        fb: dict = {}
        s = Summary(detailed=False)
        for _ in iter_record_batches(traces, consumers=int(n), feeder=fb, summary=s,
                                     gc_timeout=gc_timeout, progress=False):
            pass
        t = balance_table(fb)
        t.attrs["paired"] = int(s.pairing["paired"])
        out[int(n)] = t
    return out


def balance_summary(tables: dict):
    """The paper's Table 3 layout: one row per consumer, one column pair (messages %,
    transactions %) per N; NaN where a consumer does not exist for that N."""
    cols = {}
    for n, t in tables.items():
        cols[(f"N={n}", "messages %")] = t["messages_pct"]
        cols[(f"N={n}", "transactions %")] = t["transactions_pct"]
    df = pd.DataFrame(cols)
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.name = "consumer"
    return df


# ---------------------------------------------------------------- OpenGate's strategies (issue 34)

#: consumer-choice strategies compared over one trace's messages:
#: eq1 / eq3: the paper's (consumer = Eq. 1 / Eq. 3 mod N, ext/pair/hashes.pxd);
#: hash2 / hash5: OpenGate's flow hashing of the 2-tuple (addresses) / 5-tuple (addresses,
#: ports, TCP), symmetric (ext/run/lbsim.pyx flow_hash);
#: jsq: join-the-shortest-queue per message; jsq_flow: per connection (its first message picks
#: the shortest queue, the rest follow it)
STRATEGIES = ("eq1", "eq3", "hash2", "hash5", "jsq", "jsq_flow")


@dataclass
class MessageCosts:
    """Every HTTP message of the traces (MESSAGE_DTYPE, in capture order), the measured cost of
    each on a consumer (ns), the transactions (index pairs into msgs, from the single-process
    pairing of the same messages) and how the costs were measured."""

    msgs: np.ndarray
    cost_ns: np.ndarray
    pairs: np.ndarray                     # (n, 2) int64: request index, response index
    how: dict = field(default_factory=dict)


def message_costs(traces, bpf: str | None = None, gc_timeout: float = 60.0) -> MessageCosts:
    """One pass over the traces that measures what a consumer spends per message: per packet
    batch, the walk (webtap.dissect.dissect, run again on the batch for the timing, GIL held,
    caches warm) and the pairing table's feed + take (httpanalyzer.pairing.Pairer: the records
    of those messages), timed with time.perf_counter_ns and shared evenly by the batch's HTTP
    messages. The walk of a whole batch is charged to its messages, although a consumer of the
    feeder walks only the first packets it is handed: an upper bound of the walk's part. The
    transactions are the paired records of the same Pairer, mapped to their messages by
    (trace, frame, kind)."""
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    traces = [os.fspath(t) for t in traces]
    msgs_parts, cost_parts, rec_parts, trace_of = [], [], [], []
    walk_ns = pair_ns = 0
    for i, tr in enumerate(traces):
        pairer = Pairer(gc_timeout=gc_timeout)
        for batch, mb in Pipeline([tr], bpf=bpf).batches():
            m = mb.msgs
            if not len(m):
                continue
            t0 = time.perf_counter_ns()
            dissect(batch.packets, batch.data)
            t1 = time.perf_counter_ns()
            pairer.feed(m, batch.data, trace=i)
            rec_parts.append(pairer.take())
            t2 = time.perf_counter_ns()
            walk_ns += t1 - t0
            pair_ns += t2 - t1
            msgs_parts.append(m.copy())
            cost_parts.append(np.full(len(m), (t2 - t0) / len(m)))
            trace_of.append(np.full(len(m), i, np.int64))
        pairer.flush()
        rec_parts.append(pairer.take())
    if not msgs_parts:
        return MessageCosts(np.zeros(0, MESSAGE_DTYPE), np.zeros(0, np.int64),
                            np.zeros((0, 2), np.int64), {"messages": 0})
    msgs = np.concatenate(msgs_parts)
    cost = np.rint(np.concatenate(cost_parts)).astype(np.int64)
    tro = np.concatenate(trace_of)
    pairs = _pairs_of(msgs, tro, rec_parts)
    how = {"messages": len(msgs), "walk_ns": walk_ns, "pair_ns": pair_ns,
           "mean_cost_ns": float(cost.mean()), "batches": len(msgs_parts),
           "method": "per packet batch: (walk + pairing feed/take) / HTTP messages, perf_counter_ns"}
    return MessageCosts(msgs, cost, pairs, how)


def _pairs_of(msgs, trace_of, rec_batches) -> np.ndarray:
    """(request index, response index) of every paired record, by (trace, frame, kind) of the
    message's packet: the first message of that kind in the packet (a pipelined second one in
    the same segment maps to its first)."""
    tab = pa.Table.from_batches([b for b in rec_batches if b.num_rows]) if any(
        b.num_rows for b in rec_batches) else None
    if tab is None:
        return np.zeros((0, 2), np.int64)
    ok = tab.column("matched").to_numpy(zero_copy_only=False).astype(bool)
    rq_tr = tab.column("request_trace").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
    rq_fr = tab.column("request_frame").to_numpy(zero_copy_only=False)[ok].astype(np.int64) - 1
    rs_tr = tab.column("response_trace").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
    rs_fr = tab.column("response_frame").to_numpy(zero_copy_only=False)[ok].astype(np.int64) - 1

    def index_of(kind, tr, fr):
        sel = np.flatnonzero(msgs["kind"] == kind)
        key = trace_of[sel] * (1 << 40) + msgs["pkt_index"][sel].astype(np.int64)
        o = np.argsort(key, kind="stable")
        ks = key[o]
        want = tr * (1 << 40) + fr
        pos = np.searchsorted(ks, want)
        pos = np.minimum(pos, max(len(ks) - 1, 0))
        hit = (ks[pos] == want) if len(ks) else np.zeros(len(want), bool)
        return np.where(hit, sel[o[pos]] if len(ks) else -1, -1)

    a = index_of(MSG_REQUEST, rq_tr, rq_fr)
    b = index_of(MSG_RESPONSE, rs_tr, rs_fr)
    keep = (a >= 0) & (b >= 0)
    return np.stack([a[keep], b[keep]], axis=1)


def _flow_ids(msgs) -> np.ndarray:
    """One id per connection (the symmetric 4-tuple, exact: no hash collisions)."""
    n = len(msgs)
    k = np.zeros(n, [("a", "u1", (16,)), ("b", "u1", (16,)), ("pa", "<u2"), ("pb", "<u2")])
    src = np.concatenate([msgs["src_ip"], msgs["src_port"].astype(np.uint16).view(np.uint8)
                          .reshape(-1, 2)[:, ::-1]], axis=1)
    dst = np.concatenate([msgs["dst_ip"], msgs["dst_port"].astype(np.uint16).view(np.uint8)
                          .reshape(-1, 2)[:, ::-1]], axis=1)
    # the smaller endpoint (bytes compared lexicographically) first
    first_diff = np.argmax(src != dst, axis=1)
    rows = np.arange(n)
    swap = src[rows, first_diff] > dst[rows, first_diff]
    lo = np.where(swap[:, None], dst, src)
    hi = np.where(swap[:, None], src, dst)
    k["a"], k["b"] = lo[:, :16], hi[:, :16]
    k["pa"], k["pb"] = msgs["src_port"], msgs["dst_port"]
    k["pa"] = np.where(swap, msgs["dst_port"], msgs["src_port"])
    k["pb"] = np.where(swap, msgs["src_port"], msgs["dst_port"])
    _, ids = np.unique(k.view(f"V{k.dtype.itemsize}"), return_inverse=True)
    return ids.reshape(-1).astype(np.int64)


def _arrivals(msgs, speedup: float) -> np.ndarray:
    t = msgs["ts_ns"].astype(np.int64)
    t = t - (t.min() if len(t) else 0)
    t = np.maximum.accumulate(t) if len(t) else t   # the capture's order (a clock step back waits)
    return (t / float(speedup)).astype(np.int64)


def assign(mc: MessageCosts, strategy: str, consumers: int, speedup: float = 1.0):
    """(consumer int32 per message, queue depth at arrival int32, wait ns int64) of one strategy
    over N consumers; arrivals at the capture times divided by `speedup`, each message costing
    its measured cost (FIFO queues, ext/run/lbsim.pyx)."""
    n = int(consumers)
    if n < 1:
        raise ValueError("consumers must be >= 1")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r} ({', '.join(STRATEGIES)})")
    m = mc.msgs
    t = _arrivals(m, speedup)
    if strategy == "jsq":
        return _lb.jsq(t, mc.cost_ns, n)
    if strategy == "jsq_flow":
        return _lb.jsq(t, mc.cost_ns, n, flow=_flow_ids(m))
    h = {"eq1": lambda: hash_eq1(m), "eq3": lambda: hash_eq3(m),
         "hash2": lambda: _lb.flow_hash(m, 2), "hash5": lambda: _lb.flow_hash(m, 5)}[strategy]()
    a = (h % n).astype(np.int32)
    depth, wait = _lb.queues(t, mc.cost_ns, a, n)
    return a, depth, wait


def strategies(mc: MessageCosts, consumers: int, speedup: float = 1.0, which=STRATEGIES) -> dict:
    """strategy -> (assign, depth, wait) for each strategy over N consumers."""
    return {s: assign(mc, s, consumers, speedup) for s in which}


def strategy_table(mc: MessageCosts, runs: dict):
    """Per strategy and consumer: messages and their share (%), transactions kept whole (request
    and response at that consumer) and their share, the queue's largest depth and its mean and
    99th-percentile wait (µs); and per strategy `lost`: transactions whose request and response
    went to different consumers (no consumer can pair them: Eq. 3's point)."""
    rows = []
    req, resp = mc.pairs[:, 0], mc.pairs[:, 1]
    for s, (a, depth, wait) in runs.items():
        n = int(a.max()) + 1 if len(a) else 1
        n = max(n, max((int(x.max()) + 1 for x, _, _ in runs.values() if len(x)), default=1))
        whole = a[req] == a[resp]
        lost = int((~whole).sum())
        for c in range(n):
            on = a == c
            w = wait[on] / 1e3
            rows.append({"strategy": s, "consumer": c, "messages": int(on.sum()),
                         "transactions": int((whole & (a[req] == c)).sum()),
                         "lost": lost,
                         "max_depth": int(depth[on].max()) if on.any() else 0,
                         "mean_wait_us": float(w.mean()) if on.any() else 0.0,
                         "p99_wait_us": float(np.percentile(w, 99)) if on.any() else 0.0})
    df = pd.DataFrame(rows).set_index(["strategy", "consumer"])
    tot = df.groupby(level=0)["messages"].transform("sum")
    df["messages_pct"] = 100.0 * df["messages"] / tot.where(tot > 0, 1)
    tt = df.groupby(level=0)["transactions"].transform("sum")
    df["transactions_pct"] = 100.0 * df["transactions"] / tt.where(tt > 0, 1)
    df.attrs["transactions"] = len(mc.pairs)
    return df


def depth_over_time(mc: MessageCosts, run, bins: int = 100, speedup: float = 1.0):
    """The largest queue depth per consumer in each of `bins` equal time bins (a DataFrame:
    bin start in s from the first message, one column per consumer)."""
    a, depth, _ = run
    t = _arrivals(mc.msgs, speedup)
    n = int(a.max()) + 1 if len(a) else 1
    span = max(int(t.max()) if len(t) else 1, 1)
    b = np.minimum((t * bins) // (span + 1), bins - 1)
    out = np.zeros((bins, n), np.int64)
    np.maximum.at(out, (b, a), depth)
    return pd.DataFrame(out, index=pd.Index(np.arange(bins) * (span + 1) / bins / 1e9, name="t_s"),
                        columns=[f"consumer {c}" for c in range(n)])
