"""Capture stage, Python side: open a trace or an interface and iterate packet batches.

A :class:`Batch` is the capture stage's output contract (ext/packet.pxd): ``packets``, a NumPy
array of :data:`webtap.schema.PACKET_DTYPE`, and ``data``, one uint8 array holding the bytes;
packet *i* is ``data[packets['offset'][i] : packets['offset'][i] + packets['caplen'][i]]``.
Both are views without a copy: for offline files ``data`` is the memory-mapped file itself.

>>> with open_trace("http.pcap.gz", bpf="tcp port 80") as trace:   # doctest: +SKIP
...     for batch in trace:
...         print(len(batch), batch.packets["ts_ns"][:3])
...     print(trace.counters)

Gzip-compressed captures (``.pcap.gz``, ``.pcapng.gz``, recognised by their magic bytes, not
their name) are inflated once into an anonymous temporary file, in 1 MiB chunks, and mapped
like any other file, so memory stays bounded whatever their size.
"""
from __future__ import annotations

import gzip
import mmap
import os
import shutil
import sys
import tempfile
import zlib
from typing import Iterator

import numpy as np

from webtap._ext import source as _source
from webtap.errors import BpfError, CaptureError, NotACapture
from webtap.schema import PACKET_DTYPE, SOURCE_REASONS

__all__ = ["Batch", "Trace", "LiveCapture", "open_trace", "open_live", "compile_filter",
           "DEFAULT_BATCH", "BpfError", "CaptureError", "NotACapture"]

#: Packets per batch: large enough that Python's per-batch cost vanishes, small enough that a
#: batch of records fits in cache-friendly memory.
DEFAULT_BATCH = 65536

#: How much of the consumed part of a mapping may stay resident before it is released.
_RELEASE_EVERY = 64 * 1024 * 1024

_GZIP_MAGIC = b"\x1f\x8b"


def compile_filter(expr: str, linktype: int = 1) -> None:
    """Check a BPF expression with libpcap; raises :class:`BpfError` with libpcap's text."""
    _source.compile_filter(expr, linktype)


class Batch:
    """A batch of packets: ``packets`` (PACKET_DTYPE) and ``data`` (uint8), both zero-copy views."""

    __slots__ = ("packets", "data", "source")

    def __init__(self, packets: np.ndarray, data: np.ndarray, source: str):
        self.packets = packets
        self.data = data
        self.source = source

    def __len__(self) -> int:
        return len(self.packets)

    def packet(self, i: int) -> bytes:
        """The captured bytes of packet *i* (a copy; for inspection and tests, not hot loops)."""
        off = int(self.packets["offset"][i])
        return bytes(self.data[off: off + int(self.packets["caplen"][i])])

    def __repr__(self) -> str:
        return f"<Batch {len(self)} packets from {self.source}>"


def _counters_dict(values) -> dict[str, int]:
    return {name: int(v) for name, v in zip(SOURCE_REASONS, values)}


def _progress_bar(total: int, name: str, progress: bool | None):
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    from tqdm import tqdm  # only when a bar is shown

    return tqdm(total=total, unit="B", unit_scale=True, desc=os.path.basename(name), leave=False)


