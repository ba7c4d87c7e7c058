"""The compressed AVL tree against a naive model (hypothesis, stateful) and its edge cases."""
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from tests.strategies import naive_prefix, urls
from urlfilter.canon import canonicalize, to_key
from urlfilter.errors import InvalidUrl
from urlfilter.tree import MAX_URLS, TREE_NODE_DTYPE, UrlTree
from webtap._ext import avl


def test_node_dtype_mirrors_struct():
    assert TREE_NODE_DTYPE.itemsize == avl.sizeof_tree_node() == 8
    assert avl.HEADER.size == avl.sizeof_snapshot_header() == 64
    assert MAX_URLS == 2**28 - 1


def test_crud_basics():
    t = UrlTree()
    uid, created = t.insert("http://www.Example.com/a/b", category=3, period=2)
    assert created and uid == 1
    assert t.insert("www.example.com/a/b/") == (uid, False)
    assert t.get(uid) == "www.example.com/a/b"
    assert t.payload(uid) == (3, 2)
    assert t.find("https://www.example.com/a/b#x") == uid
    assert t.find("www.example.com/a") == 0
    assert t.match("www.example.com/a/b/c?d") == uid
    assert t.match("www.example.com/a/bc") == 0
    t.update(uid, category=5)
    assert t.payload(uid) == (5, 2)
    t.update(uid, url="other.org/z")
    assert t.get(uid) == "other.org/z" and t.payload(uid) == (5, 2)
    assert t.find("www.example.com/a/b") == 0 and t.find("other.org/z") == uid
    assert t.delete("other.org/z") == uid
    assert len(t) == 0 and t.get(uid) is None and t.match("other.org/z") == 0
    t.check()


def test_domain_entry_blocks_subdomains_only():
    t = UrlTree()
    d, _ = t.insert("evil.net")
    p, _ = t.insert("good.org/bad")
    assert t.match("evil.net") == d
    assert t.match("http://a.b.evil.net:8080/x?y") == d
    assert t.match("evil.net.example.com") == 0
    assert t.match("notevil.net") == 0
    assert t.match("good.org/bad/x") == p
    assert t.match("sub.good.org/bad") == 0      # URL entries do not cover subdomains
    assert t.match("good.org/badx") == 0
    assert t.match("good.org/bad?x=1") == p
    # longest entry wins
    q, _ = t.insert("a.evil.net/x")
    assert t.match("a.evil.net/x/y") == q and t.match("a.evil.net/y") == d


BOUNDARY_ENTRIES = ["a.com/ab", "a.com/abc", "b.com", "c.com/p", "c.com/q?x", "c.com/q?x/yz",
                    "d.com:8080", "e.com:808"]
# docs/urlfilter.md: the longest entry that is a prefix of the query on a component boundary
# ('.' in the host, end of host, '/' in the path, the first '?'); nothing inside the query.
BOUNDARY_WANT = {
    "a.com/abcd": None,            # a.com/abc and a.com/ab are prefixes, neither on a boundary
    "a.com/abd": None,
    "a.com/abc": "a.com/abc", "a.com/ab": "a.com/ab",
    "a.com/abc/d": "a.com/abc", "a.com/abc?d": "a.com/abc",
    "a.com/ab/x": "a.com/ab", "a.com/ab?x/abc": "a.com/ab", "a.com/ab/cd": "a.com/ab",
    "a.com/a": None, "a.com": None,
    "b.com": "b.com", "x.b.com": "b.com", "b.com:81/z": "b.com", "b.com/p/q": "b.com",
    "bb.com": None, "b.comx": None, "xb.com/": None,
    "c.com/p?x": "c.com/p", "c.com/pp": None, "c.com/p/": "c.com/p",
    "c.com/q?x": "c.com/q?x", "c.com/q?x/y": None, "c.com/q?x?y": None, "c.com/q?xy": None,
    "c.com/q": None, "c.com/q?x/yz": "c.com/q?x/yz",
    "c.com/q?x/yzw": None,         # c.com/q?x/yz is a prefix, c.com/q?x ends at a '/' in the query
    "c.com/q?x/yz/w": None,        # in the query nothing is a boundary, not even '/'
    "d.com:8080/x": "d.com:8080", "e.com:8080": None, "e.com:808/": "e.com:808", "d.com:8080?": "d.com:8080",
}


