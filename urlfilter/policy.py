"""The URL filter's policy (issue 34): the allow list and the rules across layers.

Decision of one lookup (a GET, a TLS ClientHello or a QUIC Initial), in this order:

1. **Rules**, first match wins: the first rule whose every condition holds decides. ``cut``: cut
   (FIN/RST or QUIC close), whatever the lists say; ``allow``: let through, whatever the lists
   say; ``log``: the rule is recorded (``rule``, ``decision`` columns; counter ``rule_log``)
   and the later rules are not looked at, but it decides nothing: steps 2-3 decide.
2. **Allow list** (exceptions, UT1's ``liste_blanche``, ``exceptions_liste_bu``): a lookup that
   the blacklist hits and that the allow list matches (same prefix rule as the blacklist: an
   entry equal to the URL or a prefix of it on a component boundary; a host covers its
   subdomains) is let through: no hit, nothing forged (counter ``allowed``).
3. **Blacklist**: a hit on an entry active now is cut (counter ``blocked``).

Rule file (docs/urlfilter.md "Rules across layers" has the grammar and examples)::

    # comment; blank lines are ignored
    ACTION [KEY=VALUE[,VALUE...]]...        ACTION: cut | log | allow

Keys (each at most once per rule; the values of one key are alternatives, the keys all hold):
``client`` (address or CIDR), ``port`` (server port N or N-M), ``url`` (URL or host prefix, as a
blacklist entry), ``ua`` (User-Agent substring, case-insensitive), ``sni`` (server name or a
parent domain), ``ja4`` (ClientHello JA4), ``ext`` (URL path extension), ``proto``
(http | tls | quic). Values may be double-quoted (``ua="Mozilla/5.0 (X11"``); inside quotes
``\\"`` and ``\\\\`` escape and commas and blanks are literal.

The rules run in C (ext/url/urlpolicy.pyx) in the one pass; ``reference_match`` here is the same
semantics in plain Python, the independent reference of the property test.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from urlfilter import canon
from urlfilter.errors import InvalidUrl, UrlFilterError
from urlfilter.importers import _read, _ut1_files, split_lines
from urlfilter.tree import build_tree
from webtap._ext import urlpolicy as _up

__all__ = ["Rule", "RuleError", "parse_rules", "parse_rule", "compile_rules", "CompiledRules",
           "ACTIONS", "KEYS", "reference_match", "read_allow_file"]

#: action names -> the code ext/url/urlpolicy.pyx returns
ACTIONS = {"cut": 1, "log": 2, "allow": 3}
ACTION_NAMES = {v: k for k, v in ACTIONS.items()}
KEYS = tuple(_up.KINDS)
PROTOS = {"http": 0, "tls": 1, "quic": 2}
_JA4 = re.compile(r"^[tqd][0-9s]{2}[di][0-9]{2}[0-9]{2}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$")
MAX_RULES = 100_000
#: the order compile_rules tests a rule's conditions in (cheapest first)
COST_ORDER = ("proto", "port", "client", "ja4", "sni", "url", "ext", "ua")


class RuleError(UrlFilterError, ValueError):
    """A rule that cannot be parsed: `line` (1-based, of the rule file or text), `source`."""

    def __init__(self, message: str, line: int = 0, source: str = "rules"):
        self.message, self.line, self.source = message, line, source
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")


@dataclass
class Rule:
    """One rule: action and conditions {key: [value, ...]} as written (normalised)."""

    action: str
    conds: dict[str, list] = field(default_factory=dict)
    line: int = 0                 # line in its file (0: given alone)
    text: str = ""                # the rule as written

    def __str__(self) -> str:
        parts = [self.action]
        for k, vs in self.conds.items():
            parts.append(f"{k}=" + ",".join(_quote(str(v)) for v in vs))
        return " ".join(parts)


def _quote(v: str) -> str:
    if v and not re.search(r'[\s,"\\#]', v):
        return v
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _split_values(text: str, key: str) -> list[str]:
    """The comma-separated values of one KEY=..., quotes honoured."""
    out, i, n = [], 0, len(text)
    while True:
        if i < n and text[i] == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(text[j])
                j += 1
            if j >= n:
                raise ValueError(f"unterminated quote in {key}=")
            out.append("".join(buf))
            i = j + 1
        else:
            j = text.find(",", i)
            j = n if j < 0 else j
            v = text[i:j]
            if v == "":
                raise ValueError(f"empty value in {key}=")
            out.append(v)
            i = j
        if i >= n:
            return out
        if text[i] != ",":
            raise ValueError(f"expected ',' after a quoted value in {key}=")
        i += 1
        if i >= n:
            raise ValueError(f"empty value in {key}=")


def _tokens(line: str) -> list[str]:
    """Blank-separated tokens; quoted parts may hold blanks; '#' outside quotes ends the line."""
    toks, cur, q, i = [], [], False, 0
    while i < len(line):
        ch = line[i]
        if q:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(line):
                cur.append(line[i + 1])
                i += 1
            elif ch == '"':
                q = False
        elif ch == '"':
            q = True
            cur.append(ch)
        elif ch == "#":
            break
        elif ch.isspace():
            if cur:
                toks.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
        i += 1
    if q:
        raise ValueError("unterminated quote")
    if cur:
        toks.append("".join(cur))
    return toks


def _value(key: str, v: str):
    """One value, checked and normalised (ValueError with the reason)."""
    if key == "client":
        try:
            return str(ipaddress.ip_network(v, strict=False))
        except ValueError:
            raise ValueError(f"client={v}: not an IP address or CIDR") from None
    if key == "port":
        m = re.fullmatch(r"(\d{1,5})(?:-(\d{1,5}))?", v)
        if not m:
            raise ValueError(f"port={v}: not a port or a range N-M")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if not (0 <= lo <= hi <= 65535):
            raise ValueError(f"port={v}: ports are 0-65535, N-M with N <= M")
        return f"{lo}" if lo == hi else f"{lo}-{hi}"
    if key == "url":
        try:
            return canon.canonicalize(v)
        except InvalidUrl as e:
            raise ValueError(f"url={v}: no canonical form ({e.reason})") from None
    if key == "ua":
        if not v.isascii() or any(ord(c) < 32 or ord(c) == 127 for c in v):
            raise ValueError(f"ua={v!r}: only printable ASCII")
        return v
    if key == "sni":
        s = v.lower().rstrip(".")
        if not s or not re.fullmatch(r"[a-z0-9_.:\-\[\]]+", s) or ".." in s or s.startswith("."):
            raise ValueError(f"sni={v}: not a host name")
        return s
    if key == "ja4":
        s = v.lower()
        if not _JA4.match(s):
            raise ValueError(f"ja4={v}: not a JA4 (e.g. t13d1516h2_8daaf6152771_b186095e22b6)")
        return s
    if key == "ext":
        s = v.lower().lstrip(".")
        if not s or not re.fullmatch(r"[a-z0-9_~!$&'()*+;=:@%-]+", s):
            raise ValueError(f"ext={v}: not a file extension (exe, .tar, ...)")
        return s
    if key == "proto":
        s = v.lower()
        if s not in PROTOS:
            raise ValueError(f"proto={v}: one of http, tls, quic")
        return s
    raise AssertionError(key)


def parse_rule(text: str, line: int = 0, source: str = "rule") -> Rule | None:
    """One rule line; None for a blank or comment line. RuleError (with `line`) when bad."""
    try:
        toks = _tokens(text)
    except ValueError as e:
        raise RuleError(str(e), line, source) from None
    if not toks:
        return None
    act = toks[0].lower()
    if act not in ACTIONS:
        raise RuleError(f"unknown action {toks[0]!r} (cut, log or allow)", line, source)
    rule = Rule(act, {}, line, text.strip())
    for t in toks[1:]:
        k, eq, rest = t.partition("=")
        k = k.lower()
        if not eq:
            raise RuleError(f"expected KEY=VALUE, got {t!r}", line, source)
        if k not in KEYS:
            raise RuleError(f"unknown key {k!r} ({', '.join(KEYS)})", line, source)
        if k in rule.conds:
            raise RuleError(f"key {k!r} given twice (list its values with commas)", line, source)
        try:
            vals = [_value(k, v) for v in _split_values(rest, k)]
        except ValueError as e:
            raise RuleError(str(e), line, source) from None
        rule.conds[k] = list(dict.fromkeys(vals))
    return rule


def parse_rules(text: str, source: str = "rules") -> list[Rule]:
    """Every rule of a rule file's text, in order; the first bad line raises RuleError."""
    out = []
    for i, ln in enumerate(text.splitlines(), 1):
        r = parse_rule(ln, i, source)
        if r is not None:
            out.append(r)
            if len(out) > MAX_RULES:
                raise RuleError(f"more than {MAX_RULES} rules", i, source)
    return out


