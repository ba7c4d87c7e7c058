"""The shared C helpers have one home (issue 19): ext/common/util.h / ext/common/util.pxd for prefetch, the
monotonic clock, address text and the UTF-8 check, ext/common/alloc.c for the checked allocator;
ext/pair/hashes.h for the paper's three hash equations; ext/tls/hellostream.c for the rules of a
TLS hello split over TCP segments (the handshake records' and the URL filter's);
ext/pair/pendtable.c (declared in pendtable.h / .pxd) for the Eq. 2 pending table's index (pool,
free list, cells, chains, age list: the HTTP pairing table's, the TLS hello table's and the
exchange stage's); ext/walk/httpstart.c, msglen.c, httpcont.c and httphdr.c for the HTTP rules of
the walk (the start rule, a message's length from one packet, the message after a continued
header block, the chosen headers); webtap._ext.canon.CODES for the canonicaliser's error names.
A .pxd file only declares (issue 29).

A second copy written into another module fails here, with the file and line. What is still
allowed to allocate by hand is listed below with the reason, file by file.
"""
from __future__ import annotations

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
EXT = REPO / "ext"
C_SOURCES = sorted(p for p in EXT.rglob("*") if p.suffix in (".pyx", ".pxd", ".pxi", ".h", ".c"))

# the pending table's index: its C, its header, its Cython declarations
PENDTABLE = {"pendtable.c", "pendtable.h", "pendtable.pxd"}

# (what, pattern, the files allowed to hold it)
ONE_HOME = [
    ("prefetch", r"__builtin_prefetch", {"util.h"}),
    ("monotonic clock", r"CLOCK_MONOTONIC", {"util.h"}),
    ("address to text", r"\binet_ntop\b", {"util.h"}),
    ("UTF-8 check", r"^\s*(?:cdef|static)[^\n(]*utf8[^\n(]*\(", {"util.h"}),
    ("byte swap", r"__builtin_bswap", {"util.h"}),
    ("Eq. 1-3 hash, address fold",
     r"^\s*(?:cdef\s+(?:inline\s+)?|static\s+inline\s+)\w+\s+(?:eq[123]_\w*|\w*fold\w*)\s*\(\s*const uint8_t \*",
     {"hashes.h"}),
    # a split TLS hello over TCP: the stream's rules (in order, retransmission, gap, caps, whole)
    ("split-hello stream: gathering the held records", r"\btls_gather\s*\(",
     {"hellostream.c", "tls_hello.h", "tls_hello.c", "tls.pxd"}),
    ("split-hello stream: TCP seq order", r"(?:<int32_t>|\(int32_t\))\s*\([^)\n]*seq\s*-", {"hellostream.c"}),
    ("split-hello stream: the stream cap", r"\b(?:RAW_CAP|TLS_STREAM_CAP)\b|2\s*\*\s*TLS_HELLO_CAP",
     {"hellostream.h"}),
    # the link -> IP -> TCP walk (issue 29): its body once, in ext/walk/l34.c (the wtc library),
    # declared in l34.h / l34.pxd; every module that walks packets links it
    ("the L3/L4 walk", r"^\s*(?:cdef[^\n(=]*|int\s+)\b(?:l34_parse|quic_udp_locate)\s*\([^;]*\)\s*(?:noexcept\s*nogil\s*)?[:{]",
     {"l34.c"}),
    # the Eq. 2 pending table's index (PairingTable, TlsTable): cells, chains, age list, link,
    # unlink, doubling the cells. The TLS reassembly table's own lists (rage_head, rcells,
    # _runlink) are another table and do not match.
    ("pending table: the age list's ends", r"\bage_(?:head|tail)\b", PENDTABLE),
    ("pending table: the chains' ends per cell", r"\bcell_(?:head|tail)\b", PENDTABLE),
    # a definition or declaration (Cython or C) of a pt_ function, an unlink or a cell doubling
    ("pending table: link / unlink / grow",
     r"^\s*(?:cdef[^\n(=]*|(?:static\s+inline\s+)?(?:void|int|int32_t|uint32_t|bint|PendLinks)\s*\*?\s*)"
     r"\b(?:\w*_unlink|\w*_grow_cells|pt_\w+)\s*\(", PENDTABLE),
    # the HTTP rules of the walk (issue 31 / 29): C of the wtc library, declared in the .pxd
    # (a cdef inline copy in a .pxd or .pyx, or a second C body, fails)
    ("HTTP start rule", r"^\s*(?:cdef[^\n(=]*|int|static[^\n(=]*)\s\w*http_start\s*\(",
     {"httpstart.c", "httpstart.h", "httpstart.pxd"}),
    ("message length from one packet", r"^\s*(?:cdef[^\n(=]*|int|static[^\n(=]*)\s\w*(?:msg_end|chunked_end)\s*\(",
     {"msglen.c", "msglen.h", "msglen.pxd"}),
    ("message after a continued header block",
     r"^\s*(?:cdef[^\n(=]*|int|static[^\n(=]*)\s\w*http_after_continuation\s*\(",
     {"httpcont.c", "httpcont.h", "httpcont.pxd"}),
    ("chosen-header scan", r"^\s*(?:cdef[^\n(=]*|int|static[^\n(=]*)\s\w*hdr_scan\s*\(",
     {"httphdr.c", "httphdr.h", "httphdr.pxd"}),
]