def test_prefix_match_only_on_component_boundaries():
    """Exact answers of the boundary rule (docs/urlfilter.md, ext/url/avl.pyx "Keys"), nested
    entries that end inside a path segment included: a.com/abcd must not hit a.com/ab nor
    a.com/abc (a false hit forges a RST against an innocent page). The single-query path
    (_boundary_at) and the batch path (_is_boundary), in a small tree and in a deep one."""
    for fillers in (0, 300):
        t = UrlTree()
        ids = {e: t.insert(e)[0] for e in BOUNDARY_ENTRIES}
        for k in range(fillers):
            t.insert(f"a.com/ab{k:03d}x/{k}")      # keys between a.com/ab and a.com/abc...
        want = {q: (ids[e] if e else 0) for q, e in BOUNDARY_WANT.items()}
        assert {q: t.match(q) for q in want} == want
        assert dict(zip(want, t.match_many(list(want)).tolist())) == want
        t.check()


def test_rekey_onto_existing_url_is_refused():
    t = UrlTree()
    a, _ = t.insert("a.com")
    t.insert("b.com")
    with pytest.raises(KeyError):
        t.update(a, url="b.com")
    assert t.get(a) == "a.com"
    t.check()


def test_garbage_and_huge_urls():
    t = UrlTree()
    for bad in ["", " ", "a b.com", "x\x00y.com", "a.com:99999", "exa*mple.com"]:
        with pytest.raises(InvalidUrl):
            t.insert(bad)
    big = "big.example/" + "a" * 65000
    uid, _ = t.insert(big)
    assert t.get(uid) == canonicalize(big)
    assert t.match(big + "/more") == uid
    with pytest.raises(InvalidUrl) as e:
        t.insert("big.example/" + "b" * 70000)
    assert e.value.reason == "too_long"
    # a huge query still matches its domain (queries have no length limit)
    t.insert("huge.example")
    assert t.match("http://huge.example/" + "z" * 200000) != 0
    assert len(t) == 2
    t.check()


def test_batch_matches_single_and_accepts_arrow_numpy_lists():
    t = UrlTree()
    entries = ["a.com", "b.org/x", "c.net/x/y?z", "d.io:8080"]
    for i, e in enumerate(entries):
        t.insert(e, category=i + 1)
    queries = ["http://www.a.com/", "b.org/x/1", "b.org/xx", "c.net/x/y?z", "c.net/x/y?zz",
               "d.io:8080/q", "d.io/q", "", "bad host", "A.COM."]
    want = [t.match(q) if q.strip() and " " not in q else None for q in queries]
    for form in (queries, np.array(queries, dtype=object), pa.array(queries),
                 pa.array(queries, type=pa.large_string()), pa.array([q.encode() for q in queries])):
        got = t.match_many(form)
        assert got.dtype == np.int32
        for g, w in zip(got.tolist(), want):
            assert g == w if w is not None else g < 0
    sliced = pa.array(queries).slice(1, 3)
    assert t.match_many(sliced).tolist() == [want[1], want[2], want[3]]
    cat, _ = t.payload_batch(t.match_many(queries))
    assert cat.tolist()[:2] == [1, 2]
    exact = t.match_many(queries, prefix=False)
    assert exact.tolist()[3] == t.find("c.net/x/y?z") and exact.tolist()[1] == 0


def test_insert_many_codes():
    t = UrlTree()
    ids, codes = t.insert_many(["a.com", "A.com", "", "b.com:http", "c.com/" + "x" * 70000], categories=[1, 2, 3, 4, 5])
    assert codes.tolist() == [0, 1, -1, -4, -6]
    assert ids.tolist()[:2] == [1, 1] and ids.tolist()[2:] == [0, 0, 0]
    assert t.payload(1) == (1, 0)


