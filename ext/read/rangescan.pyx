"""Plan stage: the record chain of one byte range of a capture file, found from inside the range.

The parallel plan (webtap.rangeplan, httpanalyzer.distributed) gives each worker a byte range
[lo, hi) of a trace; the worker finds where the file's record chain enters the range and walks
it to the end of the last record that starts in the range, without reading anything before lo.
These are the walks, over a buffer holding the whole file (a read-only memory map: only the
pages of the range and one record past it are touched), with the GIL released:

* ``pcap_find`` / ``pcapng_find``: the first offset in [lo, hi) where `chain` consecutive
  records (pcap: 16-byte headers whose sub-second field fits the resolution, whose lengths are
  sane -- no empty frame, as zero-filled payload would give -- and whose timestamps lie within a
  year of the first) or blocks (pcapng: a known block type,
  both length fields equal, 4-byte aligned, in either byte order) follow each other, or end
  exactly at the end of the file. A payload may hold a fake header; a chain of several rarely
  survives, and the plan's check (each range must start where the previous range's walk ended)
  catches the one that does: the find is a guess, the check makes it exact.
* ``pcap_walk`` / ``pcapng_walk``: from a start, record after record while the record starts
  before `stop`; the end, the number of records that advance the packet index (those the
  reader gives an index: webtap._ext.source.FileReader), and whether anything irregular was met
  (a corrupt header the reader would resynchronise on, a pcapng block that the reader counts as
  bad, a Simple Packet Block, whose time is the previous packet's): then the range cannot be
  read apart from what precedes it, and the plan scans that file sequentially instead.
  pcapng walks also list the section and interface blocks (offset, length) they pass: the state
  a reader needs at the next range is rebuilt from them (the reader's own parser, on the client).

Return codes: a find returns the offset or -1; a walk returns a tuple (see each function).
"""
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

from util cimport wt_rd32

from pcapfmt cimport (MAX_CAPLEN, MAX_BLOCK, BT_SHB, BT_IDB, BT_OPB, BT_SPB, BT_NRB, BT_ISB,
                     BT_EPB, BT_DSB, BYTE_ORDER_MAGIC)
DEF SPAN = 366 * 86400          # a chain's records lie within a year of its first


# walk outcomes (the tuple's third element)
DEF W_REGULAR = 0
DEF W_IRREGULAR = 1              # the reader would resynchronise or count a bad record here


cdef inline bint _pcap_ok(const uint8_t *b, size_t n, size_t p, int swap, uint32_t frac_lim,
                          uint32_t cap_lim, int64_t sec0, bint check_sec) noexcept nogil:
    cdef uint32_t sec, frac, caplen, wirelen
    if p + 16 > n:
        return False
    sec = wt_rd32(b + p, swap)
    frac = wt_rd32(b + p + 4, swap)
    caplen = wt_rd32(b + p + 8, swap)
    wirelen = wt_rd32(b + p + 12, swap)
    if (frac >= frac_lim or caplen > cap_lim or caplen > wirelen or wirelen == 0 or
            wirelen > 16 * MAX_CAPLEN):
        return False
    if check_sec and (<int64_t>sec < sec0 - SPAN or <int64_t>sec > sec0 + SPAN):
        return False
    return p + 16 + caplen <= n


def pcap_find(const uint8_t[::1] buf, size_t lo, size_t hi, int swap, bint nano,
              uint32_t snaplen, int chain=8):
    """First offset p in [lo, hi) where `chain` plausible pcap records follow each other from p
    (fewer when they end exactly at the end of the buffer); -1 if there is none."""
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    cdef size_t n = buf.shape[0]
    cdef size_t p, q
    cdef int k
    cdef int64_t sec0
    cdef uint32_t frac_lim = 1000000000 if nano else 1000000
    cdef uint32_t cap_lim = snaplen if snaplen > MAX_CAPLEN else MAX_CAPLEN
    cdef int64_t found = -1
    if hi > n:
        hi = n
    with nogil:
        p = lo
        while p < hi and found < 0:
            if _pcap_ok(b, n, p, swap, frac_lim, cap_lim, 0, False):
                sec0 = wt_rd32(b + p, swap)
                q = p
                k = 0
                while k < chain:
                    if q == n:
                        break               # the chain ends exactly with the file
                    if not _pcap_ok(b, n, q, swap, frac_lim, cap_lim, sec0, True):
                        break
                    q += 16 + wt_rd32(b + q + 8, swap)
                    k += 1
                if k == chain or (q == n and k > 0):
                    found = <int64_t>p
                    break
            p += 1
    return found


def pcap_walk(const uint8_t[::1] buf, size_t start, size_t stop, int swap, uint32_t snaplen):
    """Walk pcap records from `start` while they start before `stop`: (end, records, outcome,
    last record's seconds, last record's sub-second field). The end is the buffer's end when
    the file ends inside a record (the reader counts it as truncated: it gets no index)."""
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    cdef size_t n = buf.shape[0]
    cdef size_t p = start
    cdef uint64_t count = 0
    cdef uint32_t caplen, sec = 0, frac = 0
    cdef int outcome = W_REGULAR
    with nogil:
        while p < stop and p < n:
            if p + 16 > n:
                p = n                       # a header cut short by the end of the file
                break
            caplen = wt_rd32(b + p + 8, swap)
            if caplen > MAX_CAPLEN and caplen > snaplen:
                outcome = W_IRREGULAR       # the reader's resynchronisation (sequential)
                break
            if caplen > n - p - 16:
                p = n                       # the file ends inside this record
                break
            sec = wt_rd32(b + p, swap)
            frac = wt_rd32(b + p + 4, swap)
            p += 16 + caplen
            count += 1
    return p, count, outcome, sec, frac