# .pxd files only declare (issue 29): the ones that still hold cdef inline functions, and why.

# Files that still call malloc/calloc/realloc themselves, and why (every other module allocates
# through ext/common/alloc.c's wt_alloc / wt_zalloc / wt_realloc).
RAW_ALLOC_ALLOWED = {
    "alloc.c": "the checked allocator itself",
    "pairing.pyx": "the text arena: a failed chunk allocation is the arena cap (the message is "
                   "kept without its text, counted), not an error",
    "source.pyx": "the pcapng interface table grows inside the noexcept read loop: a failed "
                  "allocation is counted as a bad record",
    "urlmatch.pyx": "SniTable: a hello slot's buffers and the output columns grow inside the "
                    "nogil extract loop, where a failed allocation drops that hello (counted) "
                    "instead of raising",
    "tls.pyx": "the TLS stage's records, reassembly table and scratch buffers, each result "
               "checked by hand (MemoryError); its pending hellos are ext/pair/pendtable.c's "
               "index, allocated through wt_alloc / wt_realloc",
    "colbuild.c": "plain C called from nogil code: each growth is checked and returned as a "
                  "failure, which the TLS stage raises as MemoryError with the GIL back",
    "quic_crypto.c": "plain C (no Python to raise into), called from nogil code: its per-thread "
                     "state's calloc is checked and a failure leaves the Initial keys "
                     "underivable (counted as undecryptable), never a crash",
}


def _hits(pattern: str) -> dict[str, list[int]]:
    rx = re.compile(pattern, re.M)
    out: dict[str, list[int]] = {}
    for p in C_SOURCES:
        text = p.read_text()
        for m in rx.finditer(text):
            out.setdefault(p.name, []).append(text.count("\n", 0, m.start()) + 1)
    return out


@pytest.mark.parametrize("what,pattern,home", ONE_HOME, ids=[w for w, _, _ in ONE_HOME])
def test_helper_has_one_home(what, pattern, home):
    hits = _hits(pattern)
    assert set(hits) & home, f"{what}: not found in its home {sorted(home)} (pattern out of date?)"
    stray = {f: lines for f, lines in hits.items() if f not in home}
    assert not stray, f"{what} written outside {sorted(home)}: {stray} (cimport it instead)"


# .pxd files hold declarations only (issue 29: "no logic in .pxd files"): their C is in .c
# files of the wtc library, with few-line static inline helpers in the headers. Every .pxd of ext/.
DECLARATIONS_ONLY = sorted(str(p.relative_to(EXT)) for p in EXT.rglob("*.pxd"))


@pytest.mark.parametrize("rel", DECLARATIONS_ONLY)
def test_pxd_holds_declarations_only(rel):
    text = (EXT / rel).read_text()
    code = [i + 1 for i, line in enumerate(text.splitlines())
            if re.match(r"\s*cdef\s+(?:inline\b|(?:public\s+)?\w[\w\s*]*\([^)]*\)\s*(?:noexcept|nogil|except|:))", line)
            or re.match(r"\s*(?:def|cpdef)\s", line)]
    assert not code, f"ext/{rel} defines functions at lines {code}: move them to a .c file of the wtc library"


def test_allocations_go_through_the_checked_allocator():
    hits = _hits(r"(?<![\w.])(?:malloc|calloc|realloc)\s*\(")
    stray = {f: lines for f, lines in hits.items() if f not in RAW_ALLOC_ALLOWED}
    assert not stray, f"malloc/calloc/realloc outside ext/common/alloc.c: {stray} (use wt_alloc/wt_zalloc/wt_realloc)"


def test_canonicaliser_error_names_are_one_table():
    from urlfilter import canon
    from webtap._ext import canon as ccanon

    assert canon.REASONS is ccanon.CODES
    names = [r'"bad_char"', r'"bad_host"', r'"bad_port"', r'"tree_full"']
    for d in ("ext", "webtap", "httpanalyzer", "urlfilter"):
        for p in sorted((REPO / d).rglob("*")):
            if p.suffix not in (".py", ".pyx", ".pxd", ".pyi") or p.name == "canon.pyx":
                continue
            text = p.read_text()
            for n in names:
                assert n not in text, f"{p.relative_to(REPO)} spells the canonicaliser's error name {n}: use webtap._ext.canon.CODES"