class Trace:
    """An offline capture file (pcap, pcapng, either gzip-compressed), read in batches.

    Iterating yields :class:`Batch` objects. ``counters`` says what was read and skipped and
    why (keys: :data:`webtap.schema.SOURCE_REASONS`); ``warnings`` lists problems in words.
    ``engine="libpcap"`` reads through libpcap's own ``pcap_next_ex`` instead of the memory
    map (a copy per packet; used as an independent reference in the tests).
    """

    def __init__(self, path: str | os.PathLike, bpf: str | None = None,
                 batch_size: int = DEFAULT_BATCH, engine: str = "mmap",
                 progress: bool | None = None):
        self.path = os.fspath(path)
        self.bpf = bpf
        self.batch_size = int(batch_size)
        if self.batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self.engine = engine
        self.warnings: list[str] = []
        self._progress = progress
        self._tmp = None
        self._file = None
        self._map = None
        self._reader = None
        self._handle = None
        if engine == "mmap":
            self._open_mmap()
        elif engine == "libpcap":
            self._handle = _source.PcapHandle.open_offline(self.path)
            if bpf:
                self._handle.set_filter(bpf)
        else:
            raise ValueError(f"unknown engine {engine!r} (use 'mmap' or 'libpcap')")

    # -- opening ------------------------------------------------------------------------------

    def _open_mmap(self) -> None:
        f = open(self.path, "rb")
        try:
            head = f.read(2)
            if head == _GZIP_MAGIC:
                f.seek(0)
                f = self._inflate(f)
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise NotACapture(f"{self.path}: empty file, not a capture")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            if hasattr(mmap, "MADV_SEQUENTIAL"):
                self._map.madvise(mmap.MADV_SEQUENTIAL)
            self._data = np.frombuffer(self._map, dtype=np.uint8)
            self._reader = _source.MmapReader(self._data, self.bpf, self.path)
        except BaseException:
            f.close()
            self._data = None
            if self._map is not None:
                self._map.close()
            raise
        self._file = f

    def _inflate(self, raw):
        """Inflate a gzip file into an unlinked temporary file, 1 MiB at a time.

        zlib is driven directly (not through GzipFile) so that a damaged or cut stream still
        yields every byte inflated before the damage; the problem is reported in `warnings`.
        Concatenated gzip members are inflated one after the other, as gunzip does.
        """
        tmp = tempfile.TemporaryFile(prefix="webtap-", suffix=".pcap")
        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        in_member = False                 # d has been fed bytes of a member not yet ended
        try:
            while chunk := raw.read(1 << 20):
                while chunk:
                    in_member = True
                    tmp.write(d.decompress(chunk))
                    chunk = b""
                    if d.eof:
                        chunk, in_member = d.unused_data, False
                        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
            if in_member:
                tmp.write(d.flush())
                self.warnings.append(f"gzip stream cut short: read up to the {tmp.tell()} "
                                     f"bytes inflated before the end")
        except zlib.error as exc:
            self.warnings.append(f"gzip stream damaged after {tmp.tell()} inflated bytes: {exc}")
        finally:
            raw.close()
        tmp.flush()
        return tmp

    # -- reading ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Batch]:
        if self._reader is not None:
            yield from self._iter_mmap()
        else:
            yield from self._iter_libpcap()

    def _iter_mmap(self) -> Iterator[Batch]:
        reader = self._reader
        bar = _progress_bar(reader.size, self.path, self._progress)
        released = 0
        last_pos = reader.position
        try:
            while True:
                packets = np.empty(self.batch_size, dtype=PACKET_DTYPE)
                n = reader.read_into(packets)
                if bar is not None:
                    bar.update(reader.position - last_pos)
                last_pos = reader.position
                if n == 0 and reader.eof:
                    break
                if n:
                    yield Batch(packets[:n], self._data, self.path)
                # Let the kernel drop the pages already consumed: their bytes stay valid (they
                # are read back from the file if touched again), and RSS stays bounded.
                start = int(packets["offset"][0]) if n else reader.position
                start -= start % mmap.PAGESIZE
                if hasattr(mmap, "MADV_DONTNEED") and start - released >= _RELEASE_EVERY:
                    self._map.madvise(mmap.MADV_DONTNEED, released, start - released)
                    released = start
        finally:
            if bar is not None:
                bar.close()
        self._note_counters()

    def _iter_libpcap(self) -> Iterator[Batch]:
        h = self._handle
        while not h.eof:
            packets = np.empty(self.batch_size, dtype=PACKET_DTYPE)
            data = np.empty(max(self.batch_size * 2048, 4 * 262144), dtype=np.uint8)
            n = h.read_into(packets, data)
            if n:
                yield Batch(packets[:n], data, self.path)
        if h.error:
            self.warnings.append(f"libpcap stopped reading: {h.error}")

    def _note_counters(self) -> None:
        c = self.counters
        if c["truncated"]:
            self.warnings.append("the file ends in the middle of a packet record (capture cut short)")
        if c["bad_record"]:
            self.warnings.append(f"{c['bad_record']} corrupt record/block header(s): "
                                 f"{c['skipped_bytes']} bytes skipped to resynchronise")
        if c["bad_interface"]:
            self.warnings.append(f"{c['bad_interface']} packet(s) named an undefined interface")
        if c["unknown_blocks"]:
            self.warnings.append(f"{c['unknown_blocks']} pcapng block(s) of unknown type skipped")

    # -- state --------------------------------------------------------------------------------

    @property
    def counters(self) -> dict[str, int]:
        src = self._reader if self._reader is not None else self._handle
        return _counters_dict(src.counters)

    @property
    def format(self) -> str:
        if self._reader is None:
            return "libpcap"
        return {1: "pcap", 2: "pcapng"}[self._reader.format]

    @property
    def interfaces(self) -> list[tuple[int, int]]:
        """(linktype, snaplen) of each interface (pcapng: of the current section)."""
        if self._reader is not None:
            return self._reader.interfaces
        return [(self._handle.linktype, self._handle.snaplen)]

    def close(self) -> None:
        self._reader = None
        self._handle = None
        self._data = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                # Batches handed out still view the mapping; it is unmapped when they go.
                pass
            self._map = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Trace {self.path!r} {self.format}>"


