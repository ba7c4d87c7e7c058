"""Stand-in trace reader for the dissect tests, until webtap.capture lands on main.

Builds one (PACKET_DTYPE array, uint8 buffer) batch from a pcap / pcapng (gzip'd or not) with
scapy's raw readers, so the dissector sees exactly the bytes tshark sees. Test-only: it creates
Python objects per packet, which the real capture stage never does.
"""
from __future__ import annotations

import numpy as np

from webtap.records.message import PACKET_DTYPE


def batch_from_raw(records: list[tuple[bytes, int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """records: (bytes, linktype, ts_ns, wirelen) per packet -> (packets, data)."""
    pk = np.zeros(len(records), dtype=PACKET_DTYPE)
    data = np.frombuffer(b"".join(r[0] for r in records), dtype=np.uint8) if records else np.zeros(0, np.uint8)
    off = 0
    for i, (raw, lt, ts, wl) in enumerate(records):
        pk[i] = (ts, i, off, len(raw), wl, lt, 0, 0)
        off += len(raw)
    return pk, data


def read_trace(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Every packet of a capture file that scapy can read, as one batch."""
    from scapy.utils import RawPcapNgReader, RawPcapReader

    records = []
    with RawPcapReader(path) as rd:  # the metaclass returns a RawPcapNgReader for pcapng
        ng = isinstance(rd, RawPcapNgReader)
        try:
            for raw, meta in rd:
                if ng:
                    lt = meta.linktype
                    ts = ((meta.tshigh << 32) | meta.tslow) * 10**9 // meta.tsresol
                    wl = meta.wirelen
                else:
                    lt = rd.linktype
                    ts = meta.sec * 10**9 + meta.usec * (1 if getattr(rd, "nano", False) else 1000)
                    wl = meta.wirelen
                ts = max(min(ts, 2**63 - 1), -(2**63))   # absurd pcapng times must not abort the read
                records.append((bytes(raw), lt, ts, wl))
        except Exception:  # a truncated or corrupt tail: keep what was read, as tshark does
            pass
    return batch_from_raw(records)
