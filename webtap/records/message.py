"""NumPy mirrors of the C structs that cross stage boundaries (ext/read/packet.pxd, ext/walk/message.pxd).

Each dtype here is the Python face of one C struct, field for field, as scikit-learn's NODE_DTYPE
mirrors its Node struct; tests/test_schema.py asserts that the sizes agree with sizeof() in C.
Column names carry units where they have one.
"""
from __future__ import annotations

import numpy as np

#: ext/read/packet.pxd PacketRef: one captured packet of a batch.
PACKET_DTYPE = np.dtype(
    [
        ("ts_ns", "<i8"),
        ("index", "<u8"),
        ("offset", "<u8"),
        ("caplen", "<u4"),
        ("wirelen", "<u4"),
        ("linktype", "<u2"),
        ("iface", "<u2"),
        ("flags", "<u4"),
    ],
    align=True,
)

SPAN_DTYPE = np.dtype([("off", "<u4"), ("len", "<u4")], align=True)

#: Names of the Span fields of HttpMsg, in struct order.
SPAN_FIELDS = ("method", "uri", "version", "host", "user_agent", "reason")

#: ext/walk/message.pxd HttpMsg: the first packet of one HTTP request or response.
MESSAGE_DTYPE = np.dtype(
    [
        ("ts_ns", "<i8"),
        ("pkt_index", "<u8"),
        ("pkt_offset", "<u8"),
        ("src_ip", "u1", (16,)),
        ("dst_ip", "u1", (16,)),
        ("seq", "<u4"),
        ("ack", "<u4"),
        ("src_port", "<u2"),
        ("dst_port", "<u2"),
        ("window", "<u2"),
        ("ip_off", "<u2"),
        ("tcp_off", "<u2"),
        ("vlan", "<u2"),
        ("payload_off", "<u4"),
        ("payload_caplen", "<u4"),
        ("payload_len", "<u4"),
    ]
    + [(name, SPAN_DTYPE) for name in SPAN_FIELDS]
    + [
        ("status", "<u2"),
        ("flags", "<u2"),
        ("linktype", "<u2"),
        ("kind", "u1"),
        ("method_id", "u1"),
        ("ip_version", "u1"),
        ("tcp_flags", "u1"),
        ("ttl", "u1"),
        ("_reserved", "u1"),
        # encapsulation (ext/walk/message.pxd, added at the end; docs/ACCURACY.md "Encapsulations")
        ("encap", "<u8"),
        ("outer_src", "u1", (16,)),
        ("outer_dst", "u1", (16,)),
        ("tunnel_id", "<u4"),
        ("outer_ip_version", "u1"),
        ("encap_depth", "u1"),
        ("seg_off", "<u2"),
    ],
    align=True,
)

#: ext/walk/message.pxd TcpEvent: one TCP segment of the walk (dissect(tcp_events=True).tcp_events is
#: a uint8 buffer of these; `.view(TCP_EVENT_DTYPE)` reads it). `window` is the TCP window field,
#: unscaled (issue 34's zero-window readers).
TCP_EVENT_DTYPE = np.dtype(
    [
        ("ts_ns", "<i8"),
        ("src", "u1", (16,)),
        ("dst", "u1", (16,)),
        ("seq", "<u4"),
        ("ack", "<u4"),
        ("payload_len", "<u4"),
        ("src_port", "<u2"),
        ("dst_port", "<u2"),
        ("tcp_flags", "u1"),
        ("ip_version", "u1"),
        ("window", "<u2"),
        ("_pad", "u1", (4,)),
        ("pkt_index", "<u8"),
        ("payload_at", "<u8"),
        ("payload_caplen", "<u4"),
        ("head", "u1", (8,)),
        ("_pad2", "<u4"),
    ],
    align=True,
)

#: ext/walk/l34.pxd EncapKind: ENCAP_NAMES[code] names one layer of HttpMsg.encap (one code per byte,
#: outermost in the lowest byte); the `encap` text column joins them with commas ("gre,eth").
ENCAP_NAMES = (
    None, "gre", "erspan", "eth", "vxlan", "geneve", "gtpu", "teredo", "ayiya",
    "4in4", "6in4", "4in6", "6in6", "pppoe", "mpls", "llc", "wlan", "ppp",
)

#: UDP tunnels a user may name extra ports for (webtap.dissect.set_tunnel_ports).
UDP_TUNNEL_KINDS = ("vxlan", "geneve", "gtpu", "teredo", "ayiya", "gre")

# ext/walk/message.pxd MsgKind
MSG_REQUEST = 1
MSG_RESPONSE = 2