def test_many_inserts_deletes_compaction_and_ids_reuse():
    rng = np.random.default_rng(7)
    t = UrlTree()
    words = [f"h{i % 97}.com/p{i}/{'x' * int(rng.integers(0, 40))}" for i in range(20000)]
    ids, codes = t.insert_many(words)
    assert (codes == 0).all()
    t.check()
    gone = rng.choice(len(words), 15000, replace=False)
    for i in gone.tolist():
        assert t.delete(words[i]) == ids[i]
    t.check()
    st_ = t.stats()
    assert st_["dead_bytes"] < st_["compressed_url_bytes"] + (1 << 20) + 1
    t.compact()
    assert t.stats()["dead_bytes"] == 0
    t.check()
    keep = np.setdiff1d(np.arange(len(words)), gone)
    assert (t.match_many([words[i] for i in keep.tolist()]) == ids[keep]).all()
    nid, _ = t.insert("new.com")
    assert nid in set(ids[gone].tolist())       # freed ids are reused
    t.check()


def test_snapshot_round_trip(tmp_path):
    t = UrlTree()
    urls_ = [f"s{i}.example/{i % 13}/{i}" for i in range(3000)] + ["dom.example"]
    ids, _ = t.insert_many(urls_, categories=7)
    for u in urls_[:500]:
        t.delete(u)
    t.save(tmp_path / "t.snap", tag=42)
    u = UrlTree.load(tmp_path / "t.snap")
    assert u.tag == 42 and len(u) == len(t) and u.stats()["mapped"]
    u.check()
    q = urls_ + [x + "/deeper" for x in urls_] + ["a.dom.example/x", "nothing.example"]
    assert (u.match_many(q) == t.match_many(q)).all()
    assert u.keys() == t.keys()
    assert u.get(int(ids[600])) == t.get(int(ids[600]))
    # first modification copies the mapping into private memory
    u.insert("after.load")
    assert not u.stats()["mapped"] and u.match("after.load/x") > 0
    u.check()
    with pytest.raises(ValueError):
        (tmp_path / "bad").write_bytes(b"WTAVL001" + b"\0" * 10)
        UrlTree.load(tmp_path / "bad")
    raw = (tmp_path / "t.snap").read_bytes()
    (tmp_path / "trunc").write_bytes(raw[:-5])
    with pytest.raises(ValueError):
        UrlTree.load(tmp_path / "trunc")


def test_snapshot_with_any_byte_damaged_is_refused(tmp_path):
    """The header's CRC-32 covers the header and the three arrays: one changed byte anywhere
    (header field, TreeNode, DataPtr or CompressedURL) makes load() refuse the file, where a
    damaged node used to load and let a match read outside the arrays. verify=False skips it."""
    import random

    t = UrlTree()
    t.insert_many([f"h{i}.example/p/{i}" for i in range(500)] + ["dom.example"], categories=3)
    t.save(tmp_path / "t.snap", tag=9)
    raw = (tmp_path / "t.snap").read_bytes()
    hs = avl.HEADER.size
    nodes_end = hs + (len(raw) - hs)  # whole body
    rng = random.Random(7)
    # every header byte, and a sample of positions in each array
    positions = list(range(hs)) + rng.sample(range(hs, nodes_end), 300) + [len(raw) - 1]
    for pos in positions:
        bad = bytearray(raw)
        bad[pos] ^= 1 << rng.randrange(8)
        (tmp_path / "bad.snap").write_bytes(bytes(bad))
        with pytest.raises(ValueError):
            UrlTree.load(tmp_path / "bad.snap")
    # unverified load maps the damaged body (for files this process just checked)
    bad = bytearray(raw)
    bad[len(raw) - 1] ^= 0x20
    (tmp_path / "bad.snap").write_bytes(bytes(bad))
    assert len(UrlTree.load(tmp_path / "bad.snap", verify=False)) == len(t)
    u = UrlTree.load(tmp_path / "t.snap")
    assert u.tag == 9 and len(u) == len(t)
    u.check()


