"""The corrupt-trace corpus (issue 10): damaged copies of shared traces, each with what a reader
must make of it.

    python -m tests.tools.corrupt_corpus [OUT_DIR] [--traces TRACE...] [--max-cuts N]

writes OUT_DIR (default build/corrupt-corpus, not committed) and OUT_DIR/manifest.json: one entry
per file with its damage ("kind") and the expected outcome, computed from the intact trace's own
record layout:

* ``packets``: the exact number of packets a reader must deliver (truncations, inserted blocks,
  zero-length records, small snaplen, gzip), or ``min_packets`` when a damaged header makes the
  reader skip an unknown stretch to resynchronise;
* ``counters``: source counters that must be non-zero (the reason the skip is reported under);
* ``unreadable``: true when nothing can be read (then the CLIs exit 1, docs/ROBUSTNESS.md).

Damages: truncation at every record/block boundary (up to --max-cuts of them, evenly spread,
always the first and last) and in the middle of a record header and of its data; a flipped byte
in a record's length field (pcap caplen / pcapng block length) and in a timestamp; a file
snaplen smaller than the packets (caplen > snaplen); a zero-length record; pcapng blocks of
unknown types between the packets; a wrong byte-order magic (pcap: at the start; pcapng: in the
first and in a later section header); a gzip'd copy, a gzip'd copy cut short and one with damaged
deflate data; an empty file and a header-only file.

The record walker here is plain Python on purpose: it is a second, independent reading of the
formats, used only to derive the expectations.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import struct
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PCAP_MAGICS = {0xA1B2C3D4: ("<", False), 0xA1B23C4D: ("<", True)}


@dataclass
class Case:
    name: str
    kind: str
    source: str
    packets: int | None = None          # exact count expected
    min_packets: int | None = None      # lower bound (resync after a damaged header)
    counters: list[str] = field(default_factory=list)   # must be > 0
    zero: list[str] = field(default_factory=list)       # must be 0
    unreadable: bool = False


def pcap_layout(raw: bytes):
    """(endian, header length, [(offset, record length)]) of a classic pcap, or None."""
    if len(raw) < 24:
        return None
    for e in ("<", ">"):
        magic = struct.unpack_from(e + "I", raw, 0)[0]
        if magic in PCAP_MAGICS:
            break
    else:
        return None
    recs, p = [], 24
    while p + 16 <= len(raw):
        caplen = struct.unpack_from(e + "I", raw, p + 8)[0]
        if p + 16 + caplen > len(raw):
            break
        recs.append((p, 16 + caplen))
        p += 16 + caplen
    if p != len(raw):
        return None                      # not a clean file: not a source for the corpus
    return e, 24, recs


def pcapng_layout(raw: bytes):
    """(endian, [(offset, length, type)]) of a single-byte-order pcapng, or None."""
    if len(raw) < 28 or raw[:4] != b"\x0a\x0d\x0d\x0a":
        return None
    bom = raw[8:12]
    e = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else None
    if e is None:
        return None
    blocks, p = [], 0
    while p + 12 <= len(raw):
        btype, blen = struct.unpack_from(e + "II", raw, p)
        if blen < 12 or blen % 4 or p + blen > len(raw):
            return None
        if btype == 0x0A0D0D0A and raw[p + 8:p + 12] != bom:
            return None
        blocks.append((p, blen, btype))
        p += blen
    return (e, blocks) if p == len(raw) else None


def _packet_blocks(blocks):
    return [b for b in blocks if b[2] in (3, 6, 2)]


def default_traces(shared: Path, n_each: int = 4) -> list[Path]:
    """A fixed, varied choice: the first n_each clean pcap and pcapng files between 2 and 300 KB
    (sorted by path) that hold at least 8 packets."""
    pc, ng = [], []
    for p in sorted(shared.joinpath("traces").rglob("*")):
        if not p.is_file() or not 2_000 <= p.stat().st_size <= 300_000:
            continue
        raw = p.read_bytes()
        lay = pcap_layout(raw)
        if lay and len(lay[2]) >= 8 and len(pc) < n_each:
            pc.append(p)
        lay2 = pcapng_layout(raw)
        if lay2 and len(_packet_blocks(lay2[1])) >= 8 and len(ng) < n_each:
            ng.append(p)
        if len(pc) >= n_each and len(ng) >= n_each:
            break
    return pc + ng


def _spread(n: int, k: int) -> list[int]:
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def cases_for(path: Path, max_cuts: int):
    """Yield (Case, bytes) for one intact trace."""
    raw = path.read_bytes()
    stem = path.parent.name + "__" + path.name.replace(".", "_")
    src = str(path)
    lay = pcap_layout(raw)
    if lay:
        e, hl, recs = lay
        n = len(recs)
        for i in _spread(n + 1, max_cuts):            # cut after i complete records
            cut = recs[i][0] if i < n else len(raw)
            yield Case(f"{stem}__cut{i}", "truncated_at_boundary", src, packets=i,
                       zero=["truncated", "bad_record"]), raw[:cut]
            if i < n:
                off, ln = recs[i]
                yield Case(f"{stem}__cut{i}_hdr", "truncated_in_header", src, packets=i,
                           counters=["truncated"]), raw[:off + 7]
                if ln > 17:
                    yield Case(f"{stem}__cut{i}_data", "truncated_in_data", src, packets=i,
                               counters=["truncated"]), raw[:off + 16 + (ln - 16) // 2]
        k = n // 2
        off = recs[k][0]
        b = bytearray(raw)
        b[off + 8 + (3 if e == "<" else 0)] ^= 0x7F      # caplen's top byte: impossible length
        yield Case(f"{stem}__flip_caplen{k}", "flipped_length", src, min_packets=k,
                   counters=["bad_record", "skipped_bytes"]), bytes(b)
        b = bytearray(raw)
        b[off + (3 if e == "<" else 0)] ^= 0x40          # a timestamp's seconds: still read
        yield Case(f"{stem}__flip_ts{k}", "flipped_timestamp", src, packets=n,
                   zero=["bad_record"]), bytes(b)
        biggest = max(ln - 16 for _, ln in recs)
        b = bytearray(raw)
        struct.pack_into(e + "I", b, 16, max(1, biggest // 2))
        yield Case(f"{stem}__small_snaplen", "caplen_gt_snaplen", src, packets=n,
                   counters=["caplen_gt_snaplen"]), bytes(b)
        sec, frac = struct.unpack_from(e + "II", raw, off)
        zero = struct.pack(e + "IIII", sec, frac, 0, 60)
        yield Case(f"{stem}__zero_len", "zero_length_packet", src, packets=n + 1,
                   zero=["bad_record"]), raw[:off] + zero + raw[off:]
        b = bytearray(raw)
        b[0] ^= 0x01                                      # magic no longer a pcap magic
        yield Case(f"{stem}__bad_magic", "wrong_magic", src, packets=0, unreadable=True), bytes(b)
        gz = gzip.compress(raw, mtime=0)
        yield Case(f"{stem}__gzip", "gzip", src, packets=n), gz
        yield Case(f"{stem}__gzip_cut", "gzip_truncated", src, min_packets=1), gz[:len(gz) * 2 // 3]
        b = bytearray(gz)
        for j in range(len(b) // 2, len(b) // 2 + 8):
            b[j] ^= 0xA5
        yield Case(f"{stem}__gzip_damaged", "gzip_damaged", src, min_packets=1), bytes(b)
        yield Case(f"{stem}__header_only", "header_only", src, packets=0), raw[:24]
        return
    lay2 = pcapng_layout(raw)
    if not lay2:
        return
    e, blocks = lay2
    pkt_blocks = _packet_blocks(blocks)
    n = len(pkt_blocks)
    before = []                      # packets before block i
    c = 0
    for off, ln, bt in blocks:
        before.append(c)
        c += bt in (3, 6, 2)
    nb = len(blocks)
    for i in _spread(nb + 1, max_cuts):
        cut = blocks[i][0] if i < nb else len(raw)
        pk = before[i] if i < nb else n
        yield Case(f"{stem}__cut{i}", "truncated_at_boundary", src, packets=pk,
                   zero=["truncated", "bad_record"], unreadable=(cut == 0)), raw[:cut]
        if i < nb and i > 0:
            off, ln, _ = blocks[i]
            yield Case(f"{stem}__cut{i}_hdr", "truncated_in_header", src, packets=pk,
                       counters=["truncated"]), raw[:off + 6]
            yield Case(f"{stem}__cut{i}_data", "truncated_in_data", src, packets=pk,
                       counters=["truncated"]), raw[:off + ln // 2 + 2]
    k = len(pkt_blocks) // 2
    off, ln, bt = pkt_blocks[k]
    b = bytearray(raw)
    b[off + 4 + (3 if e == "<" else 0)] ^= 0x55          # block length: no longer agrees
    yield Case(f"{stem}__flip_blen{k}", "flipped_length", src, min_packets=before[blocks.index(pkt_blocks[k])],
               counters=["bad_record", "skipped_bytes"]), bytes(b)
    # unknown block types between packets
    unk = struct.pack(e + "II", 0x0BADB10C, 20) + b"\xde\xad\xbe\xef" * 2 + struct.pack(e + "I", 20)
    out, ins = [], 0
    for j, (o, l, t) in enumerate(blocks):
        out.append(raw[o:o + l])
        if t in (3, 6, 2) and j % 2 == 0:
            out.append(unk)
            ins += 1
    yield Case(f"{stem}__unknown_blocks", "unknown_blocks", src, packets=n,
               counters=["unknown_blocks"], zero=["bad_record"]), b"".join(out)
    # zero-length EPB (caplen 0) after the first IDB
    idb = next((j for j, bl in enumerate(blocks) if bl[2] == 1), None)
    if idb is not None:
        body = struct.pack(e + "IIIII", 0, 0, 0, 0, 60)
        epb = struct.pack(e + "II", 6, 12 + len(body)) + body + struct.pack(e + "I", 12 + len(body))
        o, l, _ = blocks[idb]
        yield Case(f"{stem}__zero_len", "zero_length_packet", src, packets=n + 1,
                   zero=["bad_record"]), raw[:o + l] + epb + raw[o + l:]
        # IDB snaplen below the packets' length: caplen > snaplen
        b = bytearray(raw)
        for j, (o2, l2, t2) in enumerate(blocks):
            if t2 == 1:
                struct.pack_into(e + "I", b, o2 + 12, 16)
        yield Case(f"{stem}__small_snaplen", "caplen_gt_snaplen", src, packets=n,
                   counters=["caplen_gt_snaplen"]), bytes(b)
    b = bytearray(raw)
    b[8:12] = b"\x11\x22\x33\x44"
    yield Case(f"{stem}__bad_bom", "wrong_byte_order_magic", src, packets=0, unreadable=True), bytes(b)
    # a second section whose byte-order magic is wrong: the first section is read whole, the
    # damaged header is skipped and reported, the blocks after it are read as far as they parse
    shb_len = blocks[0][1]
    bad2 = bytearray(raw[:shb_len])
    bad2[8:12] = b"\x11\x22\x33\x44"
    yield Case(f"{stem}__bad_bom_2nd", "wrong_byte_order_magic_later", src, min_packets=n,
               counters=["bad_record"]), raw + bytes(bad2) + raw[shb_len:]
    gz = gzip.compress(raw, mtime=0)
    yield Case(f"{stem}__gzip", "gzip", src, packets=n), gz
    yield Case(f"{stem}__gzip_cut", "gzip_truncated", src, min_packets=1), gz[:len(gz) * 2 // 3]


def generate(out: Path, traces: list[Path], max_cuts: int = 10) -> list[Case]:
    out.mkdir(parents=True, exist_ok=True)
    cases: list[Case] = [Case("empty", "empty_file", "", packets=0, unreadable=True)]
    (out / "empty").write_bytes(b"")
    for t in traces:
        for case, data in cases_for(t, max_cuts):
            (out / case.name).write_bytes(data)
            cases.append(case)
    (out / "manifest.json").write_text(json.dumps([asdict(c) for c in cases], indent=1))
    return cases


def load_manifest(out: Path) -> list[Case]:
    return [Case(**d) for d in json.loads((out / "manifest.json").read_text())]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.tools.corrupt_corpus")
    ap.add_argument("out", nargs="?", default=str(ROOT / "build" / "corrupt-corpus"))
    ap.add_argument("--traces", nargs="*", help="intact traces (default: a fixed choice of shared ones)")
    ap.add_argument("--max-cuts", type=int, default=10)
    a = ap.parse_args(argv)
    shared = Path(os.environ.get("WEBTAP_SHARED", ROOT.parent / "shared"))
    traces = [Path(t) for t in a.traces] if a.traces else default_traces(shared)
    cases = generate(Path(a.out), traces, a.max_cuts)
    kinds: dict[str, int] = {}
    for c in cases:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    print(f"{len(cases)} files from {len(traces)} traces in {a.out}", file=sys.stderr)
    for k, v in sorted(kinds.items()):
        print(f"  {k}: {v}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
