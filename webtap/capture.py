"""Capture stage, Python side: open a trace or an interface and iterate packet batches.

A :class:`Batch` is the capture stage's output contract (ext/read/packet.pxd): ``packets``, a NumPy
array of :data:`webtap.records.message.PACKET_DTYPE`, and ``data``, one uint8 array holding the bytes;
packet *i* is ``data[packets['offset'][i] : packets['offset'][i] + packets['caplen'][i]]``.
Both are views without a copy: for offline files ``data`` is one chunk of the file (4 MiB by
default, filled with a single read), and the packets are described where they lie in it.

>>> with open_trace("http.pcap.gz", bpf="tcp port 80") as trace:   # doctest: +SKIP
...     for batch in trace:
...         print(len(batch), batch.packets["ts_ns"][:3])
...     print(trace.counters)

Gzip-compressed captures (``.pcap.gz``, ``.pcapng.gz``, recognised by their magic bytes, not
their name) are inflated straight into the same chunks, so memory stays bounded whatever the
size of the file. Chunk buffers are reused once no batch refers to them any more.

A pipe, a FIFO or a terminal (``tcpdump -w - | httpanalyzer -``) streams: a chunk takes what the
writer has sent so far and is handed over at once (it waits only for the first bytes), so
packets are processed as they arrive, never after a full chunk; while the writer sends faster
than the reader reads, chunks still fill up to their size. A regular file is read in whole
chunks.
"""
from __future__ import annotations

import mmap
import os
import select
import stat
import sys
import zlib
from typing import Callable, Iterator, NamedTuple

import numpy as np

from webtap._ext import mapped as _mapped
from webtap._ext import source as _source
from webtap.bufpool import BufferPool
from webtap.errors import BpfError, CaptureError, NotACapture
from webtap.records.message import PACKET_DTYPE, SOURCE_REASONS

__all__ = ["Batch", "Trace", "LiveCapture", "open_trace", "open_live", "compile_filter",
           "DEFAULT_BATCH", "DEFAULT_CHUNK", "DEFAULT_MAP_WINDOW", "BpfError", "CaptureError", "NotACapture",
           "ChunkStart", "plan_chunks", "read_chunk", "open_at", "write_pcap", "counter_warnings",
           "progress_bar"]

#: Packets per batch: large enough that Python's per-batch cost vanishes (~100 batches for a
#: million packets), small enough that the packet headers a batch touches are still in the
#: CPU cache when the dissector reads them right after the reader.
DEFAULT_BATCH = 8192

#: Bytes of the file read (or inflated) at once into one reused buffer. Small enough that what
#: read() just copied is still in the CPU cache when the reader and the dissector walk it: on
#: bench-4 (383 MB, page cache) 4 MiB chunks analyse in 0.077 s, 8 MiB in 0.091 s, 16 MiB in
#: 0.115 s (same process, best of 6). The floor is 2 MiB: two records of the largest size.
DEFAULT_CHUNK = 4 * 1024 * 1024

#: Bytes of a regular, uncompressed file mapped at once (webtap._ext.mapped): the reader and
#: the walk read the page cache's own pages, without the copy of read() (on the 16-round HTTP
#: bench trace that copy was a fifth of the run's CPU time, on the reading thread). A window is
#: unmapped when the last batch over it goes, so the batches in flight bound what is mapped
#: (4 MiB, as the read chunks: a window in flight is resident whole, and the peak RSS must not
#: depend on the trace; 16 MiB windows were no faster on the bench trace and held 40 MiB more).
DEFAULT_MAP_WINDOW = 4 * 1024 * 1024

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


def progress_bar(total: int, desc: str, unit: str = "B", leave: bool = False):
    """A progress bar on stderr (tqdm: update(n), close()), or None when tqdm is not installed.

    tqdm is the optional extra webtap[progress] (pyproject.toml), not a required dependency: it
    only draws a bar on a terminal, and importing it costs ~20-40 ms, which a command pays only
    when it draws one (stderr a terminal, or progress=True). A run without it reads the same
    records, with no bar. Imported here, in a try whose except names the missing extra, for that
    reason (tests/contracts/test_imports_at_top.py: an optional dependency)."""
    try:
        from tqdm import tqdm
    except ImportError:                # no webtap[progress]: no bar
        return None
    return tqdm(total=total, unit=unit, unit_scale=unit == "B", desc=desc, leave=leave,
                file=sys.stderr)


def _progress_bar(total: int, name: str, progress: bool | None):
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    return progress_bar(total, os.path.basename(name))


