"""The URL filter's records: one row per URL looked up (a GET's Host + URI, a TLS ClientHello's or
QUIC Initial's SNI) with the hit, the entry and the times, and the filter's connection timing rows
(`urlfilter timing`: ext/url/urlmatch.pxd ConnTiming, mirrored by CONN_DTYPE). Times in ns since the
Unix epoch (UTC), frame numbers tshark's (1-based)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["CONN_DTYPE", "RECORD_SCHEMA"]

#: ext/url/urlmatch.pxd ConnTiming
CONN_DTYPE = np.dtype(
    [
        ("client_ip", "u1", (16,)),
        ("server_ip", "u1", (16,)),
        ("client_port", "<u2"),
        ("server_port", "<u2"),
        ("ip_version", "u1"),
        ("state", "u1"),
        ("_pad", "<u2"),
        ("client_isn", "<u4"),
        ("server_isn", "<u4"),
        ("t_syn", "<i8"),
        ("t_synack", "<i8"),
        ("t_ack", "<i8"),
        ("t_req", "<i8"),
        ("t_resp", "<i8"),
        ("t_last", "<i8"),
    ],
    align=True,
)

#: One row per GET that reached the matcher. Times in ns; match_ns includes the tree search only
#: (the key is built in the extraction pass), forge_ns the FIN+RST pair (0 for misses).
RECORD_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),            # capture time of the request packet
        ("frame", pa.uint64()),           # its frame number in the trace (1-based, as tshark's)
        ("src_ip", pa.string()),          # client address
        ("src_port", pa.uint16()),
        ("dst_ip", pa.string()),          # server address
        ("dst_port", pa.uint16()),
        ("url", pa.string()),             # canonical form (ext/url/urlcanon.h) of Host + URI; tls/quic:
                                          # the SNI host, ":port" unless 443 or 80
        ("hit", pa.bool_()),              # matched an entry active at the time
        ("entry_id", pa.int32()),         # URL store id of the matched entry (0: miss; renumbered by a merge)
        ("entry", pa.string()),           # the entry's canonical URL (null: miss)
        ("category", pa.string()),        # the entry's category (null: miss / unknown)
        ("match_ns", pa.int64()),         # tree match time of this URL
        ("forge_ns", pa.int64()),         # time to forge the FIN + RST pair (hits)
        ("forged", pa.int8()),            # frames forged (2 for a TCP hit, 1 for QUIC, else 0)
        # issue 18: lookups from TLS ClientHellos and QUIC Initials beside the GETs
        ("proto", pa.string()),           # http | tls | quic
        ("sni", pa.string()),             # the ClientHello's server_name as sent (null: http)
        ("ech", pa.bool_()),              # the ClientHello carried ECH: the outer SNI was matched
        # issue 34: the policy (urlfilter.policy; docs/urlfilter.md "Rules across layers")
        ("rule", pa.int32()),             # first rule that matched (1-based position), 0: none
        ("decision", pa.string()),        # blacklist | exception (allow list) | rule_cut |
                                          # rule_allow; null: no list entry, no deciding rule
    ]
)