def test_older_snapshot_format_is_named_in_the_error(tmp_path):
    t = UrlTree()
    t.insert("a.example/x")
    t.save(tmp_path / "t.snap")
    raw = (tmp_path / "t.snap").read_bytes()
    (tmp_path / "old.snap").write_bytes(b"WTAVL002" + raw[8:])
    with pytest.raises(ValueError, match="format 002.*rebuild"):
        UrlTree.load(tmp_path / "old.snap")


class TreeMachine(RuleBasedStateMachine):
    """Any sequence of insert/delete/update/match behaves like a dict keyed by canonical key, and
    the AVL invariants and the encoding (RefID a flanking ancestor, side bit, cPrefix) hold after
    every step."""

    ids = Bundle("ids")

    @initialize()
    def setup(self):
        self.t = UrlTree()
        self.model = {}      # key -> (id, category, period)

    def _id_of(self, key):
        return self.model[key][0] if key in self.model else 0

    @rule(target=ids, u=urls(), cat=st.integers(0, 300), per=st.integers(0, 3))
    def insert(self, u, cat, per):
        k = to_key(u)
        uid, created = self.t.insert(u, cat, per)
        assert created == (k not in self.model)
        if created:
            assert uid not in {v[0] for v in self.model.values()}
            self.model[k] = (uid, cat, per)
        else:
            assert uid == self.model[k][0]
        return uid

    @rule(u=urls())
    def delete(self, u):
        k = to_key(u)
        assert self.t.delete(u) == self._id_of(k)
        self.model.pop(k, None)

    @rule(uid=ids)
    def delete_id(self, uid):
        live = {v[0]: k for k, v in self.model.items()}
        assert self.t.delete_id(uid) == (uid in live)
        if uid in live:
            del self.model[live[uid]]

    @rule(uid=ids, u=urls())
    def rekey(self, uid, u):
        live = {v[0]: k for k, v in self.model.items()}
        k = to_key(u)
        if uid not in live:
            with pytest.raises(KeyError):
                self.t.update(uid, url=u)
        elif k in self.model and self.model[k][0] != uid:
            with pytest.raises(KeyError):
                self.t.update(uid, url=u)
        else:
            self.t.update(uid, url=u)
            old = self.model.pop(live[uid])
            self.model[k] = old

    @rule(uid=ids, cat=st.integers(0, 70000), per=st.integers(0, 5))
    def set_payload(self, uid, cat, per):
        live = {v[0]: k for k, v in self.model.items()}
        if uid in live:
            self.t.update(uid, category=cat, period=per)
            self.model[live[uid]] = (uid, cat, per)

    @rule(u=urls())
    def match(self, u):
        k = to_key(u)
        best = naive_prefix(self.model, k)
        assert self.t.match(u) == (self.model[best][0] if best is not None else 0)
        assert self.t.find(u) == self._id_of(k)

    @invariant()
    def consistent(self):
        if not hasattr(self, "t"):
            return
        assert len(self.t) == len(self.model)
        self.t.check()
        for k, (uid, cat, per) in self.model.items():
            assert self.t.get_key(uid) == k
            assert self.t.payload(uid) == (cat, per)


TreeMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)
test_tree_machine = TreeMachine.TestCase


@settings(max_examples=40, deadline=None)
@given(st.lists(urls(), min_size=1, max_size=120), st.lists(urls(), max_size=60))
def test_batch_prefix_match_equals_naive(entries, queries):
    t = UrlTree()
    ids, _ = t.insert_many(entries)
    model = {to_key(e): int(i) for e, i in zip(entries, ids.tolist())}
    got = t.match_many(queries + entries)
    for q, g in zip(queries + entries, got.tolist()):
        best = naive_prefix(model, to_key(q))
        assert g == (model[best] if best is not None else 0), q