def _anonymous_buffer(size: int) -> np.ndarray:
    """A uint8 array over fresh anonymous memory, backed by transparent huge pages where the
    kernel allows it (madvise mode): the reader and the dissector walk megabytes of it per
    batch, and 2 MiB pages spare them most TLB misses."""
    m = mmap.mmap(-1, size)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    return np.frombuffer(m, dtype=np.uint8)


def window_of(data: np.ndarray) -> "_mapped.Window | None":
    """The mapped window (webtap._ext.mapped) a batch's bytes are, or None (a chunk read into
    memory, a live capture's buffer)."""
    base = getattr(data, "base", None)
    base = getattr(base, "obj", base)             # np.frombuffer keeps a memoryview of it
    return base if isinstance(base, _mapped.Window) else None


def counter_warnings(c: dict[str, int]) -> list[str]:
    """The problems a reader's counters (SOURCE_REASONS) stand for, in words: what a Trace adds
    to its warnings at the end of a file (also for counters summed over a file's chunks)."""
    out = []
    if c.get("truncated"):
        out.append(f"the file ends in the middle of a packet record after "
                   f"{c.get('packets', 0)} packets (capture cut short)")
    if c.get("bad_record"):
        out.append(f"{c['bad_record']} corrupt record/block header(s): "
                   f"{c.get('skipped_bytes', 0)} bytes skipped to resynchronise")
    if c.get("bad_interface"):
        out.append(f"{c['bad_interface']} packet(s) named an undefined interface")
    if c.get("unknown_blocks"):
        out.append(f"{c['unknown_blocks']} pcapng block(s) of unknown type skipped")
    return out


class ChunkPool(BufferPool):
    """Chunk buffers for a chunked reader (webtap.bufpool.BufferPool): fresh anonymous memory
    (_anonymous_buffer), at most `keep` held."""

    def __init__(self, keep: int = 4):
        super().__init__(keep)

    def make(self, size: int) -> np.ndarray:
        return _anonymous_buffer(size)


