"""Thin facade over the Cython pairing table (ext/pair/pairing.pyx): message batches in, Arrow record
batches out. The rules (which response pairs with which request, GC, caps) are documented in the
extension's docstring and in docs/PAIRING.md."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:                   # annotations only
    import pyarrow as pa

import time

import numpy as np

from webtap import records as kinds
from webtap._ext.pairing import COUNTER_NAMES, PairingTable

__all__ = ["Pairer", "COUNTER_NAMES"]

# the HTTP record kind (webtap.records.http, pyarrow) is named through the record-kind table:
# loaded on the first take() (or with headers), after the first packets

#: the stream takes records out when this many wait, or when some waited TAKE_EVERY_S (so live
#: runs stream): building an Arrow batch costs ~1 ms whatever its size, per capture batch that
#: was a quarter of the benchmark's pairing-and-records time
TAKE_RECORDS = 16384
TAKE_EVERY_S = 0.25


class Pairer:
    """Pairs HTTP messages (webtap.records.message.MESSAGE_DTYPE batches) into transaction records.

    gc_timeout: seconds of capture time a message may wait for its counterpart (default 60).
    max_pending: hard cap on waiting messages; the oldest is evicted (and counted) beyond it.
    max_per_key: cap on same-kind messages waiting on one key (pipelining/retransmission floods).
    headers: header field names whose values (from each message's first packet) become the
    columns request_<name> / response_<name> (records.schema_for); found in C by the table.
    """

    def __init__(self, gc_timeout: float = 60.0, max_pending: int = 1 << 20, max_per_key: int = 64,
                 initial_cells: int = 1 << 12, arena_max_bytes: int = 512 << 20, headers=()):
        if not gc_timeout > 0:
            raise ValueError("gc_timeout must be > 0 seconds")
        self.headers = tuple(headers or ())
        if self.headers:
            kinds.http.header_column_names(self.headers)   # ValueError for a bad list
        self.table = PairingTable(gc_timeout_ns=int(round(gc_timeout * 1e9)), max_pending=max_pending,
                                  max_per_key=max_per_key, initial_cells=initial_cells,
                                  arena_max_bytes=arena_max_bytes, headers=self.headers)
        self._empty = None              # made on the first empty take()
        self._last_take = time.monotonic()

    def due(self) -> bool:
        """Whether take() is worth calling now: TAKE_RECORDS records wait, or some have waited
        TAKE_EVERY_S."""
        w = self.table.records_waiting
        return w >= TAKE_RECORDS or (w > 0 and time.monotonic() - self._last_take >= TAKE_EVERY_S)

    def feed(self, msgs: np.ndarray, data: np.ndarray, trace: int = 0) -> None:
        """Offer one message batch; `data` is the byte buffer its spans point into; `trace` is
        the position of its trace among the inputs (recorded as request/response_trace)."""
        self.table.trace = trace
        self.table.feed(msgs, data)

    def advance(self, now_ns: int) -> None:
        """Advance capture time without a message (runs the GC)."""
        self.table.advance(now_ns)

    def flush(self) -> None:
        """End of input: all waiting messages leave as unmatched records."""
        self.table.flush()

    def take(self) -> pa.RecordBatch:
        """The records emitted since the last take(), as one Arrow batch (possibly empty)."""
        self._last_take = time.monotonic()
        if not self.table.records_waiting:
            if self._empty is None:
                self._empty = kinds.http.empty_batch(self.headers or None)
            return self._empty
        recs, strings = self.table.take()
        return kinds.http.to_record_batch(recs, strings, self.headers)

    @property
    def pending(self) -> int:
        return self.table.pending

    def counters(self) -> dict[str, int]:
        return self.table.counters()
