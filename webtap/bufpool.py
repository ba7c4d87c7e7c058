"""Buffers reused once nothing refers to them (webtap.capture.ChunkPool: the read chunks;
webtap.dissect.EventBuffers: the walk's TCP events). A reused buffer's pages are mapped and
warm; a new one's are faulted in by the kernel as they are first written."""
from __future__ import annotations

import sys

import numpy as np

__all__ = ["BufferPool"]


class BufferPool:
    """A buffer no one refers to any more (no batch, no view of it) is handed out again, else a
    new one is made (make(), the subclass's); at most `keep` are held. Whoever still holds a
    buffer, or a view of it, keeps it from reuse, so nothing held is ever overwritten."""

    def __init__(self, keep: int):
        self.keep = keep
        self._bufs: list[np.ndarray] = []

    def make(self, size: int) -> np.ndarray:
        raise NotImplementedError

    def get(self, size: int) -> np.ndarray:
        for buf in self._bufs:
            # References: the list, `buf`, getrefcount's argument. More: a batch (or a view of
            # it, such as a reader's current buffer or a batch's events) still has it.
            if len(buf) >= size and sys.getrefcount(buf) <= 3:
                return buf
        buf = self.make(size)
        if len(self._bufs) >= self.keep:
            self._bufs.pop(0)
        self._bufs.append(buf)
        return buf

    def clear(self) -> None:
        self._bufs = []