# ext/walk/message.pxd MsgFlags
MSGF_URI_TRUNCATED = 1
MSGF_HEADERS_INCOMPLETE = 2
MSGF_PAYLOAD_TRUNCATED = 4
MSGF_HOST_REPEATED = 8
MSGF_LINE_TOO_LONG = 16
MSGF_BAD_VERSION = 32
MSGF_BAD_STATUS = 64
MSGF_MID_SEGMENT = 128
# evasion indicators of requests (issue 34; docs/ABUSE.md "Evasion flags")
MSGF_EV_HOST_MISMATCH = 256
MSGF_EV_DOUBLE_ENCODED = 512
MSGF_EV_LONG_REQUEST_LINE = 1024
MSGF_EV_LONG_HEADER_LINE = 2048
MSGF_EV_MANY_FIELDS = 4096
# the message follows a header block continued from an earlier segment (docs/ACCURACY.md "After a
# continued header block")
MSGF_AFTER_CONTINUATION = 8192

#: ext/walk/message.pxd MethodId: METHOD_NAMES[method_id] is the method token (None for METHOD_OTHER,
#: i.e. responses). Ids 1-9 are the enum's; the rest follow ext/walk/dissect.pyx's method table, which
#: a test checks against this tuple. Sources: RFC 9110 sec. 9, PATCH (RFC 5789), WebDAV (RFC 4918,
#: 3253, 3648, 3744, 4791, 5842, 4437) and the non-standard methods tshark 4.0 also recognises
#: (GENA NOTIFY/SUBSCRIBE/UNSUBSCRIBE, POLL, Exchange B*-methods, CCM_POST, MS-RPCH, MS-SSTP).
METHOD_NAMES = (
    None,
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "SEARCH",
    "VERSION-CONTROL", "REPORT", "CHECKOUT", "CHECKIN", "UNCHECKOUT", "MKWORKSPACE", "UPDATE",
    "LABEL", "MERGE", "BASELINE-CONTROL", "MKACTIVITY", "ORDERPATCH", "ACL", "MKCALENDAR",
    "BIND", "UNBIND", "REBIND", "MKREDIRECTREF", "UPDATEREDIRECTREF",
    "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "POLL", "BCOPY", "BMOVE", "BDELETE", "BPROPFIND",
    "BPROPPATCH", "CCM_POST", "RPC_CONNECT", "RPC_IN_DATA", "RPC_OUT_DATA", "SSTP_DUPLEX_POST",
    # the rest of IANA's HTTP Method Registry: QUERY (HTTP WG draft), LINK/UNLINK, PRI (RFC 9113)
    "QUERY", "LINK", "UNLINK", "PRI",
)

#: Methods tshark 4.0 (packet-http.c) does not recognise: webtap reports them, tshark does not.
METHODS_UNKNOWN_TO_TSHARK = frozenset(
    {"ORDERPATCH", "ACL", "MKCALENDAR", "BIND", "UNBIND", "REBIND", "MKREDIRECTREF", "UPDATEREDIRECTREF",
     "QUERY", "LINK", "UNLINK", "PRI"}
)

#: Methods tshark files under http.notification instead of http.request (UPnP GENA).
METHODS_TSHARK_NOTIFICATION = frozenset({"NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE"})

# ext/read/packet.pxd PacketFlags
PKTF_CAPLEN_GT_SNAPLEN = 1
PKTF_CAPLEN_GT_WIRELEN = 2

#: ext/walk/message.pxd DissectReason, in enum order: the keys of the dissector's counters.
DISSECT_REASONS = (
    "packets",
    "link_unsupported",
    "link_truncated",
    "not_ip",
    "ip_truncated",
    "ip_bad_header",
    "ip_fragment",
    "not_tcp",
    "tcp_truncated",
    "tcp_bad_offset",
    "no_payload",
    "not_http",
    "http_request",
    "http_response",
    "uri_truncated",
    "headers_incomplete",
    "line_too_long",
    "payload_truncated",
    # messages inside a segment (docs/ACCURACY.md "Messages inside a segment")
    "mid_segment_request",
    "mid_segment_response",
    "body_continues",
    "length_unknown",
    "rest_not_http",
    "request_line_split",
    # messages after a header block continued from an earlier segment (docs/ACCURACY.md "After a
    # continued header block")
    "after_continuation_request",
    "after_continuation_response",
    "continuation_unknown",
    # encapsulations: packets whose walk crossed each layer (ext/walk/l34.pxd), whatever their outcome
    "encap_too_deep",
) + tuple("encap_" + n for n in ENCAP_NAMES[1:])

#: ext/read/packet.pxd SourceReason, in enum order: the keys of the capture stage's counters.
SOURCE_REASONS = (
    "packets",
    "captured_bytes",
    "wire_bytes",
    "bpf_rejected",
    "caplen_gt_snaplen",
    "caplen_gt_wirelen",
    "bad_record",
    "skipped_bytes",
    "truncated",
    "unknown_blocks",
    "bad_interface",
    "sections",
    "interfaces",
)