def test_optimize_renumbers_in_preorder_and_keeps_answers():
    t = UrlTree()
    urls_ = [f"o{i % 50}.example/{i}/x{i % 7}" for i in range(5000)] + ["dom.example"]
    ids, _ = t.insert_many(urls_, categories=np.arange(len(urls_)) % 9)
    for u in urls_[::3]:
        t.delete(u)
    before = {t.get_key(int(i)): t.payload(int(i)) for i in t.ids()}
    size_before = t.stats()["compressed_url_bytes"]
    q = urls_ + [u + "/z" for u in urls_] + ["a.dom.example"]
    keys_before = [t.get_key(int(i)) if i > 0 else None for i in t.match_many(q)]
    mapping = t.optimize()
    t.check()
    assert t.stats()["ids"] == len(t) and t.stats()["dead_bytes"] == 0
    assert t.stats()["compressed_url_bytes"] < size_before            # one-byte RefIDs
    assert t.ids().tolist()[:1] != [] and sorted(t.ids().tolist()) == list(range(1, len(t) + 1))
    assert {t.get_key(int(i)): t.payload(int(i)) for i in t.ids()} == before
    assert [t.get_key(int(i)) if i > 0 else None for i in t.match_many(q)] == keys_before
    live = ids[[i for i in range(len(urls_)) if i % 3 != 0]]
    assert (t.match_many([u for i, u in enumerate(urls_) if i % 3 != 0], prefix=False) == mapping[live]).all()
    t.insert("new.example")
    t.check()


def test_build_sorted_equals_inserts():
    from urlfilter.tree import build_tree

    rng = np.random.default_rng(3)
    base = [f"b{i % 40}.example/{i % 11}/p{i}" for i in range(3000)] + ["dom.example", "DOM.example/", "bad host"]
    urls_ = [base[i] for i in rng.permutation(len(base))]
    cats = np.arange(len(urls_)) % 5
    built, codes = build_tree(urls_, cats)
    built.check()
    ref = UrlTree()
    rids, rcodes = ref.insert_many(urls_, cats)
    assert (codes < 0).tolist() == (rcodes < 0).tolist()
    assert built.keys() == ref.keys()
    assert [built.payload(int(i)) for i in built.ids()] == [ref.payload(int(i)) for i in ref.ids()]
    assert built.height <= int(np.ceil(np.log2(len(built) + 1)))
    assert sorted(built.ids().tolist()) == list(range(1, len(built) + 1))
    q = urls_ + [u + "/x" for u in urls_] + ["a.dom.example/q"]
    assert [built.get_key(int(i)) if i > 0 else None for i in built.match_many(q)] == \
           [ref.get_key(int(i)) if i > 0 else None for i in ref.match_many(q)]
    built.insert("after.example")
    built.delete(urls_[0])
    built.check()
    with pytest.raises(ValueError):
        UrlTree().build_sorted(b"ba", [0, 1], [1, 2], [0, 1])        # "b" before "a": not sorted
    with pytest.raises(ValueError):
        built.build_sorted(b"a", [0], [1], [0])                      # not empty


def test_payload_limits():
    t = UrlTree()
    uid, _ = t.insert("a.example", category=2**31 - 1, period=2**32 - 1)
    assert t.payload(uid) == (2**31 - 1, 2**32 - 1)
    with pytest.raises(OverflowError):
        t.insert("b.example", category=2**31)
    with pytest.raises(OverflowError):
        t.insert_many(["b.example"], categories=2**31)
    with pytest.raises(OverflowError):
        t.update(uid, category=2**31)
    assert t.payload(uid) == (2**31 - 1, 2**32 - 1)


def test_too_many_urls_is_refused_cleanly():
    from urlfilter.errors import TreeFull

    t = UrlTree(max_ids=50)      # the real limit is 2^28 - 1; the refusal path is the same
    ids, codes = t.insert_many([f"u{i}.example" for i in range(50)])
    assert (codes == 0).all()
    with pytest.raises(TreeFull):
        t.insert("one-more.example")
    with pytest.raises(TreeFull):
        t.insert_many(["again.example", "u1.example"])
    assert len(t) == 50 and t.find("one-more.example") == 0
    t.check()
    t.delete("u3.example")
    assert t.insert("one-more.example")[1]        # a freed id is usable again
    t.check()
    with pytest.raises(OverflowError):
        UrlTree(max_ids=3).build_sorted(b"abcd", [0, 1, 2, 3], [1, 2, 3, 4], [0, 1, 2, 3])
    with pytest.raises(ValueError):
        UrlTree(max_ids=2**28)


