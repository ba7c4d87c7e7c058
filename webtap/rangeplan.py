"""A capture file cut into byte ranges that are planned in parallel, each by whoever reads it.

The sequential plan (webtap.capture.plan_chunks) walks every record header of a file in one
process before a chunk can be read elsewhere. Here the file is cut into byte ranges
(:func:`ranges`: from the file's size and the number of workers); for each range a worker
(:func:`survey`, opening the file itself by path) finds where the record chain enters the range
and walks it to the end of the last record that starts in it (ext/read/rangescan.pyx: the find and
the walk are C loops over a read-only memory map, the GIL released). What comes back is small:
the chain's start and end, how many records advance the packet index, and for pcapng the
section and interface blocks passed.

:func:`check` then takes the surveys in file order, on the client: a range is accepted when it
starts exactly where the previous range's walk ended (in the same byte order); otherwise that
range alone is surveyed again from the true start (``resurvey``), so the chain is the file's
whatever the guesses were (a payload holding a fake record header, a range inside one long
record). The reader state at each accepted start (byte order, interfaces, packet index: the
state ``FileReader.export_state`` gives) is rebuilt from the blocks listed, by the reader's own
parser. Each range becomes a chunk ``webtap.capture.ChunkStart(start, state, -1, False, end)``
that ``read_chunk`` reads as if the file ended at ``end``: the chunks' packets, indices and
counters are those of one reader over the whole file.

What cannot be planned apart (then the caller plans that file sequentially, :class:`Irregular`):
a record the reader would resynchronise on (a corrupt header), a pcapng block the reader counts
as bad, a Simple Packet Block (its time is the previous packet's). A gzip'd file is one chunk.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

from webtap._ext import rangescan
from webtap._ext import source as _source
from webtap.capture import Batch, ChunkStart, read_chunk
from webtap.errors import NotACapture, WebtapError
from webtap.records.message import PACKET_DTYPE

__all__ = ["ranges", "survey", "check", "Survey", "Irregular", "head", "FileRange", "MIN_SPLIT",
           "MAX_RANGE", "FMT_PCAP", "FMT_PCAPNG"]

FMT_PCAP = 1
FMT_PCAPNG = 2
_GZIP_MAGIC = b"\x1f\x8b"
_PCAP_MAGICS = {0xA1B2C3D4: (0, False), 0xD4C3B2A1: (1, False), 0xA1B23C4D: (0, True),
                0x4D3CB2A1: (1, True)}          # (byte order swapped, nanosecond timestamps)

#: Without a chosen size, ranges are at most this large (a worker's survey and map of one range
#: then hold a bounded part of the file) ...
MAX_RANGE = 256 << 20
#: ... and a file is split over all workers only when each gets at least this much of it (below,
#: the task and repair overheads outweigh the parallel read).
MIN_SPLIT = 16 << 20


class Irregular(WebtapError, ValueError):
    """A range of the file cannot be read apart from what precedes it (module docstring)."""


def ranges(size: int, workers: int, chunk_bytes: int | None = None) -> list[tuple[int, int]]:
    """Byte ranges [lo, hi) covering a file of `size` bytes. chunk_bytes: ranges of that size
    starting at its multiples (the last shorter). None: from the size and the number of workers -- one range per worker
    (more, a multiple of the workers, when ranges would exceed MAX_RANGE), a single range when
    the file is smaller than MIN_SPLIT per worker."""
    if size <= 0:
        return [(0, max(size, 0))]
    if chunk_bytes is not None:
        if chunk_bytes <= 0:
            raise ValueError("chunk_bytes must be positive")
        return [(lo, min(lo + chunk_bytes, size)) for lo in range(0, size, chunk_bytes)]
    else:
        w = max(1, int(workers))
        n = -(-size // MAX_RANGE)
        if size >= w * MIN_SPLIT:
            n = -(-max(n, w) // w) * w
    edges = [size * i // n for i in range(n + 1)]
    return [(edges[i], edges[i + 1]) for i in range(n) if edges[i + 1] > edges[i]]


def head(path: str, bpf: str | None = None) -> tuple[int, bool]:
    """(file size, gzip'd) from the file's first 28 bytes, checked as the reader checks them
    (NotACapture, BpfError, OSError as the reader raises them): what the client reads of a
    file in the parallel plan."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        first = f.read(28)
    if not first:
        raise NotACapture(f"{path}: empty file, not a capture")
    if first[:2] == _GZIP_MAGIC:
        return size, True
    _source.FileReader(np.frombuffer(first, np.uint8), bpf, path, len(first) == size)
    return size, False


@dataclass
class Survey:
    """What a worker found in one range (see survey())."""

    lo: int
    hi: int
    start: int                  # where the chain enters the range; -1: no chain found
    end: int                    # end of the last record that starts before hi (start if none)
    count: int                  # records in [start, end) that get a packet index
    regular: bool               # nothing the reader would treat sequentially (module docstring)
    swap: int                   # pcapng: byte order at start; pcap: the file's
    swap_end: int               # pcapng: byte order at end
    fmt: int
    blocks: list = field(default_factory=list)   # pcapng: SHB/IDB blocks passed (bytes, in order)
    header: bytes = b""         # pcap: the 24-byte file header (every range reads it)
    host: str | None = None     # the worker that surveyed (its map can run there, pages cached)


def _host() -> str | None:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return None


def survey(path: str, lo: int, hi: int, start: int | None = None, swap: int = 0,
           chain: int = 8) -> Survey:
    """The record chain in [lo, hi) of the file at `path` (opened here, by path): found from
    inside the range (start None; the file's first range starts after its header), or from a
    known `start` (and, pcapng, byte order `swap`) when the client re-plans a range."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return Survey(lo, hi, 0, 0, 0, True, 0, 0, FMT_PCAP, host=_host())
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        m.madvise(mmap.MADV_SEQUENTIAL)
        buf = memoryview(m)
        try:
            return _survey(buf, size, lo, hi, start, swap, chain)
        finally:
            buf.release()
    finally:
        m.close()


def _survey(buf, size, lo, hi, start, swap, chain) -> Survey:
    magic = int.from_bytes(buf[:4], "little") if size >= 4 else 0
    host = _host()
    if magic in _PCAP_MAGICS and size >= 24:
        sw, nano = _PCAP_MAGICS[magic]
        header = bytes(buf[:24])
        snaplen = int.from_bytes(header[16:20], "big" if sw else "little")
        if start is None:
            start = 24 if lo == 0 else rangescan.pcap_find(buf, lo, hi, sw, nano, snaplen, chain)
        if start < 0:
            return Survey(lo, hi, -1, -1, 0, True, sw, sw, FMT_PCAP, header=header, host=host)
        end, count, outcome, _, _ = rangescan.pcap_walk(buf, start, hi, sw, snaplen)
        return Survey(lo, hi, start, end, count, outcome == 0, sw, sw, FMT_PCAP, header=header,
                      host=host)
    # pcapng (the client checked the magic: head())
    if start is None:
        if lo == 0:
            start, swap = 0, 0
        else:
            start, swap = rangescan.pcapng_find(buf, lo, hi, chain)
        if start < 0:
            return Survey(lo, hi, -1, -1, 0, True, 0, 0, FMT_PCAPNG, host=host)
    end, count, outcome, swap_end, structure = rangescan.pcapng_walk(buf, start, hi, swap)
    blocks = [bytes(buf[p: p + n]) for p, n in structure]
    return Survey(lo, hi, start, end, count, outcome == 0, swap, swap_end, FMT_PCAPNG, blocks,
                  host=host)


def _state(fmt: int, blocks: list, next_index: int, path: str) -> tuple:
    """The reader's export_state() after the file header (pcap) or the current section's
    header and interface blocks (pcapng), parsed by the reader itself, with this packet index."""
    raw = np.frombuffer(b"".join(blocks), np.uint8)
    r = _source.FileReader(raw, None, path, True)
    pk = np.empty(1, PACKET_DTYPE)
    while not r.eof:
        if r.read_into(pk):
            raise Irregular(f"{path}: a packet among the structure blocks")
    st = list(r.export_state())
    st[5] = int(next_index)
    st[6] = 0           # last timestamp: only a Simple Packet Block reads it (Irregular)
    return tuple(st)


def check(path: str, surveys: Iterable[Survey],
          resurvey: Callable[[int, int, int, int], Survey],
          stats: dict | None = None) -> Iterator[tuple[ChunkStart, str | None]]:
    """Accept the surveys of one file in order (module docstring); re-plan a range whose chain
    does not start where the previous one ended, with resurvey(lo, hi, start, swap). Yields
    (ChunkStart, host) for the first range and each later one holding records; raises
    Irregular when a range cannot be read apart from what precedes it. stats (a dict) counts
    'ranges' and 'resurveyed'."""
    stats = stats if stats is not None else {}
    prev_end = None
    prev_swap = 0
    index = 0
    blocks: list = []
    fmt = None
    for s in surveys:
        stats["ranges"] = stats.get("ranges", 0) + 1
        if prev_end is None:
            if s.lo != 0 or s.start < 0:
                raise Irregular(f"{path}: the first range has no record chain")
            fmt = s.fmt
            blocks = [s.header] if fmt == FMT_PCAP else []
        elif s.start != prev_end or (fmt == FMT_PCAPNG and s.swap != prev_swap):
            stats["resurveyed"] = stats.get("resurveyed", 0) + 1
            if prev_end >= s.hi:
                s = Survey(s.lo, s.hi, prev_end, prev_end, 0, True, prev_swap, prev_swap, fmt)
            else:
                s = resurvey(s.lo, s.hi, prev_end, prev_swap)
        if not s.regular:
            raise Irregular(f"{path}: bytes {s.lo}-{s.hi} hold a record the reader reads "
                            "sequentially")
        first = prev_end is None
        if first or s.end > s.start:
            state = None if first else _state(fmt, blocks, index, path)
            # the first chunk is read from the file's start (its reader reads the header)
            yield ChunkStart(0 if first else s.start, state, -1, False, s.end), s.host
        if fmt == FMT_PCAPNG:
            for b in s.blocks:
                if int.from_bytes(b[:4], "little") == 0x0A0D0D0A:
                    blocks = [b]            # a new section: its own interfaces only
                else:
                    blocks.append(b)
        index += s.count
        prev_end = s.end
        prev_swap = s.swap_end


class FileRange:
    """A source for webtap.pipeline.Pipeline: the packets of one chunk of a file (the file from
    chunk.start, its reader resumed from chunk.state, to chunk.end or chunk.npackets), opened
    by path where it is read. Iterates Batch objects like a Trace; `counters` and `warnings`
    are the chunk's reader's (they add up over the chunks to one reader's over the file)."""

    def __init__(self, path: str, chunk: ChunkStart, bpf: str | None = None):
        self.path = os.fspath(path)
        self.chunk = chunk
        self.bpf = bpf
        self._totals: dict = {"source": {}, "warnings": []}
        self.warnings: list = self._totals["warnings"]

    def __iter__(self):
        for packets, buf in read_chunk(self.path, self.chunk, self.bpf, self._totals):
            yield Batch(packets, buf, self.path)

    @property
    def counters(self) -> dict:
        return dict(self._totals["source"])

    def __enter__(self) -> "FileRange":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def __str__(self) -> str:
        end = "end" if self.chunk.end < 0 else self.chunk.end
        return f"{self.path}[{self.chunk.start}:{end}]"