def read_rules_file(path) -> list[Rule]:
    p = Path(path)
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise RuleError("not UTF-8 text", line, str(p)) from None
    return parse_rules(text, str(p))


@dataclass
class CompiledRules:
    """The arrays ext/url/urlpolicy.pyx matches (RULE/COND/VAL_DTYPE + blob); `kinds`: the keys used."""

    rules: np.ndarray
    conds: np.ndarray
    vals: np.ndarray
    blob: np.ndarray
    kinds: frozenset = frozenset()

    def __len__(self) -> int:
        return len(self.rules)

    def match(self, msgs, data, rows, keys, koffs, proto, sni=None, ja4=None):
        """(rule int32 1-based / 0, action uint8 / 0, ns of the loop): ext/urlpolicy.pyx."""
        return _up.match_rules(self.rules, self.conds, self.vals, self.blob, msgs, data, rows,
                               keys, koffs, proto, sni, ja4)


def compile_rules(rules: list[Rule]) -> CompiledRules:
    ra = np.zeros(len(rules), _up.RULE_DTYPE)
    conds, vals, blob = [], [], bytearray()
    kinds = set()
    for i, r in enumerate(rules):
        ra[i]["action"] = ACTIONS[r.action]
        ra[i]["c0"] = len(conds)
        # a conjunction holds in any order: the cheap tests first, so that a rule that fails
        # fails before a User-Agent is searched
        for k, vs in sorted(r.conds.items(), key=lambda kv: COST_ORDER.index(kv[0])):
            kinds.add(k)
            v0 = len(vals)
            for v in vs:
                row = {"off": len(blob), "len": 0, "lo": 0, "hi": 0, "plen": 0, "ver": 0,
                       "net": bytes(16)}
                if k == "client":
                    net = ipaddress.ip_network(v)
                    row.update(plen=net.prefixlen, ver=net.version,
                               net=net.network_address.packed.ljust(16, b"\0"))
                elif k == "port":
                    lo, _, hi = v.partition("-")
                    row.update(lo=int(lo), hi=int(hi or lo))
                elif k == "proto":
                    row.update(lo=PROTOS[v])
                else:
                    t = canon.to_key(v) if k == "url" else v.lower().encode("ascii")
                    row["len"] = len(t)
                    blob += t
                vals.append(row)
            conds.append((_up.KINDS[k], v0, len(vals)))
        ra[i]["c1"] = len(conds)
    ca = np.zeros(len(conds), _up.COND_DTYPE)
    for j, (kind, v0, v1) in enumerate(conds):
        ca[j]["kind"], ca[j]["v0"], ca[j]["v1"] = kind, v0, v1
    va = np.zeros(len(vals), _up.VAL_DTYPE)
    for j, row in enumerate(vals):
        for f in ("off", "len", "lo", "hi", "plen", "ver"):
            va[j][f] = row[f]
        va[j]["net"] = np.frombuffer(row["net"], np.uint8)
    return CompiledRules(ra, ca, va, np.frombuffer(bytes(blob), np.uint8).copy(), frozenset(kinds))


