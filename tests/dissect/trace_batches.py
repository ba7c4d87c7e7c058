"""Read a whole trace as one (packets, data) batch for the comparison tests.

Uses webtap.capture.open_trace when the capture stage is present, else the scapy stand-in.
"""
from __future__ import annotations

import numpy as np


def read_trace(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        from webtap.capture import open_trace
    except ImportError:
        from tests.dissect._scapy_batches import read_trace as scapy_read

        return scapy_read(path)
    parts, datas, base = [], [], 0
    with open_trace(path, progress=False) as trace:
        for b in trace:
            pk = np.array(b.packets, copy=True)
            pk["offset"] += base
            parts.append(pk)
            datas.append(np.array(b.data, copy=True))
            base += len(b.data)
    from webtap.records.message import PACKET_DTYPE

    if not parts:
        return np.zeros(0, PACKET_DTYPE), np.zeros(0, np.uint8)
    return np.concatenate(parts), np.concatenate(datas)
