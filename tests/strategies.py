"""Hypothesis strategies shared by the tests (cf. pyarrow/tests/strategies.py)."""
from hypothesis import strategies as st

# A small alphabet so that random URLs share hosts, labels and path segments: prefixes,
# subdomains and near-misses ("ab" vs "a") happen often.
labels = st.sampled_from(["a", "b", "ab", "xn--bcher-kva", "10"])
hosts = st.lists(labels, min_size=1, max_size=4).map(".".join)
ports = st.sampled_from(["", "", "", ":80", ":8080", ":443"])
segments = st.sampled_from(["x", "y", "xy", "x-y", ".", "..", "", "%78", "%2F", "Q"])
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
    """Reference rule: is q[:b] a component prefix of the key q? (mirrors the module docstring)"""
    host_end = len(q)
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