def _readable_now(fd: int) -> bool:
    """Whether a read of fd would return at once (data or end of file waits in the pipe)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def fill(stream, buf: np.ndarray, start: int, fd: int | None = None,
         at_least: int = 1) -> tuple[int, bool]:
    """Fill buf[start:] from a file-like stream; returns (bytes now in buf, whether it ended).
    fd: the stream is a pipe (a FIFO, stdin) on this descriptor: take what is available --
    wait for at least `at_least` new bytes (or the end), then stop as soon as the pipe has
    nothing more to give right now, instead of waiting for a full buffer."""
    view = memoryview(buf)
    pos = start
    while pos < len(buf):
        if fd is not None and pos - start >= at_least and not _readable_now(fd) \
                and not getattr(stream, "buffered", lambda: 0)():
            return pos, False
        got = stream.readinto1(view[pos:]) if fd is not None else stream.readinto(view[pos:])
        if not got:
            return pos, True
        pos += got
    return pos, False


def carry_over(reader, buf: np.ndarray, chunk_size: int, pool: ChunkPool, stream,
               fd: int | None = None) -> np.ndarray:
    """The reader's chunk ends inside a record (reader.need_more): its unread tail starts the
    next chunk, grown when one record or block is larger than half of it; the rest is read from
    `stream` and handed to the reader. Returns the new chunk buffer."""
    tail = buf[reader.position: reader.size]
    size = chunk_size
    while len(tail) > size // 2:
        size *= 2
    nxt = pool.get(size)
    nxt[: len(tail)] = tail
    filled, final = fill(stream, nxt, len(tail), fd)
    reader.set_buffer(nxt[:filled], 0, final)
    return nxt


class _PipeStream:
    """A pipe, FIFO or terminal read one read(2) at a time: BufferedReader.readinto1 copies
    what it buffered and then reads again, which on a pipe waits for the writer. Takes over an
    open BufferedReader after its peek (the bytes it buffered are handed out first)."""

    def __init__(self, f):
        self.pre = f.read1(len(f.peek(1)))     # what peek() buffered; no new read
        self.fd = f.fileno()

    def buffered(self) -> int:
        return len(self.pre)

    def readinto1(self, view) -> int:
        if self.pre:
            n = min(len(view), len(self.pre))
            view[:n] = self.pre[:n]
            self.pre = self.pre[n:]
            return n
        return os.readv(self.fd, [view])

    readinto = readinto1

    def read1(self, n: int) -> bytes:
        if self.pre:
            out, self.pre = self.pre[:n], self.pre[n:]
            return out
        return os.read(self.fd, n)

    def read(self, n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            b = self.read1(n - got)
            if not b:
                break
            parts.append(b)
            got += len(b)
        return b"".join(parts)


class _GzipStream:
    """readinto() over a gzip file that keeps every byte inflated before damage or a cut.

    zlib is driven directly (not through GzipFile, which discards a partly inflated read when
    the stream turns out damaged); concatenated members are inflated in turn, as gunzip does.
    Problems are appended to `warnings`.
    """

    def __init__(self, raw, warnings: list[str]):
        self.raw = raw
        self.warnings = warnings
        self.d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        self.pending = b""           # compressed input not yet given to zlib
        self.in_member = False
        self.done = False
        self.out = 0
        self.salvaged = b""           # inflated before a damaged spot, not yet handed out

    def buffered(self) -> int:
        """Bytes this stream can hand out without reading its input again."""
        return len(self.pending) + len(self.salvaged)

    def readinto1(self, view) -> int:
        """As readinto, but at most one read of the input (a pipe: what is available)."""
        return self.readinto(view, one=True)

    def readinto(self, view, one: bool = False) -> int:
        want, got = len(view), 0
        if self.salvaged:
            got = min(want, len(self.salvaged))
            view[:got] = self.salvaged[:got]
            self.salvaged = self.salvaged[got:]
            self.out += got
        while got < want and not self.done:
            if not self.pending:
                if one and got:
                    break                  # a pipe: hand out what came, read again later
                self.pending = self.raw.read1(1 << 20) if one else self.raw.read(1 << 20)
                if not self.pending:
                    if self.in_member:
                        self.warnings.append(f"gzip stream cut short: read up to the {self.out} "
                                             f"bytes inflated before the end")
                    self.done = True
                    break
            before = self.d.copy()
            try:
                data = self.d.decompress(self.pending, want - got)
            except zlib.error as exc:
                # zlib gives nothing of a call that fails: inflate the same input again from
                # the state before it, in small steps, to keep what precedes the damage.
                self.salvaged = self._salvage(before, self.pending)
                self.done = True
                self.warnings.append(f"gzip stream damaged after {self.out + len(self.salvaged)} "
                                     f"inflated bytes: {exc}")
                n = min(want - got, len(self.salvaged))
                view[got: got + n] = self.salvaged[:n]
                self.salvaged = self.salvaged[n:]
                got += n
                self.out += n
                break
            self.in_member = True
            self.pending = self.d.unconsumed_tail
            view[got: got + len(data)] = data
            got += len(data)
            self.out += len(data)
            if self.d.eof:
                self.pending = self.d.unused_data
                self.d = zlib.decompressobj(zlib.MAX_WBITS | 16)
                self.in_member = False
        return got

    @staticmethod
    def _salvage(d, data: bytes, step: int = 512) -> bytes:
        out = []
        for i in range(0, len(data), step):
            try:
                out.append(d.decompress(data[i: i + step]))
            except zlib.error:
                break
        return b"".join(out)


class Trace:
    """An offline capture file (pcap, pcapng, either gzip-compressed), read in batches.

    Iterating yields :class:`Batch` objects. ``counters`` says what was read and skipped and
    why (keys: :data:`webtap.records.message.SOURCE_REASONS`); ``warnings`` lists problems in words.
    ``engine="libpcap"`` reads through libpcap's own ``pcap_next_ex`` instead (a copy and a
    call per packet; used as an independent reference in the tests).

    A regular, uncompressed file is read through mapped windows of ``map_window`` bytes (0:
    read() into chunks, as gzip, pipes and FIFOs always are; also where the system refuses a
    mapping). A file that shrinks while it is read raises :class:`CaptureError` (read() would
    see an earlier end; a mapping would see zeros, or end the process with SIGBUS).
    """

    def __init__(self, path: str | os.PathLike, bpf: str | None = None,
                 batch_size: int = DEFAULT_BATCH, engine: str = "native",
                 progress: bool | None = None, chunk_size: int = DEFAULT_CHUNK,
                 map_window: int | None = None):
        self.path = os.fspath(path)
        self.bpf = bpf
        self.batch_size = int(batch_size)
        if self.batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self.engine = engine
        self.warnings: list[str] = []
        self._progress = progress
        self.chunk_size = int(chunk_size)
        if self.chunk_size < 2 * 1024 * 1024:
            raise ValueError("chunk_size must be at least 2 MiB (two maximum-size records)")
        self._file = None
        self._reader = None
        self._handle = None
        self._pool: ChunkPool | None = None
        self.map_window = int(DEFAULT_MAP_WINDOW if map_window is None else map_window)
        self._map: _mapped.MapFile | None = None     # the file's mapped windows (native engine)
        self._map_start = 0                           # file offset of the current window
        self._windows: list[np.ndarray] = []          # windows mapped (unmapped once unused)
        if engine == "native":
            self._open_native()
        elif engine == "libpcap":
            self._handle = _source.PcapHandle.open_offline(self.path)
            if bpf:
                self._handle.set_filter(bpf)
        else:
            raise ValueError(f"unknown engine {engine!r} (use 'native' or 'libpcap')")

    # -- opening ------------------------------------------------------------------------------

    def _open_native(self) -> None:
        f = open(self.path, "rb")
        try:
            head = f.peek(2)[:2]           # peek, not read+seek: pipes and FIFOs work too
            st = os.fstat(f.fileno())
            self._size = st.st_size
            # a pipe, FIFO or terminal streams (module docstring): chunks of what is available
            self._fd = None if stat.S_ISREG(st.st_mode) else f.fileno()
            raw = f if self._fd is None else _PipeStream(f)
            self.gzip = head == _GZIP_MAGIC
            self._stream = _GzipStream(raw, self.warnings) if self.gzip else raw
            if self._fd is None and not self.gzip and self.map_window > 0 and self._open_mapped(f):
                self._file = f
                return
            self._pool = ChunkPool()
            buf = self._pool.get(self.chunk_size)
            # (at least a pcapng section header's fixed part, so the format can be told)
            filled, final = fill(self._stream, buf, 0, self._fd, at_least=28)
            if filled == 0:
                raise NotACapture(f"{self.path}: empty file, not a capture")
            self._reader = _source.FileReader(buf[:filled], self.bpf, self.path, final)
            self._chunk = buf
        except BaseException:
            f.close()
            raise
        self._file = f

    def _open_mapped(self, f) -> bool:
        """Read the file through mapped windows; False where the system refuses a mapping."""
        if self._size == 0:
            raise NotACapture(f"{self.path}: empty file, not a capture")
        try:
            self._map = _mapped.MapFile(f.fileno())
            buf, final = self._window(0, 0)
        except OSError:
            self._map = None
            return False
        self._reader = _source.FileReader(buf, self.bpf, self.path, final)
        self._chunk = buf
        return True

    def _window(self, start: int, least: int) -> tuple[np.ndarray, bool]:
        """(the file's bytes from `start` mapped, whether they reach its end as it is now):
        map_window bytes or `least`, whichever is more, never past the end."""
        size = self._map.size()
        ln = max(self.map_window, least)
        if start + ln >= size:
            ln = size - start
        if ln <= 0:
            self._check_mapped()
            raise CaptureError(f"{self.path}: the file shrank to {size} bytes while it was read")
        w = self._map.window(start, ln)
        self._map_start = start
        buf = np.frombuffer(w, dtype=np.uint8)
        # Windows are unmapped here, in the reading thread, not wherever the last batch over
        # one is dropped (the stages' thread: munmap was 5 % of its CPU time): the list holds
        # each window until no batch refers to it any more.
        keep = []
        for a in self._windows:
            # references: the list, `a`, getrefcount's argument; more: a batch still has it
            if sys.getrefcount(a) > 3:
                keep.append(a)
        self._windows = keep
        self._windows.append(buf)
        return buf, start + ln >= size

    def _check_mapped(self) -> None:
        why = self._map.shrunk() if self._map is not None else None
        if why:
            raise CaptureError(f"{self.path}: {why}")

    def _next_window(self, reader, buf: np.ndarray) -> np.ndarray:
        """The reader stopped inside a record at the end of a window: map the next one from
        the page that record starts in (no copy: windows overlap by less than a page, or by
        the record). Where the system refuses, the rest of the file is read into chunks."""
        self._check_mapped()
        at = self._map_start + reader.position
        start = at - at % mmap.ALLOCATIONGRANULARITY
        tail = self._map_start + reader.size - start
        try:
            nxt, final = self._window(start, 2 * tail)
        except OSError:
            self._file.seek(self._map_start + reader.size)
            self._pool = ChunkPool()
            return carry_over(reader, buf, self.chunk_size, self._pool, self._stream)
        reader.set_buffer(nxt, at - start, final)
        return nxt

    # -- reading ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Batch]:
        if self._reader is not None:
            yield from self._iter_native()
        else:
            yield from self._iter_libpcap()

    def _iter_native(self) -> Iterator[Batch]:
        reader = self._reader
        bar = _progress_bar(self._size, self.path, self._progress)
        buf = self._chunk
        self._chunk = None
        try:
            while True:
                packets = np.empty(self.batch_size, dtype=PACKET_DTYPE)
                n = reader.read_into(packets)
                if self._map is not None:
                    self._check_mapped()        # the file shrank under the windows: no zeros
                if n:
                    yield Batch(packets[:n], buf, self.path)
                if reader.eof:
                    break
                if reader.need_more:
                    if self._pool is None:
                        buf = self._next_window(reader, buf)
                    else:
                        buf = carry_over(reader, buf, self.chunk_size, self._pool, self._stream,
                                         self._fd)
                    if bar is not None:
                        bar.update((self._file.tell() if self._pool is not None
                                    else self._map_start) - bar.n)
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
        self.warnings.extend(counter_warnings(self.counters))

    # -- state --------------------------------------------------------------------------------

    @property
    def counters(self) -> dict[str, int]:
        src = self._reader if self._reader is not None else self._handle
        return _counters_dict(src.counters)

    _closed_info = ("closed", [], None)
    gzip = False            # the file is gzip-compressed (native engine)

    @property
    def format(self) -> str:
        if self._reader is None and self._handle is None:
            return self._closed_info[0]
        if self._reader is None:
            return "libpcap"
        return {1: "pcap", 2: "pcapng"}[self._reader.format]

    @property
    def interfaces(self) -> list[tuple[int, int]]:
        """(linktype, snaplen) of each interface (pcapng: of the current section)."""
        if self._reader is not None:
            return self._reader.interfaces
        return [(self._handle.linktype, self._handle.snaplen)]

    @property
    def interface_info(self) -> list[tuple[int, int, int]]:
        """(linktype, snaplen, timestamp digits) of each interface (pcapng: of the current
        section, after close: of the last one); digits 6 = microseconds, 9 = nanoseconds
        (FileReader.interface_info)."""
        if self._reader is not None:
            return self._reader.interface_info
        if self._handle is not None:
            return [(self._handle.linktype, self._handle.snaplen, 9 if self._handle.nano else 6)]
        return self._closed_info[1]

    @property
    def big_endian(self) -> bool | None:
        if self._reader is not None:
            return self._reader.big_endian
        return None if self._handle is not None else self._closed_info[2]

    def close(self) -> None:
        if self._reader is not None or self._handle is not None:
            # what the file was, for a caller that asks after the pass (webtap info)
            self._closed_info = (self.format, self.interface_info, self.big_endian)
        self._reader = None
        self._handle = None
        self._map = None            # its windows go with the last batch over them
        self._windows = []
        if self._pool is not None:
            self._pool.clear()
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
               engine: str = "native", progress: bool | None = None,
               chunk_size: int = DEFAULT_CHUNK, map_window: int | None = None) -> Trace:
    """Open a pcap/pcapng file (optionally gzip-compressed) for reading in batches.

    Raises :class:`NotACapture` (a one-line message naming the file) for anything that is not a
    capture, :class:`BpfError` for a filter libpcap rejects, ``OSError`` if it cannot be opened.
    """
    return Trace(path, bpf=bpf, batch_size=batch_size, engine=engine, progress=progress,
                 chunk_size=chunk_size, map_window=map_window)


class LiveCapture:
    """Live capture on an interface through libpcap, in batches.

    Each batch owns its byte buffer. Iteration returns at least every ``timeout_ms`` (possibly
    with an empty batch skipped) so that Ctrl-C is handled promptly; call :meth:`stop` from
    another thread or a signal handler to end it, or stop iterating.
    """

    def __init__(self, iface: str, bpf: str | None = None, snaplen: int = 262144,
                 promisc: bool = True, timeout_ms: int = 100, batch_size: int = 4096,
                 buffer_size: int = 32 * 1024 * 1024, immediate: bool = False,
                 on_ready: Callable[["LiveCapture"], None] | None = None):
        self.iface = iface
        self.batch_size = batch_size
        self._h = _source.PcapHandle.open_live(iface, snaplen, promisc, timeout_ms, buffer_size,
                                               immediate)
        if bpf:
            self._h.set_filter(bpf)
        self._stopped = False
        #: checked before every read: when it answers True the capture stops as stop() would
        #: (webtap.stream.messages sets it to the command line's stop request)
        self.stop_check: Callable[[], bool] | None = None
        if on_ready is not None:
            # only now: libpcap flushes the kernel's ring when it installs the filter, so a
            # packet sent before this point may be lost; after it, every packet is kept
            on_ready(self)

    def describe(self) -> str:
        """What the capture listens on, in tcpdump's words: 'listening on IFACE, link-type NAME
        (DESCRIPTION), snapshot length N bytes'. The commands print it on stderr once the
        capture is ready (docs/CLI.md): a script waits for it before it sends traffic."""
        name, desc = _source.linktype_name(self._h.linktype)
        return (f"listening on {self.iface}, link-type {name}" + (f" ({desc})" if desc else "")
                + f", snapshot length {self._h.snaplen} bytes")

    @property
    def linktype(self) -> int:
        return self._h.linktype

    def __iter__(self) -> Iterator[Batch]:
        h = self._h
        while not self._stopped and not h.eof:
            if self.stop_check is not None and self.stop_check():
                self._stopped = True
                break
            packets = np.empty(self.batch_size, dtype=PACKET_DTYPE)
            data = np.empty(self.batch_size * 2048 + 262144, dtype=np.uint8)
            n = h.read_into(packets, data)
            if n:
                yield Batch(packets[:n], data, self.iface)
        if self._stopped and not h.eof:
            # Stopped (Ctrl-C, stop()): the packets captured before the stop are still read.
            # The kernel hands a partly filled TPACKET_V3 block over only when its retire timer
            # (the read timeout) fires, and each read below waits at most timeout_ms: one empty
            # read may end just before the timer fires, two in a row span a firing. Bounded
            # by DRAIN_READS.
            empty = 0
            for _ in range(self.DRAIN_READS):
                packets = np.empty(self.batch_size, dtype=PACKET_DTYPE)
                data = np.empty(self.batch_size * 2048 + 262144, dtype=np.uint8)
                n = h.read_into(packets, data)
                if not n:
                    empty += 1
                    if empty == 2:
                        break
                    continue
                empty = 0
                yield Batch(packets[:n], data, self.iface)
        if h.error:
            raise CaptureError(f"{self.iface}: {h.error}")

    #: reads after a stop that drain the kernel's ring (each returns within timeout_ms)
    DRAIN_READS = 64

    def poll(self) -> "Batch | None":
        """One read: a batch, or None after the read timeout with nothing captured (so a caller
        can keep a status line and timers going while the link is idle)."""
        h = self._h
        if self._stopped or h.eof:
            if h.error:
                raise CaptureError(f"{self.iface}: {h.error}")
            return None
        packets = np.empty(self.batch_size, dtype=PACKET_DTYPE)
        data = np.empty(self.batch_size * 2048 + 262144, dtype=np.uint8)
        n = h.read_into(packets, data)
        return Batch(packets[:n], data, self.iface) if n else None

    @property
    def stopped(self) -> bool:
        return self._stopped or self._h is None or self._h.eof

    def stop(self) -> None:
        """End the capture after what the kernel already holds (iteration drains it). Reads
        never block longer than timeout_ms (poll + non-blocking pcap), so no breakloop is
        needed to end a wait."""
        self._stopped = True

    def inject(self, frame: bytes) -> int:
        """Send one link-layer frame with ``pcap_inject``."""
        return self._h.inject(frame)

    def inject_many(self, frames: np.ndarray, offsets: np.ndarray,
                    sent_ns: np.ndarray | None = None) -> tuple[int, int]:
        """Send every frame frames[offsets[i]:offsets[i+1]]; returns (sent, failed). sent_ns
        (int64, optional) receives each frame's send time (CLOCK_REALTIME ns, 0 if it failed)."""
        return self._h.inject_many(frames, offsets, sent_ns)

    def stats(self) -> dict[str, int]:
        """libpcap's received / dropped counts."""
        return self._h.stats()

    @property
    def counters(self) -> dict[str, int]:
        return _counters_dict(self._h.counters)

    def close(self) -> None:
        """Release the handle; libpcap's last received / dropped counts stay in `last_stats`."""
        if self._h is not None:
            try:
                self.last_stats = self._h.stats()
            except Exception:   # an interface that vanished has no statistics left to give
                pass
        self._h = None

    #: libpcap's counts when the capture was closed ({} before, or when it could not say)
    last_stats: dict = {}

    def __enter__(self) -> "LiveCapture":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_live(iface: str, bpf: str | None = None, **kw) -> LiveCapture:
    """Open an interface for live capture (needs root or CAP_NET_RAW)."""
    return LiveCapture(iface, bpf=bpf, **kw)


# ------------------------------------------------------------------------- chunks of a file
#
# A trace cut into chunks that separate processes read (httpanalyzer.distributed; anything that
# maps work over a large file): plan_chunks() walks the record headers once and gives, for each
# chunk, the byte offset of its first record and the reader's state there (link types,
# pcapng interfaces, byte order: FileReader.export_state()); read_chunk() opens the file at that
# offset, resumes the reader from that state and reads the chunk's packets. A gzip'd trace
# cannot be entered mid-stream: it is one chunk.


class ChunkStart(NamedTuple):
    """Where a chunk of a file begins and how long it is."""

    start: int              # byte offset in the file of the chunk's first record
    state: tuple | None     # FileReader.export_state() there; None: the file's start
    npackets: int           # packets (passing the BPF filter) in the chunk; -1: to the end
    gzip: bool              # the file is gzip'd (then there is one chunk, from 0)
    end: int = -1           # byte offset where the chunk's last record ends (webtap.rangeplan);
                            # the reader sees the file as ending there. -1: no such bound


def open_at(path: str | os.PathLike, start: int, warnings: list):
    """(file, stream, gzip'd) with `stream` positioned at byte `start` of the capture."""
    f = open(path, "rb")
    gz = f.peek(2)[:2] == _GZIP_MAGIC
    if gz:
        if start:
            f.close()
            raise ValueError(f"{path}: a gzip'd trace cannot be entered at byte {start}")
        return f, _GzipStream(f, warnings), True
    f.seek(start)
    return f, f, False


class _Bounded:
    """The next `left` bytes of a file, then its end (a chunk planned by byte range ends at a
    record boundary: the reader meets the end of the file there, as after a last record)."""

    def __init__(self, f, left: int):
        self.f = f
        self.left = left

    def readinto(self, view) -> int:
        if self.left <= 0:
            return 0
        got = self.f.readinto(view[: self.left] if len(view) > self.left else view)
        self.left -= got
        return got


def plan_chunks(path: str | os.PathLike, bpf: str | None = None, chunk_packets: int | None = None,
                chunk_bytes: int = 256 << 20, exact_packets: bool = False,
                info: dict | None = None, batch_size: int = DEFAULT_BATCH,
                chunk_size: int = DEFAULT_CHUNK, progress: bool = False) -> Iterator[ChunkStart]:
    """The chunks of one file, each as soon as the scan has passed its end (so its reader can
    start while the scan goes on). One pass over the record headers with Trace's reader.
    Boundaries: every chunk_packets packets (exact_packets: anywhere, else at the end of a
    batch) or, without chunk_packets, at the first batch end past every chunk_bytes bytes.
    info (a dict) receives the file's first packet time ('first_ts')."""
    info = info if info is not None else {}
    path = os.fspath(path)
    warnings: list = []
    f, stream, gz = open_at(path, 0, warnings)
    bar = None
    if progress:
        bar = progress_bar(os.fstat(f.fileno()).st_size, f"plan {os.path.basename(path)}")
    try:
        pool = ChunkPool(keep=2)         # two buffers in turn: their pages stay mapped
        buf = pool.get(chunk_size)
        filled, final = fill(stream, buf, 0)
        if filled == 0:
            raise NotACapture(f"{path}: empty file, not a capture")
        reader = _source.FileReader(buf[:filled], bpf, path, final)
        buf_off = 0
        starts = [[0, None, 0, -1]]
        in_chunk = 0
        total = 0
        next_bytes = chunk_bytes
        first_ts = None
        packets = np.empty(batch_size, dtype=PACKET_DTYPE)
        exact = bool(exact_packets and chunk_packets)

        ready: list = []

        def boundary():
            nonlocal in_chunk
            starts[-1][3] = in_chunk
            st = reader.export_state()
            ready.append(ChunkStart(starts[-1][0], starts[-1][1], in_chunk, gz))
            starts.append([buf_off + reader.position, st, total, -1])
            in_chunk = 0

        while True:
            nb = 0
            while nb < batch_size:
                want = batch_size - nb
                if exact and not gz:
                    want = min(want, chunk_packets - in_chunk)
                n = reader.read_into(packets[:want])
                if n:
                    if first_ts is None:
                        first_ts = int(packets["ts_ns"][0])
                    nb += n
                    in_chunk += n
                    total += n
                if exact and not gz and in_chunk == chunk_packets:
                    boundary()
                if n < want:
                    break
            if nb:
                if not gz and not exact and in_chunk:
                    if chunk_packets and in_chunk >= chunk_packets:
                        boundary()
                    elif not chunk_packets and buf_off + reader.position >= next_bytes:
                        while next_bytes <= buf_off + reader.position:
                            next_bytes += chunk_bytes
                        boundary()
            if ready:
                info["first_ts"] = first_ts
                yield from ready
                ready.clear()
            if reader.eof:
                break
            if reader.need_more:
                buf_off += reader.position
                buf = carry_over(reader, buf, chunk_size, pool, stream)
                if bar is not None:
                    bar.update(f.tell() - bar.n)
        info["first_ts"] = first_ts
        yield from ready
        # the last chunk reads to the end of the file
        yield ChunkStart(starts[-1][0], starts[-1][1], -1, gz)
    finally:
        if bar is not None:
            bar.close()
        f.close()


def read_chunk(path: str | os.PathLike, chunk: ChunkStart, bpf: str | None = None,
               totals: dict | None = None, batch_size: int = DEFAULT_BATCH,
               chunk_size: int = DEFAULT_CHUNK) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(packets, buffer) batches of one chunk: the file from chunk.start, its reader resumed
    from chunk.state, until chunk.npackets packets (or the end of the file). totals (a dict
    with 'source': {} and 'warnings': []) receives the reader's counters and warnings."""
    path = os.fspath(path)
    totals = totals if totals is not None else {"source": {}, "warnings": []}
    warnings = totals["warnings"]
    f, stream, gz = open_at(path, chunk.start, warnings)
    if chunk.end >= 0 and not gz:
        stream = _Bounded(f, chunk.end - chunk.start)
    try:
        pool = ChunkPool()
        buf = pool.get(chunk_size)
        filled, final = fill(stream, buf, 0)
        if chunk.state is None:
            reader = _source.FileReader(buf[:filled], bpf, path, final)
        else:
            reader = _source.FileReader.resume(buf[:filled], chunk.state, bpf, path, final)
        remaining = chunk.npackets
        while remaining != 0:
            want = batch_size if remaining < 0 else min(batch_size, remaining)
            packets = np.empty(want, dtype=PACKET_DTYPE)
            n = reader.read_into(packets)
            if n:
                if remaining > 0:
                    remaining -= n
                yield packets[:n], buf
            if reader.eof:
                break
            if reader.need_more:
                # the pool hands out a buffer no batch still refers to (the caller has
                # dissected and let go of the previous ones), else a new one
                buf = carry_over(reader, buf, chunk_size, pool, stream)
        for k, v in zip(SOURCE_REASONS, reader.counters):
            totals["source"][k] = totals["source"].get(k, 0) + int(v)
    finally:
        f.close()


def write_pcap(path: str | os.PathLike, batches, linktype: int, snaplen: int = 262144) -> int:
    """Write packet batches to a classic pcap file (nanosecond timestamps, native little-endian).

    Headers and packet bytes are laid out with NumPy gathers, one pass per batch (no Python per
    packet). Returns the number of packets written. All packets get the one `linktype`.
    """
    hdr_dtype = np.dtype([("sec", "<u4"), ("nsec", "<u4"), ("caplen", "<u4"), ("wirelen", "<u4")])
    n_total = 0
    with open(path, "wb") as f:
        f.write(np.array([(0xA1B23C4D, 2, 4, 0, 0, snaplen, linktype)],
                         dtype=[("m", "<u4"), ("maj", "<u2"), ("min", "<u2"), ("tz", "<i4"),
                                ("sig", "<u4"), ("snap", "<u4"), ("lt", "<u4")]).tobytes())
        for b in batches:
            p = b.packets
            n = len(p)
            if n == 0:
                continue
            caplen = p["caplen"].astype(np.int64)
            rec = 16 + caplen
            start = np.concatenate(([0], np.cumsum(rec)[:-1]))
            out = np.empty(int(rec.sum()), dtype=np.uint8)
            hdr = np.empty(n, dtype=hdr_dtype)
            hdr["sec"], hdr["nsec"] = np.divmod(p["ts_ns"], 1_000_000_000)
            hdr["caplen"], hdr["wirelen"] = p["caplen"], p["wirelen"]
            out[(start[:, None] + np.arange(16)).ravel()] = hdr.view(np.uint8)
            # Packet bytes: for every output byte, the input byte it comes from.
            total = int(caplen.sum())
            first_out = start + 16
            shift = np.repeat(p["offset"].astype(np.int64) - first_out, caplen)
            dst = np.repeat(first_out, caplen) + (np.arange(total) - np.repeat(
                np.concatenate(([0], np.cumsum(caplen)[:-1])), caplen))
            out[dst] = b.data[dst + shift]
            f.write(out.tobytes())
            n_total += n
    return n_total