# ---- the reference (property test): the documented semantics, plain Python ---------------------
def _is_boundary(key: bytes, b: int) -> bool:
    """key[:b] is a component prefix of key: the tree's rule, written from docs/urlfilter.md."""
    host_end = len(key)
    for i, ch in enumerate(key):
        if ch in b":/?":
            host_end = i
            break
    if key.startswith(b"[") and b"]" in key:
        host_end = key.index(b"]") + 1
    q = key.find(b"?", host_end)
    qpos = len(key) if q < 0 else q
    if b < host_end:
        return key[b:b + 1] == b"." and not key.startswith(b"[")
    if b == host_end:
        return True
    if b > qpos:
        return False
    return key[b:b + 1] == b"/" or b == qpos


def _extension(key: bytes) -> bytes | None:
    path = key.split(b"?", 1)[0]
    host_end = len(path)
    for i, ch in enumerate(path):
        if ch in b":/":
            host_end = i
            break
    p = path[host_end:]
    if "/" not in p.decode("latin-1"):
        return None
    seg = p.rsplit(b"/", 1)[1]
    if b"." not in seg[1:]:
        return None
    return seg.rsplit(b".", 1)[1].lower()


def reference_match(rules: list[Rule], *, client: str, port: int, key: bytes, proto: str,
                    ua: bytes | None = None, sni: bytes | None = None, ja4: str | None = None):
    """(rule number 1-based or 0, action or None) of one lookup, from the documented semantics."""
    addr = ipaddress.ip_address(client)
    for n, r in enumerate(rules, 1):
        ok = True
        for k, vs in r.conds.items():
            if k == "client":
                hold = any(addr.version == ipaddress.ip_network(v).version
                           and addr in ipaddress.ip_network(v) for v in vs)
            elif k == "port":
                hold = any(int(v.split("-")[0]) <= port <= int(v.split("-")[-1]) for v in vs)
            elif k == "url":
                hold = False
                for v in vs:
                    p = canon.to_key(v)
                    if key == p or (key.startswith(p) and _is_boundary(key, len(p))):
                        hold = True
            elif k == "ua":
                hold = proto == "http" and ua is not None and len(ua) > 0 and any(
                    v.lower().encode() in ua.lower() for v in vs)
            elif k == "sni":
                s = sni.lower() if sni is not None and proto != "http" else None
                hold = s is not None and any(s == v.encode() or s.endswith(b"." + v.encode()) for v in vs)
            elif k == "ja4":
                hold = proto != "http" and bool(ja4) and ja4 in vs
            elif k == "ext":
                e = _extension(key)
                hold = e is not None and e.decode("latin-1") in vs
            elif k == "proto":
                hold = proto in vs
            else:
                raise AssertionError(k)
            if not hold:
                ok = False
                break
        if ok:
            return n, r.action
    return 0, None