def _lcp(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _flanks(t):
    """(id, low flank id, high flank id) of every node, walked from the root in Python."""
    out, root = [], None
    ids = set(int(i) for i in t.ids())
    children = {i: t.node(i)[:2] for i in ids}
    for i in ids:                       # the root is the one id that is nobody's child
        if not any(i in c for c in children.values()):
            root = i
    stack = [(root, 0, 0)]
    while stack:
        x, lo, hi = stack.pop()
        if x:
            out.append((x, lo, hi))
            stack.append((children[x][0], lo, x))
            stack.append((children[x][1], x, hi))
    return out


def test_nodes_are_encoded_against_the_closer_flanking_ancestor():
    """A bulk-built tree encodes every node against whichever of its two flanking ancestors
    shares the longer prefix (for a leaf these are its neighbours in key order), which stores
    fewer DiffURL bytes than encoding against the parent; after inserts and deletes (rotations,
    successor splices) every RefID is still one of the flanks with the exact cPrefix."""
    rng = np.random.default_rng(7)
    hosts = [f"h{i}.example{i % 7}.com" for i in range(40)]
    urls_ = sorted({f"{hosts[rng.integers(40)]}/{'/'.join(str(rng.integers(9)) for _ in range(rng.integers(0, 4)))}"
                    for _ in range(3000)})
    bulk = UrlTree()
    keys = [to_key(u) for u in urls_]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    data = np.frombuffer(b"".join(keys), np.uint8)
    ends = np.cumsum([len(k) for k in keys])
    bulk.build_sorted(data, ends - [len(k) for k in keys], ends, order)
    bulk.check()
    diff_flank = diff_parent = 0
    for x, lo, hi in _flanks(bulk):
        _, _, _, ref, side, cp, dlen = bulk.node(x)
        k = bulk.get_key(x)
        best = max(_lcp(k, bulk.get_key(lo)) if lo else 0, _lcp(k, bulk.get_key(hi)) if hi else 0)
        assert cp == best and dlen == len(k) - best
        assert ref == (0 if best == 0 else (hi if side else lo))
        diff_flank += dlen
        parent = lo if (lo and bulk.node(lo)[1] == x) else (hi if hi and bulk.node(hi)[0] == x else 0)
        diff_parent += len(k) - (_lcp(k, bulk.get_key(parent)) if parent else 0)
    assert diff_flank < diff_parent
    # dynamic: random inserts and deletes (two-child deletes included), then the same answers
    t = UrlTree()
    for i in rng.permutation(len(urls_)):
        t.insert(urls_[i])
    for i in rng.permutation(len(urls_))[:1500]:
        assert t.delete(urls_[i]) > 0
    t.check()
    for x, lo, hi in _flanks(t):
        ref, side, cp = t.node(x)[3:6]
        assert ref in (0, lo, hi) and (ref == 0 or ref == (hi if side else lo))
    assert sorted(t.keys()) == t.keys()
    # optimize() re-encodes every node against its better flank: the bulk-built optimum
    keys_before = t.keys()
    t.optimize()
    t.check()
    assert t.keys() == keys_before
    for x, lo, hi in _flanks(t):
        k, cp = t.get_key(x), t.node(x)[5]
        assert cp == max(_lcp(k, t.get_key(lo)) if lo else 0, _lcp(k, t.get_key(hi)) if hi else 0)


def test_single_match_fast_path_agrees_with_the_python_canonicaliser():
    """find/match canonicalise in C and fall back to urlfilter.canon (IDN hosts as punycode) only
    when C rejects the host; every input kind answers as the key form would."""
    t = UrlTree()
    uid, _ = t.insert("http://bücher.example/Katalog")          # stored as punycode
    did, _ = t.insert("shop.example.org")
    assert t.find("https://BÜCHER.example/Katalog#x") == uid
    assert t.match("bücher.example/Katalog/2?x") == uid
    assert t.match("xn--bcher-kva.example/Katalog") == uid
    for q, exact in (("www.shop.example.org/a", 0), (b"www.shop.example.org/a", 0),
                     (bytearray(b"shop.example.org:80/"), did), (memoryview(b"http://shop.example.org"), did)):
        assert t.match(q) == did
        assert t.find(q) == exact
    for bad in ("", "http://exa mple.org/", "http://[::1/x", "bad host^.org/", b"\x00"):
        assert t.match(bad) == 0 and t.find(bad) == 0
    assert t.find_key(b"org.example.shop") == did and t.prefix_key(bytearray(b"org.example.shop.www/a")) == did


def _exact_no_prefix(keys):
    """Reference no-prefix flags: True when no other (non-empty) key is a proper prefix."""
    return {k: not any(p and p != k and k.startswith(p) for p in keys) for k in keys}


def _flags(t):
    return {t.get_key(int(x)): t.no_prefix_flag(int(x)) for x in t.ids()}


NP_ALPHABET = ["a", "b", ".", "/", "?", "ab", "-", ":"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(NP_ALPHABET), min_size=1, max_size=6).map("".join).map(str.encode),
                min_size=1, max_size=80))
