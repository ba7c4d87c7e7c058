# cython: freethreading_compatible = False
"""TLS first flight (issue 17): ClientHello / ServerHello of any TCP stream -> handshake records.

The parser and the fingerprints are C headers (ext/tls/tls_hello.h, ext/tls/tls_fp.h, declared in
ext/tls/tls.pxd); this module holds the Python-facing helpers and the record stage.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MIN, UINT64_MAX
from libc.string cimport memcmp, memcpy, memset
from libc.stdlib cimport malloc, free

from tls cimport *
from quic_initial cimport (quic_frame, quic_crypto_frames, quic_frames_put, quic_crypto_whole,
                          QF_BEYOND, QF_BAD_ACK, QF_BAD_LENGTH, QUIC_MAX_FRAMES)
from hellostream cimport (HelloStream, hs_start, hs_offer, hs_may_start, HS_STREAM_CAP, HS_MORE,
                          HS_WHOLE, HS_RETRANSMISSION, HS_GAP, HS_CUT, HS_TOO_LONG, HS_MALFORMED,
                          HS_NOT_HELLO)

#: the parser's status codes by name (parse_hello, server_version)
_STATUS = {TLS_OK: "ok", TLS_INCOMPLETE: "incomplete", TLS_NOT_TLS: "not_tls",
           TLS_NOT_HELLO: "not_hello", TLS_BAD_LENGTH: "bad_length", TLS_TOO_LONG: "too_long",
           TLS_BAD_RECORD: "bad_record"}


def parse_hello(const uint8_t[::1] payload, str proto="t"):
    """Parse one TCP payload that starts a TLS hello (test and inspection helper, not a hot path).

    Returns (status, dict) where status is 'ok', 'incomplete', 'not_tls', 'not_hello',
    'bad_length', 'too_long' or 'bad_record'; the dict has the hello's fields (lists of ints,
    text as bytes) and its JA3/JA3S and JA4 strings when status is 'ok'.
    """
    cdef tls_hello h
    cdef const uint8_t *msg = NULL
    cdef uint8_t *scratch = <uint8_t *>malloc(TLS_HELLO_CAP)
    cdef uint16_t *s16 = <uint16_t *>malloc(2 * 32768 * sizeof(uint16_t))
    cdef char *text = <char *>malloc(6 * 32768 + 16)
    cdef char *ja3 = <char *>malloc(6 * 32768 * 3 + 64)
    cdef char ja3h[33]
    cdef char ja4[37]
    cdef char ja4r[8192]
    cdef uint16_t ks[256]
    cdef uint32_t n = payload.shape[0], r, k, nk
    cdef bytes msgb
    cdef char pc
    try:
        if scratch == NULL or s16 == NULL or text == NULL or ja3 == NULL:
            raise MemoryError()
        with nogil:
            r = tls_parse_payload(&payload[0] if n else NULL, n, scratch, TLS_HELLO_CAP, &h, &msg)
        d = {"hs_type": h.hs_type, "hs_len": h.hs_len}
        if r != TLS_OK:
            return _STATUS[r], d
        # an SSLv2-format hello: msg is its record (2-byte header + msg type + hs_len bytes)
        msgb = bytes((<const uint8_t *>msg)[:(3 if h.flags & TLSF_SSLV2 else 4) + h.hs_len])

        def span(tls_span s):
            return msgb[s.off:s.off + s.len]

        def u16s(tls_span s):
            b = span(s)
            return [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b) - 1, 2)]

        alpn_raw = span(h.alpn)
        alpn = []
        i = 0
        while i < len(alpn_raw):
            ln = alpn_raw[i]
            alpn.append(alpn_raw[i + 1:i + 1 + ln])
            i += 1 + ln
        with nogil:
            nk = tls_key_share_groups(msg, &h, ks, 256)
        d.update(
            legacy_version=h.legacy_version, version=h.version, cipher=h.cipher,
            hrr=bool(h.flags & TLSF_HRR), ech=bool(h.flags & TLSF_ECH),
            has_sni=bool(h.flags & TLSF_SNI), has_alpn=bool(h.flags & TLSF_ALPN),
            sni=span(h.sni) if h.sni.len else None, alpn=alpn,
            ciphers=u16s(h.ciphers), groups=u16s(h.groups), sig_algs=u16s(h.sig_algs),
            point_formats=list(span(h.point_formats)),
            versions=u16s(h.versions), key_share_groups=[ks[k] for k in range(nk)],
            flags=h.flags, sslv2=bool(h.flags & TLSF_SSLV2), random=span(h.random),
            session_id=span(h.session_id),
        )
        if h.flags & TLSF_SSLV2:     # 3-byte cipher specs
            b = span(h.ciphers)
            d["ciphers"] = [int.from_bytes(b[i:i + 3], "big") for i in range(0, len(b) - 2, 3)]
        ex = []
        q = h.exts.off
        e = h.exts.off + h.exts.len
        while e - q >= 4:
            el = int.from_bytes(msgb[q + 2:q + 4], "big")
            if e - q - 4 < el:
                break
            ex.append(int.from_bytes(msgb[q:q + 2], "big"))
            q += 4 + el
        d["extensions"] = ex
        with nogil:
            k = tls_ja3_string(msg, &h, ja3, 6 * 32768 * 3 + 64)
            if k:
                tls_md5_hex(ja3, k, ja3h)
        d["ja3_string"] = ja3[:k].decode() if k else None
        d["ja3"] = ja3h[:32].decode() if k else None
        if h.hs_type == 1:
            pc = <char>ord(proto[0])
            with nogil:
                k = tls_ja4(msg, &h, pc, s16, text, 6 * 32768 + 16, ja4, ja4r, 8192)
            d["ja4"] = ja4[:36].decode() if k else None
            d["ja4_r"] = ja4r.decode() if k else None
        return "ok", d
    finally:
        free(scratch)
        free(s16)
        free(text)
        free(ja3)


# ---------------------------------------------------------------------------------------------
# Record stage: TCP packets -> (reassembled) hellos -> Eq. 2 pairing -> handshake records
# ---------------------------------------------------------------------------------------------
cimport numpy as cnp
import numpy as np

# the NumPy mirrors of the structs this module reads (the core's one home for them; it imports
# numpy only)
from webtap.records.message import MESSAGE_DTYPE as _MESSAGE_DTYPE
from webtap._ext.dissect import dissect_batch as _dissect_batch

from packet cimport PacketRef
from l34 cimport L34
from message cimport HttpMsg, MSG_TLS, MSG_QUIC, same_ip
from hashes cimport eq2_hash, fold_ip
from util cimport wt_alloc, wt_ip_text, WT_IP_TEXT
from colbuild cimport (wt_strcol, wt_strlist, wt_u16list, wt_strcol_push, wt_strcol_clear,
                       wt_strcol_free, wt_strlist_push_split, wt_strlist_clear, wt_strlist_free,
                       wt_u16list_push_dec, wt_u16list_clear, wt_u16list_free, wt_strcol_keep,
                       wt_strlist_keep, wt_u16list_keep)
cdef extern from "<string.h>" nogil:
    size_t strnlen(const char *s, size_t maxlen)
from pendtable cimport (PendIndex, PendLinks, pt_alloc, pt_cell, pt_cells_for, pt_first, pt_free,
                        pt_full, pt_grow, pt_init, pt_link, pt_oldest, pt_release_all, pt_unlink)
from libc.stdlib cimport realloc, calloc, qsort

from quic_crypto cimport (quic_keys_t, quic_long_hdr_t, quic_parse_long, quic_initial_keys,
                          quic_open_packet, QUIC_OK, QUIC_E_NOT_LONG,
                          QUIC_E_VERSION, QUIC_E_DECRYPT, QUIC_PT_INITIAL, QUIC_PT_RETRY,
                          QUIC_PT_VERSION_NEG, quic_thread_end)
from digest cimport wt_crypto_no_atexit

wt_crypto_no_atexit()   # no libcrypto clean-up at exit, when first (ext/out/digest.h)


def server_version(const uint8_t[::1] payload):
    """tls_payload_server_version of one TCP payload (test helper, not a hot path): (status, the
    ServerHello's selected version, whether it is a HelloRetryRequest); status as parse_hello's."""
    cdef uint8_t *scratch = <uint8_t *>wt_alloc(TLS_HELLO_CAP)
    cdef uint32_t n = payload.shape[0]
    cdef uint16_t v = 0
    cdef int hrr = 0, r
    try:
        with nogil:
            r = tls_payload_server_version(&payload[0] if n else NULL, n, scratch, TLS_HELLO_CAP,
                                           &v, &hrr)
    finally:
        free(scratch)
    return _STATUS[r], v, bool(hrr)


def thread_end():
    """This thread's QUIC contexts and libcrypto state freed now: the last step of a worker
    thread that ran the TLS stage (webtap.inflight's at_end), so that nothing of libcrypto is
    left to its exit destructors, which could otherwise run beside the process's exit
    (ext/out/digest.h)."""
    with nogil:
        quic_thread_end()

cnp.import_array()

# Text widths of a record (bytes incl. the NUL); longer text is clipped and flagged (RECF_CLIPPED)
cdef enum:
    W_IP = 48
    W_SNI = 256
    W_ALPN = 256
    W_VERS = 128
    W_CIPHERS = 1024
    W_EXTS = 512
    W_GROUPS = 256
    W_KS = 128
    W_SALPN = 64
    W_SEXTS = 256
    JA3_CAP = 6 * 32768 * 2 + 64
    W_CH_TEXT = W_SNI + W_ALPN + W_VERS + W_CIPHERS + W_EXTS + W_GROUPS + W_KS

# A hello's text fields, one after another in one buffer (ChPart.text / ShPart.text, lengths
# in tl[]): while the hello is offered, the table's scratch (htext); while it waits, a buffer
# kept with its pending entry's slot (TlsTable.ptext), of the bytes used only. Each field is
# clipped to its width W_* as it is written (the record's text_clipped).
cdef enum:
    CT_SNI = 0
    CT_ALPN                     # comma-joined protocol names
    CT_VERS                     # supported_versions as 0x0304,... (wire order, GREASE kept)
    CT_CIPHERS                  # 0x1301,... wire order, GREASE kept
    CT_EXTS                     # extension types, decimal, wire order, GREASE kept
    CT_GROUPS                   # supported_groups 0x001d,...
    CT_KS                       # key_share groups 0x11ec,...
    CT_N
cdef enum:
    ST_ALPN = 0
    ST_EXTS
    ST_N

ctypedef struct ChPart:
    int64_t ts_ns               # capture time of the ClientHello's first segment
    uint64_t pkt                # 0-based index of that packet
    uint32_t ack                # its TCP ACK: the pairing key (= the ServerHello's SEQ)
    uint32_t hs_len             # declared handshake length
    uint16_t legacy_version
    uint16_t version            # highest supported version (JA4's)
    uint16_t flags              # TLSF_*
    uint16_t segments           # TCP segments the ClientHello took
    uint16_t n_ciphers
    uint16_t n_exts
    uint8_t status              # TLS_* parse result
    uint8_t clipped             # 1: some text was clipped to its width
    uint16_t tl[<int>CT_N]      # lengths of the text fields CT_* (no NUL)
    const char *text            # the fields, one after another (see CT_*)
    char ja3[33]
    char ja4[37]

ctypedef struct ShPart:
    int64_t ts_ns
    uint64_t pkt
    uint32_t seq                # TCP SEQ of the ServerHello's segment (pairing key)
    uint32_t hs_len
    uint16_t legacy_version
    uint16_t version            # selected version (supported_versions, else legacy)
    uint16_t cipher
    uint16_t flags
    uint16_t segments
    uint16_t group              # key_share group the server chose (TLS 1.3; 0: none)
    uint8_t status
    uint8_t clipped
    uint16_t tl[<int>ST_N]      # lengths of the text fields ST_* (alpn, extension types)
    const char *text
    char ja3s[33]

# The encapsulation of a hello's packet (ext/walk/l34.pxd; the HTTP records' columns of the same names)
ctypedef struct TEnc:
    uint64_t encap              # EncapKind per byte, outermost lowest; 0: no tunnel
    uint8_t outer_src[16]       # outermost IP header carrying the tunnel (HttpMsg layout)
    uint8_t outer_dst[16]
    uint32_t tunnel_id
    uint8_t outer_ip_version    # 0: no IP header carries a tunnel

ctypedef struct TlsRecord:
    uint8_t client_ip[16]
    uint8_t server_ip[16]
    uint16_t client_port
    uint16_t server_port
    uint16_t vlan
    uint8_t ip_version
    uint8_t transport           # 0 tcp, 1 quic
    uint8_t has_ch
    uint8_t has_sh
    uint8_t reason              # TR_* (0: paired)
    uint8_t _pad
    ChPart ch
    ShPart sh
    # added at the end: of the ClientHello's (first) packet, the ServerHello's without one;
    # QUIC: of the connection's first Initial
    TEnc enc

# An emitted record's numeric part (httpanalyzer.tls.TLS_OUT_DTYPE mirrors it; a test compares
# the layout). Its text leaves in Arrow-layout columns (ext/out/colbuild.h), one value per record:
# a waiting hello's fixed-width text is copied once, into the columns, and only its used bytes.
ctypedef struct TlsOut:
    uint8_t client_ip[16]
    uint8_t server_ip[16]
    int64_t ch_ts_ns
    int64_t sh_ts_ns
    uint64_t ch_pkt
    uint64_t sh_pkt
    uint64_t encap
    uint32_t ch_hs_len
    uint32_t tunnel_id
    uint16_t client_port
    uint16_t server_port
    uint16_t vlan
    uint16_t ch_legacy_version
    uint16_t ch_flags
    uint16_t ch_segments
    uint16_t sh_version
    uint16_t sh_cipher
    uint16_t sh_flags
    uint16_t sh_group
    uint8_t ip_version
    uint8_t transport
    uint8_t has_ch
    uint8_t has_sh
    uint8_t reason
    uint8_t ch_status
    uint8_t sh_status
    uint8_t clipped             # ch.clipped | sh.clipped
    uint8_t outer_ip_version

# the record's text columns (names in _STR_COLUMNS) and list columns (_LIST_COLUMNS, _U16_COLUMNS)
cdef enum:
    SC_CLIENT_IP = 0
    SC_SERVER_IP
    SC_SNI
    SC_JA3
    SC_JA3S
    SC_JA4
    SC_SERVER_ALPN
    SC_OUTER_SRC
    SC_OUTER_DST
    SC_N
cdef enum:
    LC_ALPN = 0
    LC_VERSIONS
    LC_CIPHERS
    LC_GROUPS
    LC_KEY_SHARE
    LC_N
cdef enum:
    UC_EXTS = 0
    UC_SEXTS
    UC_N

_STR_COLUMNS = ("client_ip", "server_ip", "sni", "ja3", "ja3s", "ja4", "server_alpn",
                "outer_src_ip", "outer_dst_ip")
_LIST_COLUMNS = ("alpn", "client_versions", "ciphers", "supported_groups", "key_share_groups")
_U16_COLUMNS = ("extensions", "server_extensions")

# unmatched_reason codes (names in tls_reason_names())
cdef enum:
    TR_NONE = 0
    TR_GC = 1            # no counterpart within the GC window
    TR_END = 2           # still waiting at the end of the input
    TR_CAP = 3           # evicted: the pending table hit max_pending
    TR_INCOMPLETE = 4    # a split hello whose remaining segments never came (GC / end / gap)
    TR_TOO_LONG = 5      # declared length above the cap (TLS_HELLO_CAP)
    TR_MALFORMED = 6     # lengths disagree / non-handshake record inside the hello
    TR_REASM_CAP = 7     # split hello evicted: the reassembly table hit max_reassembly

_REASONS = (None, "gc", "end", "cap", "incomplete", "too_long", "malformed", "reassembly_cap")

# counters
cdef enum:
    TC_PACKETS = 0
    TC_TCP_MESSAGES         # MSG_TLS messages: TCP payloads starting a hello or continuing a split one
    TC_CLIENT_HELLO
    TC_SERVER_HELLO
    TC_HRR
    TC_SPLIT_HELLO          # hellos that took more than one segment (completed)
    TC_REASM_STARTED
    TC_REASM_GAP            # segments of a split hello that did not continue it (gap / out of order)
    TC_REASM_RETRANS        # retransmitted segments of a split hello (ignored)
    TC_INCOMPLETE
    TC_TOO_LONG
    TC_MALFORMED
    TC_PAIRED
    TC_CH_UNMATCHED
    TC_SH_UNMATCHED
    TC_CH_REPEAT            # ClientHello repeating one still waiting (retransmission): dropped
    TC_SH_REPEAT
    TC_CAP_EVICTED
    TC_REASM_CAP_EVICTED
    TC_PEAK_PENDING
    TC_PEAK_REASM
    TC_NOT_HELLO_AFTER_CCS  # handshake record after skipped CCS/alert/heartbeat: not parsed (encrypted)
    TC_QUIC_INITIAL         # QUIC Initial packets decrypted
    TC_QUIC_UNDECRYPTABLE   # Initials whose AEAD check failed (no state for them, or damage)
    TC_QUIC_OTHER_VERSION   # long headers of a version without known Initial keys
    TC_QUIC_MALFORMED       # long headers / frames that do not parse
    TC_QUIC_CRYPTO_BEYOND   # CRYPTO data beyond TLS_HELLO_CAP (hello given up)
    TC_QUIC_EVICTED         # connections evicted by the max_quic cap
    TC_QUIC_TIMEOUT         # connections dropped by the GC with a hello unfinished
    TC_AFTER_RECORDS        # hellos (or split-hello streams) after skipped CCS/alert/heartbeat
    TC_SSLV2_HELLO          # SSLv2-format ClientHellos read
    TC_N

_COUNTERS = ("packets", "tcp_messages", "client_hello", "server_hello", "hello_retry_request",
             "split_hello", "reassembly_started", "reassembly_gap", "reassembly_retransmission",
             "incomplete", "too_long", "malformed", "paired", "client_hello_unmatched",
             "server_hello_unmatched", "client_hello_repeat", "server_hello_repeat",
             "evicted_cap", "evicted_reassembly_cap", "peak_pending", "peak_reassembly",
             "not_hello_after_ccs", "quic_initial", "quic_undecryptable", "quic_other_version",
             "quic_malformed", "quic_crypto_beyond_cap", "quic_evicted", "quic_timeout",
             "hello_after_records", "sslv2_client_hello")

# A waiting hello. The Eq. 2 index (pool, free list, cells, chains in arrival order, age list)
# is ext/pair/pendtable.pxd's, the HTTP pairing table's too; its links come first.
ctypedef struct Pend:
    PendLinks links             # ext/pair/pendtable.pxd: must stay the first member
    uint32_t key                # ClientHello ACK / ServerHello SEQ (QUIC: the connection's number)
    uint8_t side                # 1: a ClientHello waits, 2: a ServerHello waits
    TlsRecord r

# A split hello being reassembled: its stream (ext/tls/hellostream.h: the rules, shared with the
# URL filter's SNI pass) plus what its record needs from the first segment; hs.hs_type is the
# side (1 ClientHello, 2 ServerHello; 0 while a stream started by a 1-5 byte segment has not
# shown its type: such a stream leaves without a record).
ctypedef struct Reasm:
    uint8_t src[16]
    uint8_t dst[16]
    uint16_t sport
    uint16_t dport
    uint16_t vlan
    uint8_t ipv
    uint32_t seq
    uint32_t ack
    uint32_t cell
    int64_t ts
    int64_t stamp
    uint64_t pkt
    uint8_t *buf                # HS_STREAM_CAP bytes, kept with the pool slot (hs.buf points here)
    HelloStream hs
    int32_t next
    int32_t age_prev
    int32_t age_next
    TEnc enc                    # of the hello's first segment


# One QUIC connection's Initial state: both sides' keys (from the client's first DCID) and
# CRYPTO streams gathered up to TLS_HELLO_CAP bytes each (coverage bitmap), until each side's hello
# is whole. At most max_quic of them (oldest evicted, counted), ~37 KiB each.
cdef enum:
    TLS_HAVE_BYTES = 2048        # TLS_HELLO_CAP / 8: one bit per CRYPTO byte

ctypedef struct QSide:
    uint8_t buf[TLS_HELLO_CAP]
    uint8_t have[TLS_HAVE_BYTES]
    int64_t ts                  # first Initial of this side that carried CRYPTO data
    uint64_t pkt
    uint16_t packets            # Initials that carried CRYPTO data for the hello
    uint8_t done                # 1: given up (CRYPTO beyond the cap)
    uint8_t hellos              # hellos parsed on this side (2 after a HelloRetryRequest)
    uint32_t base               # stream offset of the next handshake message

ctypedef struct QConn:
    uint8_t cli[16]
    uint8_t srv[16]
    uint16_t cport
    uint16_t sport
    uint16_t vlan
    uint8_t ipv
    uint32_t version
    uint8_t odcid[20]
    uint8_t odcid_len
    uint32_t key                # pairing key derived from the original DCID
    quic_keys_t ck
    quic_keys_t sk
    QSide c
    QSide s
    TEnc enc                    # of the connection's first Initial


cdef inline void _l34_of(const HttpMsg *m, L34 *l) noexcept nogil:
    """The walk fields of a TLS stage message (the dissector's walk, ext/walk/dissect.pyx), in the
    L34 form the stage's code reads; the addresses point into the message."""
    memset(l, 0, sizeof(L34))
    l.src = m.src_ip
    l.dst = m.dst_ip
    l.outer_src = m.outer_src
    l.outer_dst = m.outer_dst
    l.encap = m.encap
    l.seq = m.seq
    l.ack = m.ack
    l.tunnel_id = m.tunnel_id
    l.src_port = m.src_port
    l.dst_port = m.dst_port
    l.vlan = m.vlan
    l.payload_off = m.payload_off
    l.payload_caplen = m.payload_caplen
    l.payload_len = m.payload_len
    l.ip_version = m.ip_version
    l.outer_ip_version = m.outer_ip_version
    l.encap_depth = m.encap_depth


cdef inline void _enc_of(TEnc *e, const L34 *l) noexcept nogil:
    """The encapsulation fields of a walk. A plain UDP datagram's walk has looked for a tunnel
    in its IP packet (outer_ip_version set, encap 0): that is no tunnel."""
    e.encap = l.encap
    e.tunnel_id = l.tunnel_id if l.encap else 0
    e.outer_ip_version = l.outer_ip_version if l.encap else 0
    memset(e.outer_src, 0, 16)
    memset(e.outer_dst, 0, 16)
    if e.outer_ip_version:
        memcpy(e.outer_src, l.outer_src, 4 if l.outer_ip_version == 4 else 16)
        memcpy(e.outer_dst, l.outer_dst, 4 if l.outer_ip_version == 4 else 16)


def tls_reason_names():
    return _REASONS


def tls_counter_names():
    return _COUNTERS


def sizeof_tls_record():
    """sizeof(TlsOut): the numeric part of an emitted record (TLS_OUT_DTYPE's itemsize)."""
    return sizeof(TlsOut)


def tls_out_layout():
    """{field: offset} of the TlsOut struct (httpanalyzer.tls.TLS_OUT_DTYPE mirrors it)."""
    cdef TlsOut r
    cdef size_t b = <size_t>&r
    return {
        "client_ip": <size_t>&r.client_ip - b, "server_ip": <size_t>&r.server_ip - b,
        "ch_ts_ns": <size_t>&r.ch_ts_ns - b, "sh_ts_ns": <size_t>&r.sh_ts_ns - b,
        "ch_pkt": <size_t>&r.ch_pkt - b, "sh_pkt": <size_t>&r.sh_pkt - b,
        "encap": <size_t>&r.encap - b, "ch_hs_len": <size_t>&r.ch_hs_len - b,
        "tunnel_id": <size_t>&r.tunnel_id - b, "client_port": <size_t>&r.client_port - b,
        "server_port": <size_t>&r.server_port - b, "vlan": <size_t>&r.vlan - b,
        "ch_legacy_version": <size_t>&r.ch_legacy_version - b, "ch_flags": <size_t>&r.ch_flags - b,
        "ch_segments": <size_t>&r.ch_segments - b, "sh_version": <size_t>&r.sh_version - b,
        "sh_cipher": <size_t>&r.sh_cipher - b, "sh_flags": <size_t>&r.sh_flags - b,
        "sh_group": <size_t>&r.sh_group - b, "ip_version": <size_t>&r.ip_version - b,
        "transport": <size_t>&r.transport - b, "has_ch": <size_t>&r.has_ch - b,
        "has_sh": <size_t>&r.has_sh - b, "reason": <size_t>&r.reason - b,
        "ch_status": <size_t>&r.ch_status - b, "sh_status": <size_t>&r.sh_status - b,
        "clipped": <size_t>&r.clipped - b, "outer_ip_version": <size_t>&r.outer_ip_version - b}


cdef inline uint32_t _hex_list(const uint8_t *p, tls_span sp, uint32_t size, char *out,
                               uint32_t w, uint8_t *clipped) noexcept nogil:
    """0xHHHH,0xHHHH,... of a list of `size`-byte values (2, or 3 for the cipher specs of an
    SSLv2-format ClientHello) into out[0:w] (NUL-terminated). A 3-byte spec is written as Zeek
    and tshark map it: 0x00XXYY is the TLS cipher suite 0xXXYY (0xxxyy, as the TLS lists are), an
    SSLv2-only spec (first byte not 0, e.g. 0x010080 SSL2_RC4_128_WITH_MD5) keeps its six digits."""
    cdef uint32_t k = 0, o = 0, v, d, end = sp.len - sp.len % size
    cdef const char *hx = b"0123456789abcdef"
    while k < end:
        if o + 2 * size + 4 >= w:
            clipped[0] = 1
            break
        v = tls_be16(p + sp.off + k) if size == 2 else tls_be24(p + sp.off + k)
        if k:
            out[o] = 44
            o += 1
        out[o] = 48; out[o + 1] = 120
        o += 2
        d = 24 if v > 0xFFFF else 16
        while d:
            d -= 4
            out[o] = hx[(v >> d) & 15]
            o += 1
        k += size
    out[o] = 0
    return o


cdef inline void _hex16(uint32_t v, char *out) noexcept nogil:
    cdef const char *hx = b"0123456789abcdef"
    out[0] = 48; out[1] = 120
    out[2] = hx[(v >> 12) & 15]; out[3] = hx[(v >> 8) & 15]
    out[4] = hx[(v >> 4) & 15]; out[5] = hx[v & 15]
    out[6] = 0


cdef inline uint32_t _text(const uint8_t *s, uint32_t n, char *out, uint32_t o, uint32_t w,
                           uint8_t *clipped) noexcept nogil:
    """Append s[0:n] to out at o as printable text (bytes outside 0x20-0x7e -> U+FFFD, so the
    column is valid UTF-8 whatever the wire held); NUL-terminates; returns the new length."""
    cdef uint32_t i
    for i in range(n):
        if s[i] >= 0x20 and s[i] < 0x7f:
            if o + 2 > w:
                clipped[0] = 1
                break
            out[o] = <char>s[i]
            o += 1
        else:
            if o + 4 > w:
                clipped[0] = 1
                break
            out[o] = <char>0xEF; out[o + 1] = <char>0xBF; out[o + 2] = <char>0xBD
            o += 3
    out[o] = 0
    return o


cdef inline uint32_t _dec(uint32_t v, char *out, uint32_t o, uint32_t w, uint8_t *clipped) noexcept nogil:
    cdef char t[12]
    cdef int k = 0
    while True:
        t[k] = <char>(48 + v % 10)
        k += 1
        v //= 10
        if v == 0:
            break
    if o + k + 1 > w:
        clipped[0] = 1
        return o
    while k:
        k -= 1
        out[o] = t[k]
        o += 1
    out[o] = 0
    return o


cdef inline uint32_t _alpn_text(const uint8_t *p, tls_span sp, char *out, uint32_t w,
                                uint8_t *clipped) noexcept nogil:
    cdef uint32_t q = sp.off, e = sp.off + sp.len, o = 0, l
    out[0] = 0
    while q < e:
        l = p[q]
        q += 1
        if e - q < l:
            break
        if o:
            if o + 2 > w:
                clipped[0] = 1
                break
            out[o] = 44
            o += 1
        o = _text(p + q, l, out, o, w, clipped)
        q += l
    return o


cdef inline uint32_t _ext_text(const uint8_t *p, const tls_hello *h, char *out, uint32_t w,
                               uint8_t *clipped) noexcept nogil:
    cdef uint32_t q = h.exts.off, e = h.exts.off + h.exts.len, o = 0, el
    out[0] = 0
    while e - q >= 4:
        el = tls_be16(p + q + 2)
        if e - q - 4 < el:
            break
        if o + 8 > w:                 # room for ",65535" and the NUL, else stop here
            clipped[0] = 1
            break
        if o:
            out[o] = 44
            o += 1
        o = _dec(tls_be16(p + q), out, o, w, clipped)
        q += 4 + el
    return o


cdef object _i32(const int32_t *p, size_t n):
    """A copy of n int32 offsets (an empty column: [0])."""
    a = np.zeros(n, dtype=np.int32)
    if p != NULL and n > 1:
        memcpy(cnp.PyArray_DATA(a), p, n * 4)
    return a


cdef object _u8(const uint8_t *p, size_t n):
    a = np.empty(n, dtype=np.uint8)
    if n:
        memcpy(cnp.PyArray_DATA(a), p, n)
    return a


# take(ordered=True): a record's sort key (webtap.records.tls.sorted_table's) and its emit index
ctypedef struct TlsKey:
    uint64_t first              # frame of its first hello (the ClientHello's, else the ServerHello's)
    uint64_t second             # the ServerHello's frame, 0 without one
    uint32_t i                  # emit index: equal keys keep their emit order (a stable sort)


cdef int _key_cmp(const void *a, const void *b) noexcept nogil:
    cdef const TlsKey *x = <const TlsKey *>a
    cdef const TlsKey *y = <const TlsKey *>b
    if x.first != y.first:
        return -1 if x.first < y.first else 1
    if x.second != y.second:
        return -1 if x.second < y.second else 1
    return -1 if x.i < y.i else (1 if x.i > y.i else 0)


cdef void _gather_spans(const int32_t *offs, const uint8_t *data, size_t n, const uint32_t *perm,
                        int32_t *out_offs, uint8_t *out) noexcept nogil:
    """Spans perm[0:n] of the set data[offs[i]:offs[i + 1]], in that order: their bytes into
    out and their int32 offsets (n + 1) into out_offs (whose sum the caller sized out by)."""
    cdef size_t i
    cdef int32_t o = 0, a, l
    out_offs[0] = 0
    for i in range(n):
        a = offs[perm[i]]
        l = offs[perm[i] + 1] - a
        if l:
            memcpy(out + o, data + a, l)
        o += l
        out_offs[i + 1] = o


cdef object _take_str(const wt_strcol *c, size_t n, const uint32_t *perm):
    """(int32 offsets[n + 1], bytes) of a text column's n rows, in perm's order (NULL: as they are)."""
    if perm == NULL or c.n == 0:
        return _i32(c.offs, n + 1), _u8(c.data, c.len)
    offs = np.empty(n + 1, dtype=np.int32)
    data = np.empty(c.len, dtype=np.uint8)
    cdef int32_t *oo = <int32_t *>cnp.PyArray_DATA(offs)
    cdef uint8_t *d = <uint8_t *>cnp.PyArray_DATA(data)
    with nogil:
        _gather_spans(c.offs, c.data, n, perm, oo, d)
    return offs, data[:oo[n]]              # (a take of some rows: their bytes only)


cdef object _take_strlist(const wt_strlist *c, size_t n, const uint32_t *perm):
    """(int32 list offsets[n + 1], int32 item offsets, bytes) of a list<string> column's n rows
    in perm's order (NULL: as they are). A row's items are consecutive in the item column: a
    row moves as one span of items, and each item as one span of bytes."""
    cdef size_t i, j, ni = c.items.n
    cdef int32_t a, l, m = 0, o = 0, b, bl
    cdef int32_t *lo
    cdef int32_t *io
    cdef uint8_t *d
    if perm == NULL or c.n == 0:
        return (_i32(c.loffs, n + 1), _i32(c.items.offs, ni + 1), _u8(c.items.data, c.items.len))
    loffs = np.empty(n + 1, dtype=np.int32)
    ioffs = np.empty(ni + 1, dtype=np.int32)
    data = np.empty(c.items.len, dtype=np.uint8)
    lo = <int32_t *>cnp.PyArray_DATA(loffs)
    io = <int32_t *>cnp.PyArray_DATA(ioffs)
    d = <uint8_t *>cnp.PyArray_DATA(data)
    with nogil:
        lo[0] = 0
        io[0] = 0
        for i in range(n):
            a = c.loffs[perm[i]]
            l = c.loffs[perm[i] + 1] - a
            if l:
                b = c.items.offs[a]
                bl = c.items.offs[a + l] - b
                if bl:
                    memcpy(d + o, c.items.data + b, bl)
                for j in range(<size_t>l):
                    io[m + j + 1] = o + (c.items.offs[a + j + 1] - b)
                o += bl
            m += l
            lo[i + 1] = m
    return loffs, ioffs[:m + 1], data[:o]


cdef object _take_u16list(const wt_u16list *c, size_t n, const uint32_t *perm):
    """(int32 list offsets[n + 1], uint16 values) of a list<uint16> column's n rows in perm's
    order (NULL: as they are)."""
    cdef size_t i
    cdef int32_t a, l, m = 0
    cdef int32_t *lo
    cdef uint16_t *v
    vals = np.empty(c.nv, dtype=np.uint16)
    if perm == NULL or c.n == 0:
        if c.nv:
            memcpy(cnp.PyArray_DATA(vals), c.vals, c.nv * 2)
        return _i32(c.loffs, n + 1), vals
    loffs = np.empty(n + 1, dtype=np.int32)
    lo = <int32_t *>cnp.PyArray_DATA(loffs)
    v = <uint16_t *>cnp.PyArray_DATA(vals)
    with nogil:
        lo[0] = 0
        for i in range(n):
            a = c.loffs[perm[i]]
            l = c.loffs[perm[i] + 1] - a
            if l:
                memcpy(v + m, c.vals + a, l * 2)
            m += l
            lo[i + 1] = m
    return loffs, vals[:m]


cdef class TlsTable:
    """Handshake table: finds the TLS first flight of every TCP connection in packet batches,
    reassembles split hellos (bounded), pairs ClientHello <-> ServerHello by the paper's Eq. 2
    rule (reversed 4-tuple, ServerHello SEQ == ClientHello ACK) and emits handshake records.

    Memory bound: max_pending waiting hellos (one Pend, 360 bytes, each, and its slot's kept
    text: the bytes its text fields use, at most W_CH_TEXT = 2,560; a few hundred for a usual
    ClientHello) plus max_reassembly split hellos (each at most HS_STREAM_CAP = 32 KiB of stream
    bytes, ext/tls/hellostream.h). A waiting hello's text was a fixed-width copy of every field
    (3.3 KB per hello, cleared and copied whole each time one was offered).
    """
    # the pending hellos' index (ext/pair/pendtable.pxd) and a typed alias of its pool, refreshed
    # after pt_alloc (_alloc), the only call that moves it
    cdef PendIndex ix
    cdef Pend *pool
    cdef Reasm *rpool
    cdef int32_t rpool_cap
    cdef int32_t rfree_head
    cdef int64_t nreasm
    cdef int32_t *rcells
    cdef uint32_t nrcells
    cdef int32_t rage_head, rage_tail
    cdef int64_t now
    cdef bint has_now
    cdef readonly int64_t gc_timeout_ns
    cdef readonly int64_t max_pending
    cdef readonly int64_t max_reassembly
    cdef TlsOut *recs
    cdef size_t nrec, rec_cap
    cdef wt_strcol scol[<int>SC_N]
    cdef wt_strlist lcol[<int>LC_N]
    cdef wt_u16list ucol[<int>UC_N]
    cdef uint64_t cnt[<int>TC_N]
    cdef uint8_t *scratch
    cdef char *htext            # the text fields of the hello being offered (W_CH_TEXT bytes)
    cdef char **ptext           # per pool slot: the kept text of the hello waiting there
    cdef uint32_t *ptcap        # its bytes allocated
    cdef int32_t nptext         # slots those two arrays cover
    cdef uint16_t *s16
    cdef char *text
    cdef char *ja3buf
    cdef tls_fp_memo *memo      # recent MD5 / SHA-256 of the fingerprints (ext/tls/tls_fp.h)
    cdef QConn *q
    cdef int32_t nq
    # the QConn slots' state kept dense beside them (a scan for a free or the oldest slot reads
    # these, not 256 strided ~37 KiB entries), and a chained index of the slots by the
    # connection's endpoint pair (symmetric: either direction finds it)
    cdef uint8_t *qused
    cdef int64_t *qstamp
    cdef int32_t *qnext         # next slot of the same cell, -1 at the end
    cdef uint32_t *qcellof      # the cell a used slot is linked in
    cdef int32_t *qcells        # first slot of each cell, -1 when none
    cdef uint32_t nqcells
    cdef readonly int32_t max_quic
    cdef uint8_t *qplain
    # the unprotected header of the Initial being opened: up to its packet number, token
    # included, so as long as a datagram (the UDP length bounds it below 64 KiB). It was a
    # 256-byte array here: an Initial with a token over ~250 bytes wrote past it into the
    # table's other fields (found by the quic fuzz target; tests/fuzz/regressions/quic)
    cdef uint8_t *qhdr
    cdef quic_frame *qframes        # the CRYPTO frames of the Initial being read (quic_initial.h)
    cdef TlsWatch *watch_            # owned by _watch_capsule (tls_watch_capsule)
    cdef object _watch_capsule
    cdef uint64_t next_pkt      # the packet index after the last message fed (ready_before)
    cdef bint frames_back       # a message's packet index went back (the next trace): see there

    def __cinit__(self, double gc_timeout=60.0, int64_t max_pending=1 << 15,
                  int64_t max_reassembly=1024, int32_t max_quic=256):
        cdef uint32_t i
        cdef TlsWatch *w
        if max_pending < 1 or max_reassembly < 1:
            raise ValueError("max_pending and max_reassembly must be >= 1")
        if max_pending > (1 << 30):
            raise ValueError("max_pending must be in 1 .. 2**30")
        self.gc_timeout_ns = <int64_t>(gc_timeout * 1e9)
        self.max_pending = max_pending
        self.max_reassembly = max_reassembly
        # cells from 4096, doubling at load factor 1 up to max_pending's power of two
        pt_init(&self.ix, sizeof(Pend), 256, <int32_t>max_pending, 1 << 12,
                pt_cells_for(max_pending, 1 << 12))
        self.pool = NULL
        self.nrcells = 1 << 12
        self.rcells = <int32_t *>malloc(self.nrcells * sizeof(int32_t))
        self.scratch = <uint8_t *>malloc(TLS_HELLO_CAP)
        self.htext = <char *>malloc(W_CH_TEXT)
        self.s16 = <uint16_t *>malloc(2 * 32768 * sizeof(uint16_t))
        self.text = <char *>malloc(6 * 32768 + 16)
        self.ja3buf = <char *>malloc(JA3_CAP)
        self.memo = <tls_fp_memo *>calloc(1, sizeof(tls_fp_memo))
        if max_quic < 1:
            raise ValueError("max_quic must be >= 1")
        self.max_quic = max_quic
        # not zeroed: _qnew clears what a connection reads before writing it (its CRYPTO
        # buffers are read only where their coverage bitmaps mark bytes put)
        self.q = <QConn *>malloc(max_quic * sizeof(QConn))
        self.qused = <uint8_t *>calloc(max_quic, 1)
        self.qstamp = <int64_t *>calloc(max_quic, sizeof(int64_t))
        self.qnext = <int32_t *>malloc(max_quic * sizeof(int32_t))
        self.qcellof = <uint32_t *>malloc(max_quic * sizeof(uint32_t))
        self.nqcells = 16
        while self.nqcells < 2 * <uint32_t>max_quic:
            self.nqcells *= 2
        self.qcells = <int32_t *>malloc(self.nqcells * sizeof(int32_t))
        if (self.qused == NULL or self.qstamp == NULL or self.qnext == NULL or self.qcellof == NULL
                or self.qcells == NULL):
            raise MemoryError()
        for i in range(self.nqcells):
            self.qcells[i] = -1
        self.qplain = <uint8_t *>malloc(65536 + 64)
        self.qhdr = <uint8_t *>malloc(65536 + 64)
        self.qframes = <quic_frame *>malloc(QUIC_MAX_FRAMES * sizeof(quic_frame))
        w = tls_watch_new(4 * max_reassembly)
        self._watch_capsule = tls_watch_capsule(w)     # owns w from here, even on failure
        self.watch_ = w
        if self.q == NULL or self.qplain == NULL or self.qhdr == NULL or self.qframes == NULL:
            raise MemoryError()
        if (self.rcells == NULL or self.scratch == NULL or self.s16 == NULL or self.htext == NULL
                or self.text == NULL or self.ja3buf == NULL or self.memo == NULL):
            raise MemoryError()
        for i in range(self.nrcells):
            self.rcells[i] = -1
        self.rfree_head = -1
        self.rage_head = self.rage_tail = -1
        memset(self.cnt, 0, sizeof(self.cnt))
        memset(self.scol, 0, sizeof(self.scol))
        memset(self.lcol, 0, sizeof(self.lcol))
        memset(self.ucol, 0, sizeof(self.ucol))

    def __dealloc__(self):
        cdef int32_t i
        for i in range(<int>SC_N):
            wt_strcol_free(&self.scol[i])
        for i in range(<int>LC_N):
            wt_strlist_free(&self.lcol[i])
        for i in range(<int>UC_N):
            wt_u16list_free(&self.ucol[i])
        if self.rpool != NULL:
            for i in range(self.rpool_cap):
                free(self.rpool[i].buf)
        pt_release_all(&self.ix)
        self.pool = NULL
        if self.ptext != NULL:
            for i in range(self.nptext):
                free(self.ptext[i])
        free(self.ptext)
        free(self.ptcap)
        free(self.htext)
        free(self.rpool)
        free(self.rcells)
        free(self.recs)
        free(self.scratch)
        free(self.s16)
        free(self.text)
        free(self.ja3buf)
        free(self.memo)
        free(self.q)
        free(self.qused)
        free(self.qstamp)
        free(self.qnext)
        free(self.qcellof)
        free(self.qcells)
        free(self.qplain)
        free(self.qhdr)
        free(self.qframes)
        # the watch list goes with its capsule's last reference (a MessageBatch may still hold it)

    # ---- records -------------------------------------------------------------------------
    cdef int _emit(self, TlsRecord *r, uint8_t reason) except -1 nogil:
        """A record leaves: its numeric part to recs, its text (only the bytes used) to the
        Arrow-layout columns. The text of a hello that did not parse stays empty (its columns
        are null there: httpanalyzer.tls.to_table)."""
        cdef size_t nc
        cdef TlsOut *q
        cdef TlsOut *o
        cdef char ip[WT_IP_TEXT]
        cdef char v[8]
        cdef size_t n
        cdef int f
        cdef const char *t
        cdef const char *ft[<int>CT_N]
        cdef bint ch_ok = r.has_ch and r.ch.status == TLS_OK
        cdef bint sh_ok = r.has_sh and r.sh.status == TLS_OK
        cdef int bad = 0
        if self.nrec == self.rec_cap:
            nc = self.rec_cap * 2 if self.rec_cap else 256
            q = <TlsOut *>realloc(self.recs, nc * sizeof(TlsOut))
            if q == NULL:
                with gil:
                    raise MemoryError()
            self.recs = q
            self.rec_cap = nc
        o = &self.recs[self.nrec]
        memset(o, 0, sizeof(TlsOut))
        memcpy(o.client_ip, r.client_ip, 16)
        memcpy(o.server_ip, r.server_ip, 16)
        o.ch_ts_ns = r.ch.ts_ns
        o.sh_ts_ns = r.sh.ts_ns
        o.ch_pkt = r.ch.pkt
        o.sh_pkt = r.sh.pkt
        o.encap = r.enc.encap
        o.ch_hs_len = r.ch.hs_len
        o.tunnel_id = r.enc.tunnel_id
        o.client_port = r.client_port
        o.server_port = r.server_port
        o.vlan = r.vlan
        o.ch_legacy_version = r.ch.legacy_version
        o.ch_flags = r.ch.flags
        o.ch_segments = r.ch.segments
        o.sh_version = r.sh.version
        o.sh_cipher = r.sh.cipher
        o.sh_flags = r.sh.flags
        o.sh_group = r.sh.group
        o.ip_version = r.ip_version
        o.transport = r.transport
        o.has_ch = r.has_ch
        o.has_sh = r.has_sh
        o.reason = reason
        o.ch_status = r.ch.status
        o.sh_status = r.sh.status
        o.clipped = r.ch.clipped | r.sh.clipped
        o.outer_ip_version = r.enc.outer_ip_version
        n = wt_ip_text(r.client_ip, r.ip_version != 4, ip)
        bad |= wt_strcol_push(&self.scol[<int>SC_CLIENT_IP], ip, n)
        n = wt_ip_text(r.server_ip, r.ip_version != 4, ip)
        bad |= wt_strcol_push(&self.scol[<int>SC_SERVER_IP], ip, n)
        if r.enc.outer_ip_version:
            n = wt_ip_text(r.enc.outer_src, r.enc.outer_ip_version != 4, ip)
            bad |= wt_strcol_push(&self.scol[<int>SC_OUTER_SRC], ip, n)
            n = wt_ip_text(r.enc.outer_dst, r.enc.outer_ip_version != 4, ip)
            bad |= wt_strcol_push(&self.scol[<int>SC_OUTER_DST], ip, n)
        else:
            bad |= wt_strcol_push(&self.scol[<int>SC_OUTER_SRC], NULL, 0)
            bad |= wt_strcol_push(&self.scol[<int>SC_OUTER_DST], NULL, 0)
        if ch_ok:
            t = r.ch.text
            for f in range(<int>CT_N):
                ft[f] = t
                t += r.ch.tl[f]
            bad |= wt_strcol_push(&self.scol[<int>SC_SNI], ft[<int>CT_SNI], r.ch.tl[<int>CT_SNI])
            bad |= wt_strcol_push(&self.scol[<int>SC_JA3], r.ch.ja3, strnlen(r.ch.ja3, 33))
            bad |= wt_strcol_push(&self.scol[<int>SC_JA4], r.ch.ja4, strnlen(r.ch.ja4, 37))
            bad |= wt_strlist_push_split(&self.lcol[<int>LC_ALPN], ft[<int>CT_ALPN], r.ch.tl[<int>CT_ALPN], 44)
            n = r.ch.tl[<int>CT_VERS]
            if n:
                bad |= wt_strlist_push_split(&self.lcol[<int>LC_VERSIONS], ft[<int>CT_VERS], n, 44)
            else:
                # no supported_versions extension: the legacy version is the one offered
                _hex16(r.ch.legacy_version, v)
                bad |= wt_strlist_push_split(&self.lcol[<int>LC_VERSIONS], v, 6, 44)
            bad |= wt_strlist_push_split(&self.lcol[<int>LC_CIPHERS], ft[<int>CT_CIPHERS], r.ch.tl[<int>CT_CIPHERS], 44)
            bad |= wt_strlist_push_split(&self.lcol[<int>LC_GROUPS], ft[<int>CT_GROUPS], r.ch.tl[<int>CT_GROUPS], 44)
            bad |= wt_strlist_push_split(&self.lcol[<int>LC_KEY_SHARE], ft[<int>CT_KS], r.ch.tl[<int>CT_KS], 44)
            bad |= wt_u16list_push_dec(&self.ucol[<int>UC_EXTS], ft[<int>CT_EXTS], r.ch.tl[<int>CT_EXTS], 44)
        else:
            bad |= wt_strcol_push(&self.scol[<int>SC_SNI], NULL, 0)
            bad |= wt_strcol_push(&self.scol[<int>SC_JA3], NULL, 0)
            bad |= wt_strcol_push(&self.scol[<int>SC_JA4], NULL, 0)
            for n in range(<int>LC_N):
                bad |= wt_strlist_push_split(&self.lcol[n], NULL, 0, 44)
            bad |= wt_u16list_push_dec(&self.ucol[<int>UC_EXTS], NULL, 0, 44)
        if sh_ok:
            bad |= wt_strcol_push(&self.scol[<int>SC_JA3S], r.sh.ja3s, strnlen(r.sh.ja3s, 33))
            bad |= wt_strcol_push(&self.scol[<int>SC_SERVER_ALPN], r.sh.text, r.sh.tl[<int>ST_ALPN])
            bad |= wt_u16list_push_dec(&self.ucol[<int>UC_SEXTS], r.sh.text + r.sh.tl[<int>ST_ALPN],
                                       r.sh.tl[<int>ST_EXTS], 44)
        else:
            bad |= wt_strcol_push(&self.scol[<int>SC_JA3S], NULL, 0)
            bad |= wt_strcol_push(&self.scol[<int>SC_SERVER_ALPN], NULL, 0)
            bad |= wt_u16list_push_dec(&self.ucol[<int>UC_SEXTS], NULL, 0, 44)
        if bad:
            with gil:
                raise MemoryError("tls: record columns")
        self.nrec += 1
        if reason == TR_NONE:
            self.cnt[<int>TC_PAIRED] += 1
        else:
            if o.has_ch:
                self.cnt[<int>TC_CH_UNMATCHED] += 1
            if o.has_sh:
                self.cnt[<int>TC_SH_UNMATCHED] += 1
        return 0

    # ---- pending table (ext/pair/pendtable.pxd's index; the matching rule and the edges here) ---
    cdef int _evict_head(self, uint8_t reason) except -1 nogil:
        """The oldest waiting hello leaves as an unmatched record (reason TR_*); 0 if none."""
        cdef int32_t i = pt_oldest(&self.ix)
        if i == -1:
            return 0
        pt_unlink(&self.ix, i)
        pt_free(&self.ix, i)              # its record stays intact until the next pt_alloc
        self._emit(&self.pool[i].r, reason)
        return 1

    cdef int32_t _alloc(self) except -2 nogil:
        """An entry for a hello that will wait; at max_pending waiting, the oldest is evicted
        first (reason cap). The pool holds at most max_pending entries."""
        cdef int32_t i
        if self.ix.n >= self.max_pending:
            self.cnt[<int>TC_CAP_EVICTED] += 1
            self._evict_head(TR_CAP)
        i = pt_alloc(&self.ix)
        self.pool = <Pend *>self.ix.pool
        if i >= 0 and self.ix.pool_cap > self.nptext:
            self._grow_ptext(self.ix.pool_cap)
        return i

    cdef int _grow_ptext(self, int32_t n) except -1 nogil:
        """Room for the text buffers of n pool slots (the new ones empty)."""
        cdef char **p = <char **>realloc(self.ptext, n * sizeof(char *))
        cdef uint32_t *c
        if p == NULL:
            with gil:
                raise MemoryError()
        self.ptext = p
        c = <uint32_t *>realloc(self.ptcap, n * sizeof(uint32_t))
        if c == NULL:
            with gil:
                raise MemoryError()
        self.ptcap = c
        memset(self.ptext + self.nptext, 0, (n - self.nptext) * sizeof(char *))
        memset(self.ptcap + self.nptext, 0, (n - self.nptext) * sizeof(uint32_t))
        self.nptext = n
        return 0

    cdef const char *_keep_text(self, int32_t i, const char *text, const uint16_t *tl,
                                int nf) except NULL nogil:
        """A waiting hello's text fields (nf lengths tl) copied into slot i's kept buffer,
        grown to the largest text the slot has held (at most W_CH_TEXT bytes)."""
        cdef uint32_t total = 1, f
        cdef char *b
        for f in range(<uint32_t>nf):
            total += tl[f]
        if total > self.ptcap[i]:
            b = <char *>realloc(self.ptext[i], total)
            if b == NULL:
                with gil:
                    raise MemoryError()
            self.ptext[i] = b
            self.ptcap[i] = total
        memcpy(self.ptext[i], text, total - 1)
        return self.ptext[i]

    cdef int32_t _match(self, const TlsRecord *r, uint32_t key, uint32_t *hv) noexcept nogil:
        """The first waiting hello of r's connection under this key (the oldest: chains keep
        arrival order), -1 if none; *hv: the key's cell value (Eq. 2 with its halves folded)."""
        cdef int32_t j
        cdef Pend *e
        hv[0] = eq2_hash(r.client_ip, r.client_port, r.server_ip, r.server_port, key, r.ip_version)
        hv[0] ^= hv[0] >> 16
        j = pt_first(&self.ix, pt_cell(&self.ix, hv[0]))
        while j != -1:
            e = &self.pool[j]
            if (e.key == key and e.r.client_port == r.client_port and e.r.server_port == r.server_port
                    and e.r.ip_version == r.ip_version and same_ip(e.r.client_ip, r.client_ip)
                    and same_ip(e.r.server_ip, r.server_ip)):
                return j
            j = e.links.next
        return -1

    cdef bint _repeated(self, const TlsRecord *r, uint8_t side, uint32_t key) noexcept nogil:
        """Whether a hello of this side and key already waits for this connection (_offer would
        drop this one as a repeat, a retransmission): counted here, before its text and
        fingerprints are made for nothing."""
        cdef uint32_t hv
        cdef int32_t j = self._match(r, key, &hv)
        if j != -1 and self.pool[j].side == side:
            self.cnt[<int>(TC_CH_REPEAT if side == 1 else TC_SH_REPEAT)] += 1
            return True
        return False

    cdef int _offer(self, TlsRecord *r, uint8_t side, uint32_t key) except -1 nogil:
        """A parsed hello (its part of r filled): pair it with a waiting counterpart or wait."""
        cdef uint32_t hv
        cdef int32_t j = self._match(r, key, &hv), i
        cdef Pend *e
        if j != -1:
            e = &self.pool[j]
            if e.side != side:
                # completed in its pool entry: a freed entry's record (and its slot's text)
                # stays intact until the next pt_alloc, and _emit allocates none; the
                # arriving hello's text is still in the scratch
                if side == 1:
                    memcpy(&e.r.ch, &r.ch, sizeof(ChPart))
                    memcpy(&e.r.enc, &r.enc, sizeof(TEnc))   # the ClientHello's packet's
                    e.r.has_ch = 1
                else:
                    memcpy(&e.r.sh, &r.sh, sizeof(ShPart))
                    e.r.has_sh = 1
                pt_unlink(&self.ix, j)
                pt_free(&self.ix, j)
                self._emit(&e.r, TR_NONE)
                return 0
            # a repeat (_hello drops those before this, through _repeated)
            self.cnt[<int>(TC_CH_REPEAT if side == 1 else TC_SH_REPEAT)] += 1
            return 0
        i = self._alloc()
        e = &self.pool[i]
        memcpy(&e.r, r, sizeof(TlsRecord))
        # its text (the scratch's, for now) into its slot's kept buffer: the bytes used only
        if side == 1:
            e.r.ch.text = self._keep_text(i, r.ch.text, r.ch.tl, <int>CT_N)
        else:
            e.r.sh.text = self._keep_text(i, r.sh.text, r.sh.tl, <int>ST_N)
        e.key = key
        e.side = side
        # at the chain's tail: the oldest same-key hello is found first
        pt_link(&self.ix, i, hv, self.now)
        if <uint64_t>self.ix.n > self.cnt[<int>TC_PEAK_PENDING]:
            self.cnt[<int>TC_PEAK_PENDING] = <uint64_t>self.ix.n
        if pt_full(&self.ix):
            pt_grow(&self.ix)
        return 0

    # ---- reassembly table (split hellos) --------------------------------------------------
    cdef void _runlink(self, int32_t i) noexcept nogil:
        cdef Reasm *e = &self.rpool[i]
        cdef int32_t *pp = &self.rcells[e.cell]
        while pp[0] != -1 and pp[0] != i:
            pp = &self.rpool[pp[0]].next
        if pp[0] == i:
            pp[0] = e.next
        if e.age_prev != -1:
            self.rpool[e.age_prev].age_next = e.age_next
        else:
            self.rage_head = e.age_next
        if e.age_next != -1:
            self.rpool[e.age_next].age_prev = e.age_prev
        else:
            self.rage_tail = e.age_prev
        e.next = self.rfree_head
        self.rfree_head = i
        self.nreasm -= 1

    cdef uint32_t _rcell(self, const uint8_t *src, uint16_t sport, const uint8_t *dst, uint16_t dport,
                         uint8_t ipv) noexcept nogil:
        cdef uint32_t h = fold_ip(src, ipv) * 2654435761u ^ fold_ip(dst, ipv) ^ (<uint32_t>sport << 16 | dport)
        h ^= h >> 15
        h *= 2246822519u
        h ^= h >> 13
        return h & (self.nrcells - 1)

    cdef int32_t _rfind(self, L34 *l) noexcept nogil:
        cdef uint32_t c = self._rcell(l.src, l.src_port, l.dst, l.dst_port, l.ip_version)
        cdef int32_t j = self.rcells[c]
        cdef Reasm *e
        cdef int alen = 4 if l.ip_version == 4 else 16
        while j != -1:
            e = &self.rpool[j]
            if (e.sport == l.src_port and e.dport == l.dst_port and e.ipv == l.ip_version
                    and memcmp(e.src, l.src, alen) == 0 and memcmp(e.dst, l.dst, alen) == 0):
                return j
            j = e.next
        return -1

    cdef void _side_record(self, TlsRecord *r, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                           uint16_t dport, uint8_t ipv, uint16_t vlan, const TEnc *enc,
                           uint8_t side) noexcept nogil:
        memset(r, 0, sizeof(TlsRecord))
        memcpy(&r.enc, enc, sizeof(TEnc))
        cdef int alen = 4 if ipv == 4 else 16
        if side == 1:
            memcpy(r.client_ip, src, alen)
            memcpy(r.server_ip, dst, alen)
            r.client_port = sport
            r.server_port = dport
            r.has_ch = 1
        else:
            memcpy(r.client_ip, dst, alen)
            memcpy(r.server_ip, src, alen)
            r.client_port = dport
            r.server_port = sport
            r.has_sh = 1
        r.ip_version = ipv
        r.vlan = vlan
        r.ch.ts_ns = r.sh.ts_ns = INT64_MIN
        r.ch.pkt = r.sh.pkt = UINT64_MAX

    cdef int _reasm_fail(self, int32_t i, uint8_t reason) except -1 nogil:
        """Emit the record of a split hello that will not complete, and drop it. A stream that
        never showed a hello's type (started by a 1-5 byte segment) leaves without a record."""
        cdef Reasm *e = &self.rpool[i]
        cdef TlsRecord r
        if e.hs.hs_type == 0:
            self._runlink(i)
            return 0
        self._side_record(&r, e.src, e.sport, e.dst, e.dport, e.ipv, e.vlan, &e.enc, e.hs.hs_type)
        if e.hs.hs_type == 1:
            r.ch.ts_ns = e.ts
            r.ch.pkt = e.pkt
            r.ch.ack = e.ack
            r.ch.segments = e.hs.segs
            r.ch.status = TLS_INCOMPLETE
        else:
            r.sh.ts_ns = e.ts
            r.sh.pkt = e.pkt
            r.sh.seq = e.seq
            r.sh.segments = e.hs.segs
            r.sh.status = TLS_INCOMPLETE
        self._runlink(i)
        if reason == TR_INCOMPLETE:
            self.cnt[<int>TC_INCOMPLETE] += 1
        elif reason == TR_TOO_LONG:
            self.cnt[<int>TC_TOO_LONG] += 1
        elif reason == TR_MALFORMED:
            self.cnt[<int>TC_MALFORMED] += 1
        self._emit(&r, reason)
        return 0

    cdef int _rstart(self, L34 *l, const uint8_t *p, uint32_t n, uint32_t off, int64_t ts,
                     uint64_t pkt) except -1 nogil:
        """Start reassembling the hello whose first record is at p[off] (ext/tls/hellostream.h
        hs_start); p[0:n] is the whole captured payload."""
        cdef int32_t i, nc, k
        cdef uint32_t got
        cdef Reasm *q
        cdef Reasm *e
        cdef uint32_t c
        if self.nreasm >= self.max_reassembly:
            self.cnt[<int>TC_REASM_CAP_EVICTED] += 1
            self._reasm_fail(self.rage_head, TR_REASM_CAP)
        if self.rfree_head == -1:
            nc = self.rpool_cap * 2 if self.rpool_cap else 16
            if nc > self.max_reassembly:
                nc = <int32_t>self.max_reassembly
            q = <Reasm *>realloc(self.rpool, nc * sizeof(Reasm))
            if q == NULL:
                with gil:
                    raise MemoryError()
            self.rpool = q
            for k in range(self.rpool_cap, nc):
                self.rpool[k].buf = NULL
                self.rpool[k].next = -1 if k == self.rpool_cap else k - 1
            self.rfree_head = nc - 1
            self.rpool_cap = nc
        i = self.rfree_head
        e = &self.rpool[i]
        self.rfree_head = e.next
        if e.buf == NULL:
            e.buf = <uint8_t *>malloc(HS_STREAM_CAP)
            if e.buf == NULL:
                with gil:
                    raise MemoryError()
        memset(e.src, 0, 16)
        memset(e.dst, 0, 16)
        memcpy(e.src, l.src, 4 if l.ip_version == 4 else 16)
        memcpy(e.dst, l.dst, 4 if l.ip_version == 4 else 16)
        e.sport = l.src_port
        e.dport = l.dst_port
        e.vlan = l.vlan
        _enc_of(&e.enc, l)
        e.ipv = l.ip_version
        e.seq = l.seq
        e.ack = l.ack
        e.ts = ts
        e.pkt = pkt
        e.stamp = self.now
        c = self._rcell(l.src, l.src_port, l.dst, l.dst_port, l.ip_version)
        e.cell = c
        e.next = self.rcells[c]
        self.rcells[c] = i
        e.age_prev = self.rage_tail
        e.age_next = -1
        if self.rage_tail != -1:
            self.rpool[self.rage_tail].age_next = i
        else:
            self.rage_head = i
        self.rage_tail = i
        self.nreasm += 1
        self.cnt[<int>TC_REASM_STARTED] += 1
        if <uint64_t>self.nreasm > self.cnt[<int>TC_PEAK_REASM]:
            self.cnt[<int>TC_PEAK_REASM] = <uint64_t>self.nreasm
        return self._rresult(i, hs_start(&e.hs, e.buf, l.seq, l.payload_len, p, n, off,
                                         self.scratch, &got), got)

    cdef int _rresult(self, int32_t i, int res, uint32_t got) except -1 nogil:
        """What a split hello's stream said about its latest segment (ext/tls/hellostream.h):
        wait, complete it as a hello, or end it with its reason."""
        cdef Reasm *e = &self.rpool[i]
        cdef tls_hello h
        if res == HS_MORE:
            return 0
        if res == HS_WHOLE:
            if tls_parse_hello(self.scratch, got, &h) == TLS_OK:
                self._hello(self.scratch, &h, e.src, e.sport, e.dst, e.dport, e.ipv, e.vlan,
                            &e.enc, e.ts, e.pkt, e.seq, e.ack, e.hs.segs)
                self._runlink(i)
                return 0
            return self._reasm_fail(i, TR_MALFORMED)
        if res == HS_NOT_HELLO:
            self._runlink(i)                        # no hello was there: no record
            return 0
        if res == HS_TOO_LONG:
            return self._reasm_fail(i, TR_TOO_LONG)
        if res == HS_CUT:
            return self._reasm_fail(i, TR_INCOMPLETE)
        return self._reasm_fail(i, TR_MALFORMED)

    # ---- QUIC Initials ----------------------------------------------------------------------
    cdef uint32_t _qcell(self, const uint8_t *a, uint16_t ap, const uint8_t *b, uint16_t bp,
                         uint8_t ipv) noexcept nogil:
        """The index cell of a connection's endpoint pair, the same for both directions."""
        cdef uint32_t h = ((fold_ip(a, ipv) * 2654435761u) ^ ap) * 2246822519u
        h += ((fold_ip(b, ipv) * 2654435761u) ^ bp) * 2246822519u
        h ^= h >> 15
        h *= 2654435761u
        h ^= h >> 13
        return h & (self.nqcells - 1)

    cdef int32_t _qfind(self, L34 *l, bint *from_client) noexcept nogil:
        # at most one used slot holds a given endpoint pair (either direction): _qnew is called
        # only when none does, or after the one that did was dropped
        cdef int32_t i
        cdef QConn *c
        cdef int alen = 4 if l.ip_version == 4 else 16
        i = self.qcells[self._qcell(l.src, l.src_port, l.dst, l.dst_port, l.ip_version)]
        while i != -1:
            c = &self.q[i]
            if c.ipv == l.ip_version:
                if (c.cport == l.src_port and c.sport == l.dst_port and memcmp(c.cli, l.src, alen) == 0
                        and memcmp(c.srv, l.dst, alen) == 0):
                    from_client[0] = True
                    return i
                if (c.sport == l.src_port and c.cport == l.dst_port and memcmp(c.srv, l.src, alen) == 0
                        and memcmp(c.cli, l.dst, alen) == 0):
                    from_client[0] = False
                    return i
            i = self.qnext[i]
        return -1

    cdef int _qfinish_side(self, QConn *c, bint client) except -1 nogil:
        """The side's hello is whole (or will never be): parse it and offer it for pairing."""
        cdef QSide *q = &c.c if client else &c.s
        cdef uint32_t n = quic_crypto_whole(q.buf, q.have, TLS_HELLO_CAP, q.base), b = q.base, key
        cdef uint16_t packets = q.packets
        cdef tls_hello h
        cdef int st
        if q.done:
            return 0
        if n == 0xFFFFFFFFu:
            q.done = 1
            self.cnt[<int>TC_TOO_LONG] += 1
            return 0
        if n == 0:
            return 0
        # the next message (a second ClientHello after a HelloRetryRequest, the ServerHello
        # after it) continues the same CRYPTO stream
        q.base = b + n
        q.packets = 0
        q.hellos += 1
        st = tls_parse_hello(q.buf + b, n, &h)
        if st != TLS_OK or h.hs_type != (1 if client else 2):
            self.cnt[<int>TC_MALFORMED] += 1
            return 0
        key = c.key + q.hellos          # the k-th ClientHello pairs with the k-th ServerHello
        if client:
            return self._hello(q.buf + b, &h, c.cli, c.cport, c.srv, c.sport, c.ipv, c.vlan, &c.enc, q.ts,
                               q.pkt, key, key, packets, 1)
        return self._hello(q.buf + b, &h, c.srv, c.sport, c.cli, c.cport, c.ipv, c.vlan, &c.enc, q.ts,
                           q.pkt, key, key, packets, 1)

    cdef int _qdrop(self, int32_t i, bint timeout) except -1 nogil:
        cdef QConn *c = &self.q[i]
        cdef int32_t *pp = &self.qcells[self.qcellof[i]]
        if timeout and not (c.c.hellos and c.s.hellos):
            self.cnt[<int>TC_QUIC_TIMEOUT] += 1
        while pp[0] != i:
            pp = &self.qnext[pp[0]]
        pp[0] = self.qnext[i]
        self.qused[i] = 0
        self.nq -= 1
        return 0

    cdef int32_t _qnew(self, L34 *l, const quic_long_hdr_t *h, const uint8_t *pkt) except -2 nogil:
        cdef int32_t i, oldest = -1
        cdef QConn *c
        cdef uint32_t k, key = 2166136261u
        cdef uint32_t cell
        for i in range(self.max_quic):
            if not self.qused[i]:
                break
            if oldest == -1 or self.qstamp[i] < self.qstamp[oldest]:
                oldest = i
        else:
            i = oldest
            if not (self.q[i].c.hellos and self.q[i].s.hellos):
                self.cnt[<int>TC_QUIC_EVICTED] += 1      # evicted before both hellos were seen
            self._qdrop(i, False)
        c = &self.q[i]
        # zeroed: everything but the two CRYPTO buffers (read only where `have` marks bytes)
        memset(c, 0, <size_t>(<char *>&c.c.buf[0] - <char *>c))
        memset(&c.c.have[0], 0, <size_t>(<char *>&c.s.buf[0] - <char *>&c.c.have[0]))
        memset(&c.s.have[0], 0, sizeof(QConn) - <size_t>(<char *>&c.s.have[0] - <char *>c))
        self.qused[i] = 1
        cell = self._qcell(l.src, l.src_port, l.dst, l.dst_port, l.ip_version)
        self.qcellof[i] = cell
        self.qnext[i] = self.qcells[cell]
        self.qcells[cell] = i
        self.nq += 1
        memcpy(c.cli, l.src, 4 if l.ip_version == 4 else 16)
        memcpy(c.srv, l.dst, 4 if l.ip_version == 4 else 16)
        c.cport = l.src_port
        c.sport = l.dst_port
        c.ipv = l.ip_version
        c.vlan = l.vlan
        _enc_of(&c.enc, l)
        c.version = h.version
        c.odcid_len = h.dcid_len
        memcpy(c.odcid, pkt + h.dcid_off, h.dcid_len)
        for k in range(h.dcid_len):
            key = (key ^ c.odcid[k]) * 16777619u
        c.key = key
        self.qstamp[i] = self.now
        if quic_initial_keys(h.version, c.odcid, c.odcid_len, &c.ck, &c.sk) != QUIC_OK:
            self._qdrop(i, False)
            return -1
        return i

    cdef int _quic(self, const uint8_t *p, L34 *l, int64_t ts, uint64_t pktno) except -1 nogil:
        """A MSG_QUIC message: the UDP datagram p[l.payload_off:] starts with a long header."""
        cdef const uint8_t *d
        cdef size_t n, off = 0, hl = 0, pl = 0, fo
        cdef quic_long_hdr_t h
        cdef quic_keys_t tmpc
        cdef uint64_t pn
        cdef int r, rc, fr, nf
        cdef int32_t ci
        cdef bint from_client = True, got
        cdef QConn *c
        cdef QSide *q
        d = p + l.payload_off
        n = l.payload_caplen
        if n < 7 or not (d[0] & 0x80):
            return 0
        if not self.has_now or ts > self.now:
            self.now = ts
            self.has_now = True
        while off < n:
            r = quic_parse_long(d + off, n - off, &h)
            if r == QUIC_E_NOT_LONG:
                return 0
            if r == QUIC_E_VERSION:
                if off == 0:
                    self.cnt[<int>TC_QUIC_OTHER_VERSION] += 1
                return 0
            if r != QUIC_OK:
                if off == 0:
                    self.cnt[<int>TC_QUIC_MALFORMED] += 1
                return 0
            if h.type == QUIC_PT_VERSION_NEG or h.type == QUIC_PT_RETRY:
                return 0
            if h.type != QUIC_PT_INITIAL:
                off += h.end                # h.end is relative to the packet at d + off
                continue
            if h.length > 65536:
                self.cnt[<int>TC_QUIC_MALFORMED] += 1
                return 0
            ci = self._qfind(l, &from_client)
            if ci < 0:
                ci = self._qnew(l, &h, d + off)       # the first Initial seen: the client's
                from_client = True
                if ci < 0:
                    self.cnt[<int>TC_QUIC_MALFORMED] += 1
                    return 0
            c = &self.q[ci]
            rc = quic_open_packet(d + off, &h, &c.ck if from_client else &c.sk, self.qhdr, &hl,
                                  self.qplain, &pl, &pn)
            if rc == QUIC_E_DECRYPT and from_client and (
                    h.dcid_len != c.odcid_len or memcmp(d + off + h.dcid_off, c.odcid, h.dcid_len) != 0):
                # a new client DCID (after Retry, or a new connection on the same ports): keys
                # from this packet's DCID, when they open it
                if quic_initial_keys(h.version, d + off + h.dcid_off, h.dcid_len, &tmpc, NULL) == QUIC_OK and \
                        quic_open_packet(d + off, &h, &tmpc, self.qhdr, &hl, self.qplain, &pl, &pn) == QUIC_OK:
                    self._qdrop(ci, True)
                    ci = self._qnew(l, &h, d + off)
                    if ci < 0:
                        return 0
                    c = &self.q[ci]
                    rc = quic_open_packet(d + off, &h, &c.ck, self.qhdr, &hl, self.qplain, &pl, &pn)
            if rc != QUIC_OK:
                self.cnt[<int>(TC_QUIC_UNDECRYPTABLE if rc == QUIC_E_DECRYPT else TC_QUIC_MALFORMED)] += 1
                off += h.end                # h.end is relative to the packet at d + off
                continue
            self.cnt[<int>TC_QUIC_INITIAL] += 1
            self.qstamp[ci] = self.now
            q = &c.c if from_client else &c.s
            got = False
            if not q.done:
                # the CRYPTO frames up to the end, a CONNECTION_CLOSE or another frame type, or
                # a bad frame (quic_initial.h: the one gatherer of the TLS stage and the filter)
                fr = quic_crypto_frames(self.qplain, pl, TLS_HELLO_CAP, self.qframes, QUIC_MAX_FRAMES, &nf, &fo)
                quic_frames_put(q.buf, q.have, self.qplain, self.qframes, nf)
                got = nf > 0
                if fr == QF_BEYOND:
                    self.cnt[<int>TC_QUIC_CRYPTO_BEYOND] += 1
                    q.done = 1                           # given up: no hello this side
                elif fr == QF_BAD_ACK or fr == QF_BAD_LENGTH:
                    self.cnt[<int>TC_QUIC_MALFORMED] += 1
            if got:
                if q.packets == 0:
                    q.ts = ts
                    q.pkt = pktno
                q.packets += 1
                while not q.done and quic_crypto_whole(q.buf, q.have, TLS_HELLO_CAP, q.base):
                    self._qfinish_side(c, from_client)
            off += h.end                # h.end is relative to the packet at d + off
        return 0

    cdef int _qgc(self, bint all_) except -1 nogil:
        cdef int32_t i
        cdef int64_t limit = self.now - self.gc_timeout_ns
        if self.nq == 0:
            return 0
        for i in range(self.max_quic):
            if self.qused[i] and (all_ or self.qstamp[i] < limit):
                self._qdrop(i, True)
        return 0

    # ---- one hello -----------------------------------------------------------------------
    cdef int _hello(self, const uint8_t *msg, tls_hello *h, const uint8_t *src, uint16_t sport,
                    const uint8_t *dst, uint16_t dport, uint8_t ipv, uint16_t vlan,
                    const TEnc *enc, int64_t ts, uint64_t pkt, uint32_t seq, uint32_t ack,
                    uint16_t segs, uint8_t transport=0) except -1 nogil:
        """A parsed hello. TCP: the pairing key is the ClientHello's ACK / the ServerHello's
        SEQ (Eq. 2). QUIC (transport 1): seq and ack both carry a number derived from the
        connection's original Destination Connection ID, so the two hellos pair by connection."""
        cdef TlsRecord r
        cdef uint16_t ks[64]
        cdef uint32_t nk, k, o, jl
        cdef char *t
        cdef ChPart *c
        cdef ShPart *s
        self._side_record(&r, src, sport, dst, dport, ipv, vlan, enc, h.hs_type)
        r.transport = transport
        if segs > 1:
            self.cnt[<int>TC_SPLIT_HELLO] += 1
        if h.hs_type == 1:
            self.cnt[<int>TC_CLIENT_HELLO] += 1
            if self._repeated(&r, 1, ack):
                return 0
            c = &r.ch
            c.ts_ns = ts
            c.pkt = pkt
            c.ack = ack
            c.hs_len = h.hs_len
            c.legacy_version = h.legacy_version
            c.version = h.version
            c.flags = h.flags
            c.segments = segs
            c.n_ciphers = <uint16_t>(h.ciphers.len // (3 if h.flags & TLSF_SSLV2 else 2))
            c.n_exts = h.n_exts
            c.status = TLS_OK
            # the text fields into the scratch, one after another (CT_*), each to its width
            t = self.htext
            c.text = t
            c.tl[<int>CT_SNI] = <uint16_t>_text(msg + h.sni.off, h.sni.len, t, 0, W_SNI, &c.clipped)
            t += c.tl[<int>CT_SNI]
            c.tl[<int>CT_ALPN] = <uint16_t>_alpn_text(msg, h.alpn, t, W_ALPN, &c.clipped)
            t += c.tl[<int>CT_ALPN]
            c.tl[<int>CT_VERS] = <uint16_t>_hex_list(msg, h.versions, 2, t, W_VERS, &c.clipped)
            t += c.tl[<int>CT_VERS]
            c.tl[<int>CT_CIPHERS] = <uint16_t>_hex_list(msg, h.ciphers, 3 if h.flags & TLSF_SSLV2 else 2,
                                                        t, W_CIPHERS, &c.clipped)
            t += c.tl[<int>CT_CIPHERS]
            c.tl[<int>CT_EXTS] = <uint16_t>_ext_text(msg, h, t, W_EXTS, &c.clipped)
            t += c.tl[<int>CT_EXTS]
            c.tl[<int>CT_GROUPS] = <uint16_t>_hex_list(msg, h.groups, 2, t, W_GROUPS, &c.clipped)
            t += c.tl[<int>CT_GROUPS]
            nk = tls_key_share_groups(msg, h, ks, 64)
            o = 0
            for k in range(nk):
                if o + 8 >= W_KS:
                    c.clipped = 1
                    break
                if k:
                    t[o] = 44
                    o += 1
                _hex16(ks[k], t + o)
                o += 6
            t[o] = 0
            c.tl[<int>CT_KS] = <uint16_t>o
            jl = tls_ja3_string(msg, h, self.ja3buf, JA3_CAP)
            if jl:
                tls_md5_hex_m(self.memo, self.ja3buf, jl, c.ja3)
            if not tls_ja4_m(msg, h, 113 if transport else 116, self.s16, self.text, 6 * 32768 + 16,
                             c.ja4, NULL, 0, self.memo):
                c.ja4[0] = 0
            return self._offer(&r, 1, ack)
        self.cnt[<int>TC_SERVER_HELLO] += 1
        if h.flags & TLSF_HRR:
            self.cnt[<int>TC_HRR] += 1
        if self._repeated(&r, 2, seq):
            return 0
        s = &r.sh
        s.ts_ns = ts
        s.pkt = pkt
        s.seq = seq
        s.hs_len = h.hs_len
        s.legacy_version = h.legacy_version
        s.version = h.version
        s.cipher = h.cipher
        s.group = <uint16_t>tls_be16(msg + h.key_share.off) if h.key_share.len >= 2 else 0
        s.flags = h.flags
        s.segments = segs
        s.status = TLS_OK
        s.text = self.htext
        s.tl[<int>ST_ALPN] = <uint16_t>_alpn_text(msg, h.alpn, self.htext, W_SALPN, &s.clipped)
        s.tl[<int>ST_EXTS] = <uint16_t>_ext_text(msg, h, self.htext + s.tl[<int>ST_ALPN], W_SEXTS,
                                                 &s.clipped)
        jl = tls_ja3_string(msg, h, self.ja3buf, JA3_CAP)
        if jl:
            tls_md5_hex_m(self.memo, self.ja3buf, jl, s.ja3s)
        return self._offer(&r, 2, seq)

    cdef int _bad(self, int status, int hs_type, const uint8_t *src, uint16_t sport,
                  const uint8_t *dst, uint16_t dport, uint8_t ipv, uint16_t vlan, const TEnc *enc,
                  int64_t ts, uint64_t pkt, uint32_t seq, uint32_t ack, uint16_t segs,
                  uint32_t hs_len) except -1 nogil:
        """A hello that cannot be parsed: a record with the reason, counted."""
        cdef TlsRecord r
        cdef uint8_t reason
        self._side_record(&r, src, sport, dst, dport, ipv, vlan, enc, <uint8_t>hs_type)
        if status == TLS_TOO_LONG:
            reason = TR_TOO_LONG
            self.cnt[<int>TC_TOO_LONG] += 1
        elif status == TLS_INCOMPLETE:
            reason = TR_INCOMPLETE
            self.cnt[<int>TC_INCOMPLETE] += 1
        else:
            reason = TR_MALFORMED
            self.cnt[<int>TC_MALFORMED] += 1
        if hs_type == 1:
            r.ch.ts_ns = ts; r.ch.pkt = pkt; r.ch.ack = ack; r.ch.segments = segs
            r.ch.status = <uint8_t>status; r.ch.hs_len = hs_len
        else:
            r.sh.ts_ns = ts; r.sh.pkt = pkt; r.sh.seq = seq; r.sh.segments = segs
            r.sh.status = <uint8_t>status; r.sh.hs_len = hs_len
        return self._emit(&r, reason)

    cdef int _gc(self) except -1 nogil:
        cdef int64_t limit = self.now - self.gc_timeout_ns
        cdef int32_t j = pt_oldest(&self.ix)
        while j != -1 and self.pool[j].links.stamp < limit:
            self._evict_head(TR_GC)
            j = pt_oldest(&self.ix)
        while self.rage_head != -1 and self.rpool[self.rage_head].stamp < limit:
            self._reasm_fail(self.rage_head, TR_INCOMPLETE)
        return 0

    cdef int _tcp(self, const uint8_t *p, L34 *l, int64_t ts, uint64_t pkt) except -1 nogil:
        """A MSG_TLS message: a TCP payload that starts a hello or continues a watched flow."""
        cdef int t, st, res
        cdef int32_t ri
        cdef Reasm *e
        cdef uint32_t off, n, got
        cdef tls_hello h
        cdef const uint8_t *msg
        cdef const uint8_t *pl
        cdef TEnc enc
        self.cnt[<int>TC_TCP_MESSAGES] += 1
        if not self.has_now or ts > self.now:
            self.now = ts
            self.has_now = True
        pl = p + l.payload_off
        n = l.payload_caplen
        if self.nreasm > 0:
            ri = self._rfind(l)
            if ri >= 0:
                # the stream's rules are ext/tls/hellostream.h's (shared with the URL filter)
                res = hs_offer(&self.rpool[ri].hs, l.seq, l.payload_len, pl, n, self.scratch, &got)
                if res == HS_RETRANSMISSION:
                    self.cnt[<int>TC_REASM_RETRANS] += 1
                    return 0
                if res != HS_GAP:
                    return self._rresult(ri, res, got)
                self.cnt[<int>TC_REASM_GAP] += 1
                self._reasm_fail(ri, TR_INCOMPLETE)
                # fall through: this segment may itself start a hello
        off = tls_hello_start(pl, n, &t)
        if t == 0:
            if n == l.payload_len and hs_may_start(pl, n):
                return self._rstart(l, pl, n, 0, ts, pkt)   # the record header cut: type unknown yet
            return 0
        _enc_of(&enc, l)
        st = tls_parse_payload(pl, n, self.scratch, TLS_HELLO_CAP, &h, &msg)
        if off > 0 and (st == TLS_OK or (st == TLS_INCOMPLETE and n == l.payload_len)):
            self.cnt[<int>TC_AFTER_RECORDS] += 1
        if st == TLS_OK:
            if h.flags & TLSF_SSLV2:
                self.cnt[<int>TC_SSLV2_HELLO] += 1
            return self._hello(msg, &h, l.src, l.src_port, l.dst, l.dst_port, l.ip_version, l.vlan,
                               &enc, ts, pkt, l.seq, l.ack, 1)
        if st == TLS_INCOMPLETE and n == l.payload_len and not (h.flags & TLSF_SSLV2):
            # also after other whole records (a TLS 1.3 client's ChangeCipherSpec before its
            # second ClientHello, a server's alert before its ServerHello); an SSLv2-format
            # ClientHello is one record of a few hundred bytes and is not reassembled
            return self._rstart(l, pl, n, off, ts, pkt)
        if off > 0:
            # after ChangeCipherSpec only a TLS 1.3 (compatibility mode) hello is plaintext;
            # anything else after skipped records is an encrypted record: not a hello, no record
            self.cnt[<int>TC_NOT_HELLO_AFTER_CCS] += 1
            return 0
        return self._bad(st, t, l.src, l.src_port, l.dst, l.dst_port, l.ip_version, l.vlan, &enc, ts, pkt,
                         l.seq, l.ack, 1, h.hs_len)

    # ---- Python entry points ---------------------------------------------------------------
    @property
    def watch(self):
        """The watch list (ext/tls/tls.pxd TlsWatch) as a capsule, for dissect_batch(tls_watch=)."""
        return self._watch_capsule

    def feed(self, packets, const uint8_t[::1] data):
        """Process one packet batch (PACKET_DTYPE array + its byte buffer): the dissector's walk
        finds this stage's messages (webtap._ext.dissect.dissect_batch with the watch list)."""
        tm = _dissect_batch(packets, data, None, self._watch_capsule)[2]
        self.feed_messages(tm, data, len(packets))

    def feed_messages(self, msgs, const uint8_t[::1] data, uint64_t npackets=0):
        """Process the TLS stage's messages of one packet batch (MSG_TLS / MSG_QUIC rows of a
        MESSAGE_DTYPE array from dissect_batch(..., tls_watch=self.watch), in packet order;
        their offsets index `data`), then rebuild the watch list for the next batch. The
        capture clock moves with the messages; the GC runs before each one."""
        arr = np.ascontiguousarray(np.asarray(msgs))
        if arr.dtype != _MESSAGE_DTYPE or arr.ndim != 1 or _MESSAGE_DTYPE.itemsize != sizeof(HttpMsg):
            raise TypeError("msgs must be a 1-D MESSAGE_DTYPE array")
        cdef cnp.ndarray ma = arr
        cdef const HttpMsg *m = <const HttpMsg *>cnp.PyArray_DATA(ma)
        cdef size_t n = ma.shape[0], i
        cdef uint64_t size = data.shape[0]
        cdef const uint8_t *base = &data[0] if size > 0 else NULL
        cdef L34 l
        with nogil:
            self.cnt[<int>TC_PACKETS] += npackets
            for i in range(n):
                if m[i].pkt_offset + m[i].payload_off + m[i].payload_caplen > size:
                    continue                      # not this batch's message
                if not self.has_now or m[i].ts_ns > self.now:
                    self.now = m[i].ts_ns
                    self.has_now = True
                if m[i].pkt_index >= self.next_pkt:
                    self.next_pkt = m[i].pkt_index + 1
                elif m[i].pkt_index + 1 < self.next_pkt:
                    self.frames_back = True
                self._gc()
                _l34_of(&m[i], &l)
                if m[i].kind == MSG_TLS:
                    self._tcp(base + m[i].pkt_offset, &l, m[i].ts_ns, m[i].pkt_index)
                elif m[i].kind == MSG_QUIC:
                    self._quic(base + m[i].pkt_offset, &l, m[i].ts_ns, m[i].pkt_index)
            self._gc()
            self._qgc(False)
            self._rebuild_watch()

    cdef void _rebuild_watch(self) noexcept nogil:
        """After a batch: the flows being reassembled now, published to the walk (which may be
        batches ahead: ext/tls/tlswatch.h)."""
        cdef int32_t j = self.rage_head
        cdef Reasm *e
        tls_watch_publish_begin(self.watch_)
        while j != -1:
            e = &self.rpool[j]
            tls_watch_publish_add(self.watch_, tls_flow_hash(e.src, e.sport, e.dst, e.dport, e.ipv))
            j = e.age_next
        tls_watch_publish_end(self.watch_)

    def flush(self):
        """End of input: everything still waiting leaves as unmatched (reason 'end'), split
        hellos as 'incomplete'."""
        with nogil:
            self._qgc(True)
            while self.rage_head != -1:
                self._reasm_fail(self.rage_head, TR_INCOMPLETE)
            while pt_oldest(&self.ix) != -1:
                self._evict_head(TR_END)

    def take(self, bint ordered=False, before=None, size_t min_rows=0):
        """The records emitted so far (then cleared): (numeric rows as a uint8 buffer of
        sizeof(TlsOut) rows, {column: (offsets int32[n + 1], data)} of the text and list
        columns). Text columns: data is the UTF-8 bytes; list<string> columns: (list offsets,
        item offsets, bytes); list<uint16> columns: (list offsets, values uint16).

        Rows in emit order, or with ordered=True in frame order (the order
        webtap.records.tls.sorted_table gives: first frame, the ClientHello's else the
        ServerHello's, then the ServerHello's frame with a missing one first; ties in emit
        order). The rows are put in order here, in one copy from the table's buffers into the
        arrays handed out, instead of a second gather of every column in numpy after the take
        (the end of a --tls-out run: 25 ms and ~20 MB of temporary arrays on the TLS bench
        trace).

        before (a packet index, TlsTable.ready_before): only the records whose first frame
        (0-based) is below it, in frame order (ordered implied); the others stay in the table in
        their emit order, and a later take sorts them with the records emitted since as if none
        had been taken (ties: emit order). None when fewer than min_rows are below it (nothing
        taken then)."""
        cdef size_t n = self.nrec, nb, k, i, nk = 0, nrest = 0
        cdef uint32_t *perm = NULL
        cdef uint32_t *rest = NULL
        cdef TlsKey *keys
        cdef const TlsOut *o
        cdef uint64_t bound = 0xFFFFFFFFFFFFFFFFu, first
        cdef bint some = before is not None and n > 0
        if some:
            bound = <uint64_t>max(0, min(int(before), 0xFFFFFFFFFFFFFFFF))
            ordered = True
            with nogil:
                for i in range(n):
                    o = &self.recs[i]
                    if (o.ch_pkt if o.has_ch else o.sh_pkt) < bound:
                        nk += 1
            if nk < min_rows or (nk == 0 and min_rows > 0):
                return None
            some = nk < n
        if not some:
            nk = n
        nb = nk * sizeof(TlsOut)
        out = np.empty(nb, dtype=np.uint8)
        cdef uint8_t[::1] ov = out
        try:
            if ordered and (n > 1 or some):
                keys = <TlsKey *>malloc((nk if nk else 1) * sizeof(TlsKey))
                perm = <uint32_t *>malloc((nk if nk else 1) * sizeof(uint32_t))
                if some:
                    rest = <uint32_t *>malloc((n - nk) * sizeof(uint32_t))
                if keys == NULL or perm == NULL or (some and rest == NULL):
                    free(keys)
                    free(rest)
                    raise MemoryError()
                with nogil:
                    k = 0
                    for i in range(n):
                        o = &self.recs[i]
                        first = o.ch_pkt if o.has_ch else o.sh_pkt
                        if some and first >= bound:
                            rest[nrest] = <uint32_t>i      # stays, in emit order
                            nrest += 1
                            continue
                        # the frames the columns hold (tshark's, 1-based): uint64 arithmetic as
                        # the numpy columns' (a side without its hello is never read here)
                        keys[k].first = first + 1
                        keys[k].second = o.sh_pkt + 1 if o.has_sh else 0
                        keys[k].i = <uint32_t>i
                        k += 1
                    qsort(keys, nk, sizeof(TlsKey), _key_cmp)
                    for i in range(nk):
                        perm[i] = keys[i].i
                free(keys)
            if nb:
                with nogil:
                    if perm == NULL:
                        memcpy(&ov[0], self.recs, nb)
                    else:
                        for i in range(nk):
                            memcpy(&ov[i * sizeof(TlsOut)], &self.recs[perm[i]], sizeof(TlsOut))
            cols = {}
            for k in range(<int>SC_N):
                cols[_STR_COLUMNS[k]] = _take_str(&self.scol[k], nk, perm)
                wt_strcol_keep(&self.scol[k], rest, nrest)
            for k in range(<int>LC_N):
                cols[_LIST_COLUMNS[k]] = _take_strlist(&self.lcol[k], nk, perm)
                wt_strlist_keep(&self.lcol[k], rest, nrest)
            for k in range(<int>UC_N):
                cols[_U16_COLUMNS[k]] = _take_u16list(&self.ucol[k], nk, perm)
                wt_u16list_keep(&self.ucol[k], rest, nrest)
            with nogil:
                for i in range(nrest):
                    if rest[i] != i:
                        memcpy(&self.recs[i], &self.recs[rest[i]], sizeof(TlsOut))
        finally:
            free(perm)
            free(rest)
        self.nrec = nrest
        return out, cols

    def counters(self):
        return {name: int(self.cnt[i]) for i, name in enumerate(_COUNTERS)}

    @property
    def pending(self):
        return int(self.ix.n)

    @property
    def ready_before(self):
        """A packet index (0-based) below which no record is still to come: every record emitted
        later starts (ClientHello, else ServerHello) at or after it, being either a hello waiting
        now (in the pending table, being reassembled, or gathered in a QUIC connection's CRYPTO
        streams) or one in a packet not fed yet. Records taken so far whose first frame is below
        it can be written out in frame order before the rest (httpanalyzer.tls.TlsRun streams
        them). A scan of the waiting state: call it per take, not per packet. 0 for good once the
        packet indexes went back (several traces in a row number their frames each from 1: a
        record of the next trace may sort before any already taken)."""
        cdef uint64_t b = self.next_pkt, f
        if self.frames_back:
            return 0
        cdef int32_t j
        cdef const Pend *e
        cdef const QConn *c
        with nogil:
            j = pt_oldest(&self.ix)          # the age list, oldest first
            while j != -1:
                e = &self.pool[j]
                f = e.r.ch.pkt if e.side == 1 else e.r.sh.pkt
                if f < b:
                    b = f
                j = e.links.age_next
            j = self.rage_head
            while j != -1:
                if self.rpool[j].pkt < b:
                    b = self.rpool[j].pkt
                j = self.rpool[j].age_next
            for j in range(self.max_quic):
                if self.qused[j]:
                    c = &self.q[j]
                    if c.c.packets and c.c.pkt < b:
                        b = c.c.pkt
                    if c.s.packets and c.s.pkt < b:
                        b = c.s.pkt
        return b

    @property
    def records_waiting(self):
        """Records emitted and not yet taken."""
        return int(self.nrec)

    @property
    def reassembling(self):
        return int(self.nreasm)