cdef inline bint _known(uint32_t t) noexcept nogil:
    return (t == BT_SHB or t == BT_IDB or t == BT_EPB or t == BT_SPB or t == BT_ISB or
            t == BT_NRB or t == BT_OPB or t == BT_DSB)


cdef inline int _block_swap(const uint8_t *b, size_t n, size_t p, int swap) noexcept nogil:
    """The byte order a well-formed block at p is read in (a section header names its own),
    or -1 when no well-formed block of a known type starts at p in byte order `swap`."""
    cdef uint32_t btype, blen, m
    if p + 12 > n:
        return -1
    btype = wt_rd32(b + p, swap)
    if btype == BT_SHB:
        if p + 28 > n:
            return -1
        m = wt_rd32(b + p + 8, 0)
        if m == BYTE_ORDER_MAGIC:
            swap = 0
        elif m == 0x4D3C2B1A:
            swap = 1
        else:
            return -1
    elif not _known(btype):
        return -1
    blen = wt_rd32(b + p + 4, swap)
    if blen < 12 or blen % 4 or blen > MAX_BLOCK or blen > n - p:
        return -1
    if wt_rd32(b + p + blen - 4, swap) != blen:
        return -1
    return swap


def pcapng_find(const uint8_t[::1] buf, size_t lo, size_t hi, int chain=8):
    """(p, byte order) of the first 4-byte aligned offset in [lo, hi) where `chain` well-formed
    blocks of known types follow each other (fewer when they end exactly at the end of the
    buffer), in one byte order (a section header switches it); (-1, 0) if there is none."""
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    cdef size_t n = buf.shape[0]
    cdef size_t p, q
    cdef int k, s, sw, first
    cdef int64_t found = -1
    cdef int found_swap = 0
    if hi > n:
        hi = n
    with nogil:
        p = (lo + 3) & ~(<size_t>3)
        while p < hi and found < 0:
            for s in range(2):
                first = _block_swap(b, n, p, s)
                if first < 0:
                    continue
                sw = first
                q = p
                k = 0
                while k < chain:
                    if q == n:
                        break
                    sw = _block_swap(b, n, q, sw)
                    if sw < 0:
                        break
                    q += wt_rd32(b + q + 4, sw)
                    k += 1
                if k == chain or (q == n and k > 0):
                    found = <int64_t>p
                    found_swap = first
                    break
            if found < 0:
                p += 4
    return found, found_swap


def pcapng_walk(const uint8_t[::1] buf, size_t start, size_t stop, int swap):
    """Walk pcapng blocks from `start` (read in byte order `swap`) while they start before
    `stop`: (end, packet blocks given an index, outcome, byte order at the end, [(offset,
    length) of each section header and interface description block passed]). The end is the
    buffer's end when the file ends inside a block (the reader counts it as truncated)."""
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    cdef size_t n = buf.shape[0]
    cdef size_t p = start
    cdef uint64_t count = 0
    cdef uint32_t btype, blen, m
    cdef int outcome = W_REGULAR
    structure = []
    while p < stop and p < n:
        with nogil:
            while p < stop and p < n:
                if p + 12 > n:
                    p = n
                    break
                btype = wt_rd32(b + p, swap)
                if btype == BT_SHB:
                    if p + 28 > n:
                        p = n
                        break
                    m = wt_rd32(b + p + 8, 0)
                    if m == BYTE_ORDER_MAGIC:
                        swap = 0
                    elif m == 0x4D3C2B1A:
                        swap = 1
                    else:
                        outcome = W_IRREGULAR
                        break
                blen = wt_rd32(b + p + 4, swap)
                if blen < 12 or blen % 4 or blen > MAX_BLOCK or \
                        (blen <= n - p and wt_rd32(b + p + blen - 4, swap) != blen):
                    outcome = W_IRREGULAR   # the reader's resynchronisation (sequential)
                    break
                if blen > n - p:
                    p = n                   # a block cut off by the end of the file
                    break
                if btype == BT_SHB or btype == BT_IDB:
                    break                   # listed below, with the GIL
                if btype == BT_EPB or btype == BT_OPB:
                    if blen < 32 or wt_rd32(b + p + 20, swap) > blen - 32:
                        outcome = W_IRREGULAR   # a bad record: no index in the reader
                        break
                    count += 1
                elif btype == BT_SPB:
                    outcome = W_IRREGULAR       # its time is the previous packet's
                    break
                p += blen
        if outcome != W_REGULAR or p >= stop or p >= n:
            break
        # a section header or an interface block at p (its length checked above)
        blen = wt_rd32(b + p + 4, swap)
        structure.append((p, blen))
        p += blen
    return p, count, outcome, swap, structure
