"""Offline mode: ``scan(traces, blacklist)`` -> the GETs of the traces with hit, entry, category.

    >>> res = scan("trace.pcap.gz", "blacklist.db", forged_out="forged.pcap")   # doctest: +SKIP
    >>> res.table.to_pandas()          # one row per GET that reached the matcher
    >>> res.counters                   # GETs skipped by reason, hits, misses, forged frames

The pass is webtap.pipeline.Pipeline with a UrlAnalyzer (and any other consumers, e.g. the HTTP
analyzer, given in `also`): the trace is read once.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from urlfilter.analyzer import Blacklist, UrlAnalyzer, load_blacklist
from webtap.capture import Batch, write_pcap
from webtap.records.message import PACKET_DTYPE
from webtap.pipeline import Pipeline
from webtap.stream import Totals
from webtap.parquetsink import with_pandas_metadata

__all__ = ["scan", "ScanResult", "ForgedPcapWriter", "write_records"]


class ForgedPcapWriter:
    """Collects forged frames (UrlAnalyzer.on_forged) and writes them as one nanosecond pcap,
    sorted by the time they would have left the filter (request time + match + forge time).
    One pcap holds one link type: frames of another link type than the first are counted in
    `dropped_linktype` and not written."""

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.written = 0
        self.dropped_linktype = 0

    def __call__(self, frames, offsets, ts_ns, linktypes) -> None:
        self.parts.append((frames.copy(), offsets.copy(), ts_ns.copy(), linktypes.copy()))

    def close(self) -> int:
        frames_l, lens_l, ts_l, lt_l = [], [], [], []
        for fr, of, ts, lt in self.parts:
            frames_l.append(fr)
            lens_l.append(np.diff(of))
            ts_l.append(ts)
            lt_l.append(lt)
        frames = np.concatenate(frames_l) if frames_l else np.zeros(0, np.uint8)
        lens = np.concatenate(lens_l) if lens_l else np.zeros(0, np.int64)
        ts = np.concatenate(ts_l) if ts_l else np.zeros(0, np.int64)
        lts = np.concatenate(lt_l) if lt_l else np.zeros(0, np.uint16)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if len(lens) else lens
        linktype = int(lts[0]) if len(lts) else 1
        keep = np.flatnonzero(lts == linktype)
        self.dropped_linktype = len(lts) - len(keep)
        order = keep[np.argsort(ts[keep], kind="stable")]
        # the core's pcap writer (nanosecond pcap, NumPy gathers): one batch of the frames in
        # the order they would have left the filter, described where they lie in `frames`
        pk = np.zeros(len(order), dtype=PACKET_DTYPE)
        pk["ts_ns"], pk["offset"] = ts[order], starts[order]
        pk["caplen"] = pk["wirelen"] = lens[order]
        pk["linktype"] = linktype
        n = write_pcap(self.path, [Batch(pk, frames, "forged")], linktype)
        self.written = n
        return n


@dataclass
class ScanResult:
    table: pa.Table
    counters: dict[str, int]
    totals: object = None                  # webtap.stream.Totals of the pass
    forged_written: int = 0
    analyzer: UrlAnalyzer | None = field(default=None, repr=False)

    def to_pandas(self):
        return self.table.to_pandas()


def scan(traces, blacklist, *, forged_out=None, verify_checksums: bool = False, bpf: str | None = None,
         also=(), handshakes: bool = False, sni: bool = True,
         progress: bool | None = False) -> ScanResult:
    """Run the URL analyzer over traces (a path or a list, read once as one stream).

    verify_checksums: skip (and count) GETs whose IPv4/TCP checksum is wrong, as a filter on a
    mirror port should. Off by default offline: most traces are captured on an endpoint with
    checksum offload (every GET of zeek/http/1000-requests... has a partial checksum).
    sni: also look up the SNI of every TLS ClientHello and QUIC Initial (issue 18; the records'
    `proto` column says which), forging FIN/RST for TLS hits and a server Initial close for QUIC."""

    bl = blacklist if isinstance(blacklist, Blacklist) else load_blacklist(blacklist)
    writer = ForgedPcapWriter(forged_out) if forged_out else None
    an = UrlAnalyzer(bl, forge=True, verify_checksums=verify_checksums, on_forged=writer,
                     handshakes=handshakes, sni=sni, records_at_end=True)
    # a file that cannot be read (missing, not a capture) is skipped and listed in
    # totals.unreadable; the others are still scanned (docs/ROBUSTNESS.md, exit codes)

    totals = Totals()
    try:
        Pipeline(traces, [an, *also], bpf=bpf, progress=progress, skip_unreadable=True,
                 totals=totals).run()
    except KeyboardInterrupt as exc:
        # Ctrl-C / SIGTERM: the GETs so far ride on the exception (exc.partial), for a caller
        # that keeps what it had (the command line writes them to OUT.partial.EXT)
        exc.partial = ScanResult(an.table(), dict(an.counters), totals, 0, an)
        exc.forged = writer                # its frames so far (ForgedPcapWriter.close)
        raise
    n = writer.close() if writer else 0
    return ScanResult(an.table(), dict(an.counters), totals, n, an)


def write_records(table: pa.Table, path: str | os.PathLike) -> None:
    """CSV or Parquet by the file's suffix."""
    p = str(path)
    if p.endswith(".parquet"):
        pq.write_table(table.replace_schema_metadata(with_pandas_metadata(table.schema).metadata), p)
    else:
        pcsv.write_csv(table, p)