# ---- the allow list's files -------------------------------------------------------------------
def read_allow_file(path) -> tuple[list[str], dict[str, list[int]]]:
    """Canonical entries of one list file (plain or .gz, UT1's domains/urls), in order, and the
    rejected lines {reason: [line numbers]} (comments and blanks are not listed)."""
    packed, offsets, is_comment = split_lines(_read(Path(path)))
    urls, codes = canon.canonicalize_many(packed, offsets)
    ok, rejected = [], {}
    for i, (u, c) in enumerate(zip(urls, np.asarray(codes).tolist())):
        if is_comment[i] or c == -1:
            continue
        if c != 0:
            rejected.setdefault(canon.reason_of(c), []).append(i + 1)
            continue
        ok.append(u)
    return ok, rejected


def allow_files(path) -> list[Path]:
    """The list files of an allow-list PATH: a file, a UT1 category folder (domains, urls,
    .gz too), or a folder of them (UT1's liste_blanche and exceptions_liste_bu)."""
    p = Path(path)
    if p.is_file():
        return [p]
    return [f for _, f in _ut1_files(p)]


# ---- the policy a pass applies ----------------------------------------------------------------
class Policy:
    """The allow list (a URL tree of its entries) and the compiled rules of one store; either may
    be empty (None). `empty`: nothing to apply, and the pass does no extra work at all."""

    def __init__(self, rules: list[Rule] | None = None, allow_urls=()):
        self.rule_list = list(rules or [])
        self.rules = compile_rules(self.rule_list) if self.rule_list else None
        allow_urls = list(allow_urls)
        self.allow = build_tree(allow_urls)[0] if allow_urls else None
        self.n_allow = len(allow_urls)

    @property
    def empty(self) -> bool:
        return self.rules is None and self.allow is None

    @property
    def wants_ja4(self) -> bool:
        return self.rules is not None and "ja4" in self.rules.kinds

    @classmethod
    def from_store(cls, store) -> "Policy":
        rules = [parse_rule(t, pos, f"rule {pos}") for pos, t, _ in store.rules()]
        return cls([r for r in rules if r is not None], [u for u, _ in store.allow_list()])

    def allowed(self, keys, offs) -> np.ndarray:
        """Boolean per key: the allow list matches it (prefix rule, as the blacklist's)."""
        n = len(offs) - 1
        if self.allow is None or n == 0:
            return np.zeros(n, bool)
        return self.allow.match_batch(keys, offs, True, False) > 0