def test_no_prefix_flags_exact_after_inserts_optimize_and_bulk_build(keys):
    """TreeNode's no-prefix flag (ext/url/avl.pyx, "Prefix match"): inserts keep it exact in both
    directions (a new key's flag from its neighbours and sub-searches; a new key clears the flags
    of the keys it is a prefix of), and so do optimize() and build_sorted()."""
    t = UrlTree()
    for k in keys:
        t.insert_key(k)
    want = _exact_no_prefix(set(keys))
    assert _flags(t) == want
    t.check()
    t.optimize()
    assert _flags(t) == want
    u = sorted(set(keys))
    data = np.frombuffer(b"".join(u), np.uint8) if u else np.zeros(0, np.uint8)
    ends = np.cumsum([len(k) for k in u])
    b = UrlTree()
    b.build_sorted(data, ends - [len(k) for k in u], ends, np.arange(len(u)))
    assert _flags(b) == want


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.sampled_from(NP_ALPHABET), min_size=1, max_size=5)
                          .map("".join).map(str.encode)), min_size=1, max_size=80),
       st.lists(st.lists(st.sampled_from(NP_ALPHABET), min_size=1, max_size=8).map("".join).map(str.encode),
                max_size=40))
def test_prefix_match_with_stale_no_prefix_flags_after_deletes(ops, queries):
    """Deletes leave flags at 0 where a removed entry was the only prefix (conservative, never
    wrong): check() verifies no set flag lies, matches still equal the naive rule, and
    optimize() makes every flag exact again."""
    t, model = UrlTree(), {}
    for add, k in ops:
        if add:
            model[k] = t.insert_key(k)[0]
        else:
            t.delete_key(k)
            model.pop(k, None)
    t.check()
    for q in queries + list(model):
        best = naive_prefix(model, q)
        assert t.prefix_key(q) == (model[best] if best is not None else 0)
    t.optimize()
    assert _flags(t) == _exact_no_prefix(set(model))