def open_trace(path: str | os.PathLike, bpf: str | None = None, batch_size: int = DEFAULT_BATCH,
               engine: str = "mmap", progress: bool | None = None) -> Trace:
    """Open a pcap/pcapng file (optionally gzip-compressed) for reading in batches.

    Raises :class:`NotACapture` (a one-line message naming the file) for anything that is not a
    capture, :class:`BpfError` for a filter libpcap rejects, ``OSError`` if it cannot be opened.
    """
    return Trace(path, bpf=bpf, batch_size=batch_size, engine=engine, progress=progress)


class LiveCapture:
    """Live capture on an interface through libpcap, in batches.

    Each batch owns its byte buffer. Iteration returns at least every ``timeout_ms`` (possibly
    with an empty batch skipped) so that Ctrl-C is handled promptly; call :meth:`stop` from
    another thread or a signal handler to end it, or stop iterating.
    """

    def __init__(self, iface: str, bpf: str | None = None, snaplen: int = 262144,
                 promisc: bool = True, timeout_ms: int = 100, batch_size: int = 4096,
                 buffer_size: int = 32 * 1024 * 1024, immediate: bool = False):
        self.iface = iface
        self.batch_size = batch_size
        self._h = _source.PcapHandle.open_live(iface, snaplen, promisc, timeout_ms, buffer_size,
                                               immediate)
        if bpf:
            self._h.set_filter(bpf)
        self._stopped = False

    @property
    def linktype(self) -> int:
        return self._h.linktype

    def __iter__(self) -> Iterator[Batch]:
        h = self._h
        while not self._stopped and not h.eof:
            packets = np.empty(self.batch_size, dtype=PACKET_DTYPE)
            data = np.empty(self.batch_size * 2048 + 262144, dtype=np.uint8)
            n = h.read_into(packets, data)
            if n:
                yield Batch(packets[:n], data, self.iface)
        if h.error:
            raise CaptureError(f"{self.iface}: {h.error}")

    def stop(self) -> None:
        self._stopped = True
        self._h.breakloop()

    def inject(self, frame: bytes) -> int:
        """Send one link-layer frame with ``pcap_inject``."""
        return self._h.inject(frame)

    def stats(self) -> dict[str, int]:
        """libpcap's received / dropped counts."""
        return self._h.stats()

    @property
    def counters(self) -> dict[str, int]:
        return _counters_dict(self._h.counters)

    def close(self) -> None:
        self._h = None

    def __enter__(self) -> "LiveCapture":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_live(iface: str, bpf: str | None = None, **kw) -> LiveCapture:
    """Open an interface for live capture (needs root or CAP_NET_RAW)."""
    return LiveCapture(iface, bpf=bpf, **kw)

