"""Hypothesis strategies shared by the test suite (cf. pyarrow's tests/strategies.py)."""
from __future__ import annotations

from hypothesis import strategies as st

from tests.msgbuild import MsgBuilder

S = 1_000_000_000
T0 = 1_700_000_000 * S
CLIENTS = ["10.0.0.1", "10.0.0.2", "2001:db8::1"]
SERVERS = {"10.0.0.1": "10.9.9.9", "10.0.0.2": "10.9.9.9", "2001:db8::1": "2001:db8::80"}


@st.composite
def transactions(draw, max_txn=30, span_ns=50 * S):
    """A MsgBuilder holding HTTP transactions whose messages all fall within `span_ns` (less than
    the 60 s GC window): each has 1-2 request copies and 0-2 response copies (retransmissions),
    some with a 100 Continue before the final response (its SEQ then follows the 1xx),
    with ports and cells shared between transactions but distinct pairing keys (two transactions
    of one connection never wait on the same ACK unless pipelined, which is tested apart)."""
    b = MsgBuilder()
    n = draw(st.integers(1, max_txn))
    acks = draw(st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 3), min_size=n, max_size=n,
                         unique=True))
    for t in range(n):
        client = draw(st.sampled_from(CLIENTS))
        server = SERVERS[client]
        cport = draw(st.integers(1024, 1030))
        ack = acks[t]
        seq = draw(st.integers(0, 2**32 - 1))
        uri = f"/t{t}"
        for _ in range(draw(st.integers(1, 2))):
            b.req(T0 + draw(st.integers(0, span_ns)), client, cport, server, 80, seq, ack, uri=uri)
        status = draw(st.sampled_from([200, 204, 301, 404, 500]))
        final_seq = ack
        if draw(st.booleans()) and draw(st.booleans()):
            # an interim 100 Continue first: the final response starts where it ends
            i = b.resp(T0 + draw(st.integers(0, span_ns)), server, 80, client, cport, ack,
                       (seq + 50) % 2**32, status=100, reason="Continue")
            final_seq = (ack + b.rows[i]["payload_len"]) % 2**32
        for _ in range(draw(st.integers(0, 2))):
            b.resp(T0 + draw(st.integers(0, span_ns)), server, 80, client, cport, final_seq,
                   (seq + 50) % 2**32, status=status)
    return b
