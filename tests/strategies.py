"""Hypothesis strategies shared by the tests (cf. pyarrow/tests/strategies.py)."""
from __future__ import annotations

from hypothesis import strategies as st

# A small alphabet so that random URLs share hosts, labels and path segments: prefixes,
# subdomains and near-misses ("ab" vs "a") happen often.
labels = st.sampled_from(["a", "b", "ab", "xn--bcher-kva", "10"])
hosts = st.lists(labels, min_size=1, max_size=4).map(".".join)
ports = st.sampled_from(["", "", "", ":80", ":8080", ":443"])
# "x" < "xy" < "xyz" nest without a boundary between them, so a query like /xyz/... meets
# listed prefixes that end inside its segment (they must not match: docs/urlfilter.md)
segments = st.sampled_from(["x", "y", "xy", "xyz", "x-y", ".", "..", "", "%78", "%2F", "Q"])
paths = st.lists(segments, max_size=4).map(lambda s: ("/" + "/".join(s)) if s else "")
queries = st.sampled_from(["", "", "?", "?q", "?q=1", "?q=/x"])
schemes = st.sampled_from(["", "", "http://", "https://", "HTTP://", "//"])
fragments = st.sampled_from(["", "", "#f"])


@st.composite
def urls(draw):
    host = draw(hosts)
    if draw(st.booleans()):
        host = host.upper()
    return draw(schemes) + host + draw(ports) + draw(paths) + draw(queries) + draw(fragments)


def is_boundary(q: bytes, b: int) -> bool:
    """Reference rule: is q[:b] a component prefix of the key q? (mirrors the module docstring;
    an IPv6 literal [...] is one label and the host ends after its ']', as webtap_host_len)"""
    host_end = len(q)
    if q[:1] == b"[":
        j = q.find(b"]")
        host_end = len(q) if j < 0 else j + 1
        if b < host_end:
            return False
    else:
        for i, c in enumerate(q):
            if c in b":/?":
                host_end = i
                break
    qpos = q.find(b"?", host_end)
    qpos = len(q) if qpos < 0 else qpos
    if b < host_end:
        return q[b:b + 1] == b"."
    if b == host_end:
        return True
    if b > qpos:
        return False
    return q[b:b + 1] == b"/" or b == qpos


def naive_prefix(keys, q: bytes):
    """The longest key that equals q or is a prefix of q on a boundary (None if none)."""
    best = None
    for k in keys:
        if k == q or (len(k) < len(q) and q.startswith(k) and is_boundary(q, len(k))):
            if best is None or len(k) > len(best):
                best = k
    return best


# ---- HTTP messages (pairing) -----------------------------------------------------

from tests.msgbuild import MsgBuilder  # noqa: E402

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
    # Every SEQ a response is awaited at: the requests' ACKs and, after a 1xx, where the final
    # response starts. Two transactions awaiting the same SEQ would be ambiguous (which one the
    # response answers depends on arrival order), so an interim that would collide is left out.
    awaited = set(acks)
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
            if final_seq in awaited:
                b.rows.pop(i)             # its bytes stay in the buffer, unreferenced
                final_seq = ack
            else:
                awaited.add(final_seq)
        for _ in range(draw(st.integers(0, 2))):
            b.resp(T0 + draw(st.integers(0, span_ns)), server, 80, client, cport, final_seq,
                   (seq + 50) % 2**32, status=status)
    return b
