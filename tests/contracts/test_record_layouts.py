"""Every record kind's NumPy mirror against its C struct, in one place: the size, and where the
C side reports them, every field's offset (a field moved in C and not in Python would read the
wrong bytes without any error)."""
from __future__ import annotations

import pytest

from webtap._ext import dissect as _dissect
from webtap._ext import exchange as _exchange
from webtap._ext import tls as _tls
from webtap._ext import urlmatch as _um
from webtap._ext.pairing import PairingTable
from webtap.records import exchange, http, message, tls, urlhit

KINDS = {
    # kind: (dtype, sizeof in C, {field: offset} from C or None)
    "packet": (message.PACKET_DTYPE, _dissect.sizeof_packet_ref, None),
    "message": (message.MESSAGE_DTYPE, _dissect.sizeof_http_msg, None),
    "http": (http.RECORD_DTYPE, PairingTable.record_size, PairingTable.record_layout),
    "tls": (tls.TLS_OUT_DTYPE, _tls.sizeof_tls_record, _tls.tls_out_layout),
    "conn_timing": (urlhit.CONN_DTYPE, _um.sizeof_conn_timing, None),
    "exchange": (exchange.EXCHANGE_RECORD_DTYPE, _exchange.sizeof_exchange_record, None),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_size_matches_c(kind):
    dtype, size, _ = KINDS[kind]
    assert dtype.itemsize == size()


@pytest.mark.parametrize("kind", sorted(k for k, v in KINDS.items() if v[2] is not None))
def test_offsets_match_c(kind):
    dtype, _, layout = KINDS[kind]
    c = layout()
    assert sorted(c) == sorted(n for n in dtype.names if not n.startswith("_"))
    assert {n: dtype.fields[n][1] for n in c} == c


def test_one_home_per_kind():
    """The schemas are defined in webtap.records and only re-exported elsewhere."""
    import httpanalyzer.tls
    import urlfilter.analyzer

    assert httpanalyzer.tls.SCHEMA is tls.SCHEMA
    assert urlfilter.analyzer.RECORD_SCHEMA is urlhit.RECORD_SCHEMA
    assert urlfilter.analyzer.CONN_DTYPE is urlhit.CONN_DTYPE
    assert httpanalyzer.tls.EXCHANGE_SCHEMA is exchange.EXCHANGE_SCHEMA