def test_prefix_match_rounds_below_the_turn_node():
    """A domain entry sorts before its subdomains and those before its paths ('.' < '/'), so the
    predecessor of a miss under com.example/ is often a subdomain key with a flag of 0: the match
    then searches the shorter boundaries below the node where they leave q's path."""
    t = UrlTree()
    entries = ["example.com", "www.example.com/q", "a.www.example.com/z", "example.com/a/b",
               "example.com/a/b/c/d", "x.example.com:8080/p", "example.com/a-b"]
    for e in entries:
        t.insert(e)
    for extra in range(200):                  # a deeper tree, so the searches have room
        t.insert(f"filler{extra}.org/{extra}")
    want = {
        "example.com/b": "example.com", "example.com/a/c": "example.com",
        "example.com/a/b/x": "example.com/a/b", "example.com/a/b/c/d/e": "example.com/a/b/c/d",
        "www.example.com/q/r": "www.example.com/q", "b.www.example.com/z": "example.com",
        "example.com/a-b/c": "example.com/a-b", "example.com/a-": "example.com",
        "example.org/a": None, "x.example.com:8080/p?z": "x.example.com:8080/p",
    }
    for q, e in want.items():
        got = t.match(q)
        assert (t.get(got) if got > 0 else None) == (canonicalize(e) if e else None), q
    assert t.no_prefix_flag(t.find("example.com")) and not t.no_prefix_flag(t.find("example.com/a/b"))
    t.check()


def test_format_3_snapshot_is_refused():
    """Format 004 added the no-prefix flag to TreeNode: a format 003 file has no flags, so it
    is refused by name (the manager rebuilds from its store) rather than read with wrong ones."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        t = UrlTree()
        t.insert("a.example/x")
        t.save(Path(d) / "t.snap")
        raw = (Path(d) / "t.snap").read_bytes()
        assert raw[:8] == b"WTAVL004"
        (Path(d) / "old.snap").write_bytes(b"WTAVL003" + raw[8:])
        with pytest.raises(ValueError, match="format 003.*rebuild"):
            UrlTree.load(Path(d) / "old.snap")


@pytest.mark.parametrize("op,kw", [("insert_batch", {}), ("insert_batch", {"canonical": False}),
                                   ("delete_batch", {}), ("match_batch", {}),
                                   ("match_batch", {"canonical": False})])
def test_batch_offsets_are_checked(op, kw):
    """Offsets that decrease or leave the buffer are refused before anything is read (they
    used to reach insert/delete as a negative length, read as a huge size_t)."""
    t = UrlTree()
    t.insert("http://a.example/x")
    d = np.frombuffer(b"http://a.example/xhttp://b.example/y", np.uint8)
    f = getattr(t, op)
    with pytest.raises(ValueError, match="decrease"):
        f(d, np.array([0, 18, 5], np.int64), **kw)
    with pytest.raises(ValueError, match="outside"):
        f(d, np.array([0, 18, 99], np.int64), **kw)
    with pytest.raises(ValueError, match="outside"):
        f(d, np.array([-1, 18], np.int64), **kw)
    assert len(t) == 1 and t.match("http://a.example/x/y")


@pytest.mark.parametrize("canonical", [True, False])
def test_match_batch_timings_tile_the_call(canonical):
    """The timed path gives the lockstep path's ids, and one time per URL read from a clock
    taken once per URL: consecutive, non-overlapping spans, so none is negative and together
    they fit inside the call's own wall time (what the filter's match_ns column sums)."""
    import time

    t = UrlTree()
    for i in range(2000):
        t.insert(f"site{i}.example/p{i % 7}")
    listed = [i % 3 != 0 for i in range(2000)]
    raw = [f"http://site{i}.example/p{i % 7}/x" if hit else f"http://site{i}.example/q"
           for i, hit in enumerate(listed)]
    qs = [u.encode() for u in raw] if canonical else [to_key(u) for u in raw]
    data = np.frombuffer(b"".join(qs), np.uint8)
    off = np.zeros(len(qs) + 1, np.int64)
    off[1:] = np.cumsum([len(q) for q in qs])
    ns = np.full(len(qs), -1, np.int64)
    t0 = time.perf_counter_ns()
    ids = t.match_batch(data, off, True, canonical, ns)
    wall = time.perf_counter_ns() - t0
    assert (ids == t.match_batch(data, off, True, canonical)).all()
    assert ((ids > 0) == np.array(listed)).all()
    assert (ns >= 0).all() and 0 < ns.sum() <= wall
