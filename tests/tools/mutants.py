"""`make mutants`: a small mutation run over the hot paths (issue 32, docs/ROBUSTNESS.md).

Each mutant is one deliberate bug (an exact text replacement in one source file) chosen where a
user would meet it: the pairing key, the GC boundary and the clock reset, the collision order, the
1xx re-keying, the canonicaliser's rules, the URL tree's boundary search, the ClientHello's SNI
length checks, the forged TCP sequence numbers and checksums, JA4, the Community ID, the Eq. 2/3
hashes, the Dask repair, the QUIC close's length. For each: the mutant is applied to a COPY of the
source (build/mutants/src, never the real tree), that copy's extensions are rebuilt incrementally
(build/mutants/bld, meson + ninja: only the modules that include the changed file), and the tests
that should catch it -- deterministic tests only, no hypothesis search, no fuzzing -- run against
the copy (its Python packages first on sys.path, its extensions through WEBTAP_EXT_DIR). A mutant
is *killed* when one of them fails (or the test process dies); *survived* otherwise. The copy is
restored after each mutant. Before the mutants, the same tests run on the unmodified copy and
must pass (a failing baseline makes every kill meaningless).

    python -m tests.tools.mutants            # all mutants, the table at the end
    python -m tests.tools.mutants --list     # the mutants and their tests
    python -m tests.tools.mutants T1 S2      # some of them

Exit status 0 when every mutant is killed, 1 otherwise (2: bad usage or the baseline failed).
One mutant at a time: a rebuild takes one core (~10-60 s for one module), the tests a few seconds.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "mutants"
SRC = WORK / "src"
BLD = WORK / "bld"


@dataclass(frozen=True)
class Mutant:
    id: str
    path: str          # relative to the repository
    old: str           # must occur exactly once in the file
    new: str
    tests: tuple       # pytest node ids (relative to the repository)
    what: str


TREE = "tests/urlfilter/test_tree.py::test_prefix_match_only_on_component_boundaries"
TREE_DOM = "tests/urlfilter/test_tree.py::test_domain_entry_blocks_subdomains_only"
SNI_P = "tests/tls/test_sni_lengths.py::test_parser_sni_is_what_rfc_6066_gives"
SNI_F = "tests/tls/test_sni_lengths.py::test_filter_sni_pass_reads_the_same_sni"
SNI_R = "tests/tls/test_sni_lengths.py::test_tls_records_carry_the_same_sni"
PAIR = "tests/httpanalyzer/test_pairing.py"
CANON = "tests/urlfilter/test_canon.py"
FORGE = "tests/urlfilter/test_analyzer.py"
DIST = "tests/distributed/test_distributed.py"

MUTANTS = [
    # ---- URL tree: prefix match on component boundaries (ext/url/avl.pyx)
    Mutant("T1", "ext/url/avl.pyx",
           "    if q[b] != b'/' and q[b] != b'?':\n        return False\n    return memchr",
           "    if False:\n        return False\n    return memchr",
           (TREE,), "_boundary_at: any byte after the host is a boundary (a.com/abcd hits a.com/abc)"),
    Mutant("T2", "ext/url/avl.pyx",
           "    return q[b] == b'/' or b == qpos\n",
           "    return True\n",
           (TREE,), "_is_boundary: any path position is a boundary (a.com/abcd hits a.com/ab)"),
    Mutant("T3", "ext/url/avl.pyx",
           "    if b > qpos:\n        return False\n    return q[b] == b'/' or b == qpos",
           "    if b > qpos + 65536:\n        return False\n    return q[b] == b'/' or b == qpos",
           (TREE,), "_is_boundary: a '/' inside the query is a boundary"),
    Mutant("T4", "ext/url/avl.pyx",
           "    return memchr(q + host_end, b'?', b - host_end) == NULL",
           "    return True",
           (TREE,), "_boundary_at: a '/' inside the query is a boundary"),
    Mutant("T5", "ext/url/avl.pyx",
           "    if host_end > b:\n        return q[b] == b'.' and q[0] != b'['",
           "    if host_end > b:\n        return True",
           (TREE, TREE_DOM), "_boundary_at: any host position is a boundary (bb.com hits b.com)"),
    # ---- ClientHello server_name (ext/tls/tls_hello.h, read by the TLS stage and the filter)
    Mutant("S1", "ext/tls/tls_hello.h",
           "if (ll > el - 2) ll = el - 2;", "",
           (SNI_P, SNI_F), "server_name list length not clamped to the extension"),
    Mutant("S2", "ext/tls/tls_hello.h",
           "if (qe - q < nl) break;", "if (qe - q + 1 < nl) break;",
           (SNI_P, SNI_F), "host_name length check off by one (one byte past the list)"),
    Mutant("S3", "ext/tls/tls_hello.h",
           "if (nt == 0 && h->sni.len == 0 && nl > 0)", "if (h->sni.len == 0 && nl > 0)",
           (SNI_P,), "name_type ignored (a non-host_name name taken as SNI)"),
    Mutant("S4", "ext/tls/tls_hello.h",
           "if (nt == 0 && h->sni.len == 0 && nl > 0)", "if (nt == 0 && nl > 0)",
           (SNI_P, SNI_R), "the last host_name instead of the first"),
    Mutant("S5", "ext/tls/tls_hello.h",
           "if (e_end - pos < el) { h->flags |= TLSF_EXT_TRUNCATED; break; }",
           "if (e_end - pos + 4 < el) { h->flags |= TLSF_EXT_TRUNCATED; break; }",
           ("tests/tls/test_sni_lengths.py::test_server_name_extension_overrunning_the_extensions_block",),
           "an extension may overrun the extensions block by up to 4 bytes"),
    # ---- pairing (ext/pair/pairing.pyx, ext/pair/hashes.h)
    Mutant("P1", "ext/pair/pairing.pyx",
           "if self.now - ts > self.gc_timeout_ns:", "if self.now - ts >= self.gc_timeout_ns:",
           (f"{PAIR}::test_clock_reset_only_beyond_exactly_the_window",),
           "clock reset at exactly the GC timeout back (> became >=)"),
    Mutant("P2", "ext/pair/pairing.pyx",
           "self.now - self.pool[j].links.stamp >= self.gc_timeout_ns",
           "self.now - self.pool[j].links.stamp > self.gc_timeout_ns",
           (f"{PAIR}::test_gc_expiry_at_exactly_60s_capture_time",), "GC boundary (>= became >)"),
    Mutant("P3", "ext/pair/pairing.pyx",
           "                        match = j\n                        break\n",
           "                        match = j\n",
           (f"{PAIR}::test_pipelined_requests_pair_fifo_on_the_shared_ack",
            f"{PAIR}::test_retransmitted_request_pairs_first_copy_and_second_waits"),
           "collision order: the newest waiting counterpart instead of the oldest"),
    Mutant("P4", "ext/pair/pairing.pyx",
           "                e.key = w.seq + w.payload_len\n", "                e.key = w.seq\n",
           (f"{PAIR}::test_100_continue_then_200",), "1xx re-keying: the final response's SEQ"),
    Mutant("P5", "ext/pair/pairing.pyx",
           "and same_ip(w.src_ip, e.dst_ip) and same_ip(w.dst_ip, e.src_ip)):\n                        match = j",
           "and same_ip(w.src_ip, e.dst_ip)):\n                        match = j",
           (f"{PAIR}::test_pairing_key_compares_the_whole_reversed_tuple",),
           "pairing key: the server address not compared"),
    Mutant("P8", "ext/pair/pairing.pyx",
           "and same_ip(w.src_ip, e.dst_ip) and same_ip(w.dst_ip, e.src_ip)):\n                        match = j",
           "and same_ip(w.dst_ip, e.src_ip)):\n                        match = j",
           (f"{PAIR}::test_pairing_key_compares_the_whole_reversed_tuple",),
           "pairing key: the client address not compared"),
    Mutant("P6", "ext/pair/pairing.pyx",
           "if w.key == e.key and w.ip_version == e.ip_version:",
           "if w.ip_version == e.ip_version:",
           (f"{PAIR}::test_pairing_key_compares_the_whole_reversed_tuple",),
           "pairing key: ACK/SEQ not compared (only the cell)"),
    Mutant("P7", "ext/pair/pairing.pyx",
           "                        if w.seq == e.seq and w.ack == e.ack and not w.interim_done:",
           "                        if w.seq == e.seq and not w.interim_done:",
           (f"{PAIR}::test_duplicate_waiting_response_is_flagged",
            f"{PAIR}::test_repeat_flag_needs_the_same_seq_and_ack"),
           "repeat flag without the ACK"),
    Mutant("H1", "ext/pair/hashes.h",
           "return fold_ip(src_ip, ip_version) ^ src_port ^ fold_ip(dst_ip, ip_version) ^ dst_port",
           "return fold_ip(src_ip, ip_version) ^ src_port ^ fold_ip(dst_ip, ip_version) ^ (dst_port << 1)",
           (f"{PAIR}::test_eq2_is_symmetric_and_follows_the_paper",
            "tests/feeder/test_hash.py::test_eq3_fixed_vectors"), "Eq. 1 not symmetric"),
    Mutant("H2", "ext/pair/hashes.h",
           "uint32_t fold = (key ^ (key >> 8) ^ (key >> 16) ^ (key >> 24)) & 0xFF",
           "uint32_t fold = (key ^ (key >> 8) ^ (key >> 16)) & 0xFF",
           ("tests/feeder/test_hash.py::test_eq3_fixed_vectors",), "Eq. 3 folds three key bytes"),
    Mutant("H3", "ext/pair/hashes.h",
           "h ^= wt_be32(a + 4) ^ wt_be32(a + 8) ^ wt_be32(a + 12)",
           "h ^= wt_be32(a + 4) ^ wt_be32(a + 8)",
           (f"{PAIR}::test_eq2_is_symmetric_and_follows_the_paper",
            "tests/feeder/test_hash.py::test_eq3_fixed_vectors"), "IPv6 fold drops the last word"),
    # ---- the HTTP rules of the walk (ext/walk/msglen.c, httpcont.c; issue 31)
    Mutant("W1", "ext/walk/msglen.c",
           "        if (b->cl_state == WT_CL_VALID && b->cl != x) {",
           "        if (0) {",
           ("tests/dissect/test_mid_segment.py::test_why_no_next_message_is_counted",),
           "two different Content-Lengths give the first one's length (request smuggling shape)"),
    Mutant("W2", "ext/walk/httpcont.c",
           "    if (kind == WT_MSG_REQUEST && wt_line_ends_with_version(q, *tok_end, n))",
           "    if (kind == WT_MSG_REQUEST)",
           ("tests/dissect/test_after_continuation.py::test_doubt_takes_nothing_and_is_counted",
            "tests/dissect/test_after_continuation.py::test_not_a_continued_block_nothing_taken_nothing_counted"),
           "after a continued block, a request line need not end with its version (not strict)"),
    # ---- canonical form (ext/url/urlcanon.h rules R1-R9)
    Mutant("C1", "ext/url/urlcanon.h",
           "        if (c >= 'A' && c <= 'Z') c |= 0x20;\n        if (c == '.') {",
           "        if (c == '.') {",
           (f"{CANON}::test_r4_host_lower_dots_escapes",), "R4: host not lower-cased"),
    Mutant("C2", "ext/url/urlcanon.h",
           "if (digits && port != 80 && port != 443) {", "if (digits && port != 80) {",
           (f"{CANON}::test_r5_port",), "R5: port 443 kept"),
    Mutant("C3", "ext/url/urlcanon.h",
           "    if (flags & CANON_KEY) _canon_reverse_labels(out, o);\n    if (has_port) {",
           "    if (has_port) {",
           (f"{CANON}::test_r9_key_form",), "R9: key form without reversed labels"),
    Mutant("C4", "ext/url/urlcanon.h",
           "                while (o > path_start && out[o - 1] != '/') o--;\n"
           "                if (o > path_start) o--;",
           "                while (o > path_start && out[o - 1] != '/') o--;",
           (f"{CANON}::test_r7_dot_segments_and_slashes",), "R7: '..' leaves a '/' behind"),
    Mutant("C5", "ext/url/urlcanon.h",
           "        if (q + 1 < end) {\n            if (o >= cap) return CANON_TOO_LONG;\n            out[o++] = '?';",
           "        if (q < end) {\n            if (o >= cap) return CANON_TOO_LONG;\n            out[o++] = '?';",
           (f"{CANON}::test_r8_fragment_and_query",), "R8: an empty query kept"),
    # ---- forged FIN/RST (ext/url/urlmatch.pyx)
    Mutant("F1", "ext/url/urlmatch.pyx",
           "seq_end = m.seq + m.payload_len + (1 if m.tcp_flags & 0x01 else 0)",
           "seq_end = m.seq + m.payload_len",
           (f"{FORGE}::test_request_with_fin_counts_the_fin_in_the_sequence",), "forge: the FIN not counted"),
    Mutant("F2", "ext/url/urlmatch.pyx",
           "seq_end = m.seq + m.payload_len + (1 if m.tcp_flags & 0x01 else 0)",
           "seq_end = m.seq + (1 if m.tcp_flags & 0x01 else 0)",
           (f"{FORGE}::test_forged_frames_equal_scapy_reference",), "forge: RST seq = request's seq"),
    Mutant("F3", "ext/url/urlmatch.pyx",
           "_put16(f + tcp_at + 16, _fold(acc + 0x14))", "_put16(f + tcp_at + 16, _fold(acc + 0x11))",
           (f"{FORGE}::test_forged_frames_equal_scapy_reference",), "forge: RST TCP checksum"),
    Mutant("F4", "ext/url/urlmatch.pyx",
           "ip_sum = _fold(acc + 0x4500 + 40 + 0x4000", "ip_sum = _fold(acc + 0x4500 + 41 + 0x4000",
           (f"{FORGE}::test_forged_frames_equal_scapy_reference",), "forge: IPv4 header checksum"),
    Mutant("F5", "ext/url/urlmatch.pyx",
           "bl += 1 + wt_u32_dec(m.dst_port, <char *>buf + bl + 1)",
           "bl += 1 + wt_u32_dec(m.src_port, <char *>buf + bl + 1)",
           ("tests/quic/test_sni_bad_input.py::test_server_port_is_part_of_the_key",),
           "SNI key: the client's port instead of the server's"),
    # ---- fingerprints and ids
    Mutant("J1", "ext/tls/tls_fp.h",
           "for (j = i; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];",
           "for (j = i; j > 0 && a[j - 1] < v; j--) a[j] = a[j - 1];",
           ("tests/tls/test_ja4_independent.py", "tests/tls/test_ja4_reference.py"),
           "JA4: lists sorted descending"),
    Mutant("J2", "ext/tls/tls_fp.h",
           "if (v == 0 || v == 16) continue;", "if (v == 0) continue;",
           ("tests/tls/test_ja4_independent.py", "tests/tls/test_ja4_reference.py"),
           "JA4: ALPN hashed with the extensions"),
    Mutant("I1", "ext/out/communityid.pyx",
           "if c > 0 or (c == 0 and ap > bp):", "if c > 0:",
           ("tests/outputs/test_community_id.py::test_seeds_orders_and_families",),
           "Community ID: port order of equal addresses"),
    Mutant("I2", "ext/out/communityid.pyx",
           "    buf[k + 1] = 0\n", "    buf[k + 1] = 1\n",
           ("tests/outputs/test_community_id.py::test_seeds_orders_and_families",),
           "Community ID: the padding byte"),
    # ---- QUIC close (ext/url/quic_close.h)
    Mutant("Q1", "ext/url/quic_close.h",
           "quic_varint_put(out + off, pn_len + frames + QUIC_TAG_LEN, 2);",
           "quic_varint_put(out + off, pn_len + frames, 2);",
           ("tests/quic/test_quic_crypto.py::test_forged_close_opens_as_a_server_initial",),
           "QUIC close: Length without the AEAD tag"),
    # ---- Dask repair (httpanalyzer/distributed.py)
    Mutant("D1", "httpanalyzer/distributed.py",
           "if same_state(p.table.export_pending(), r.ckpt_state):", "if True:",
           (f"{DIST}::test_repair_state_check_fails_and_the_chunk_is_run_again",),
           "repair: the state check always passes"),
    Mutant("D2", "httpanalyzer/distributed.py",
           'st["threshold"] = int(v) + 2 * T', 'st["threshold"] = int(v) + 1 * T',
           (f"{DIST}::test_repair_two_windows_suffice_without_rerun",),
           "repair: checkpoint one GC window after the chunk's first message"),
    Mutant("D3", "httpanalyzer/distributed.py",
           "valid = r.first_event is None or clock is None or r.first_event >= clock",
           "valid = True",
           (f"{DIST}::test_repair_rerun_when_the_clock_runs_back_over_a_boundary",),
           "repair: the clock running back over a boundary not seen"),
    # ---- the parallel plan (webtap/rangeplan.py, issue 36)
    Mutant("R1", "webtap/rangeplan.py",
           "elif s.start != prev_end or (fmt == FMT_PCAPNG and s.swap != prev_swap):",
           "elif False:",
           ("tests/distributed/test_rangeplan.py::test_a_fake_record_chain_at_a_range_start",),
           "plan: a range accepted without meeting the previous one (a fake chain trusted)"),
    Mutant("R2", "webtap/rangeplan.py",
           "        if not s.regular:", "        if False:",
           ("tests/distributed/test_rangeplan.py::"
            "test_corrupt_record_and_simple_packet_block_are_planned_sequentially",),
           "plan: a range the reader reads only in sequence planned apart"),
]


def _files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def sync() -> None:
    """Copy the working tree's files into SRC (only the changed ones, so ninja stays incremental)."""
    for f in _files():
        s, d = ROOT / f, SRC / f
        if d.exists() and d.read_bytes() == s.read_bytes():
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(s, d)


def build() -> None:
    bindir = pathlib.Path(sys.executable).parent
    if not (BLD / "build.ninja").exists():
        subprocess.run([str(bindir / "meson"), "setup", str(BLD), str(SRC)], check=True,
                       stdout=subprocess.DEVNULL)
    r = subprocess.run([str(bindir / "ninja"), "-C", str(BLD)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"build failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")


# The copy's packages ahead of the editable install (whose finder would name the real tree's)
BOOT = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
        "if 'editable' not in type(f).__module__.lower() and 'mesonpy' not in type(f).__name__.lower()]; "
        "sys.path.insert(0, sys.argv[1]); import pytest; sys.exit(pytest.main(sys.argv[2:]))")


def run_tests(tests, log: pathlib.Path) -> int:
    env = dict(os.environ, WEBTAP_EXT_DIR=str(BLD / "ext"), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-c", BOOT, str(SRC), "-q", "-x", "-p", "no:cacheprovider",
           "-o", "addopts=", *tests]
    with open(log, "w") as f:
        return subprocess.run(cmd, cwd=SRC, env=env, stdout=f, stderr=subprocess.STDOUT).returncode


def check_copy_is_used(log: pathlib.Path) -> None:
    """The tests must import the copy, not the real tree (else a kill would mean nothing)."""
    code = ("import webtap._ext.avl as a, httpanalyzer.distributed as d; "
            "print(a.__file__); print(d.__file__)")
    env = dict(os.environ, WEBTAP_EXT_DIR=str(BLD / "ext"), PYTHONDONTWRITEBYTECODE="1")
    boot = BOOT.replace("import pytest; sys.exit(pytest.main(sys.argv[2:]))", code)
    out = subprocess.run([sys.executable, "-c", boot, str(SRC)], cwd=SRC, env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    if not all(o.startswith(str(WORK)) for o in out):
        raise RuntimeError(f"the tests would not run the copy: {out}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="mutants", description=__doc__.split("\n")[0])
    ap.add_argument("ids", nargs="*", help="mutant ids (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and their tests")
    a = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not a.ids or m.id in a.ids]
    if a.ids and len(chosen) != len(set(a.ids)):
        ap.error(f"unknown mutant id among {a.ids}")
    if a.list:
        for m in chosen:
            print(f"{m.id:3} {m.path:30} {m.what}\n    " + "\n    ".join(m.tests))
        return 0
    WORK.mkdir(parents=True, exist_ok=True)
    logs = WORK / "logs"
    logs.mkdir(exist_ok=True)
    sync()
    for m in chosen:                  # every mutant applies to the current source exactly once
        n = (SRC / m.path).read_text().count(m.old)
        if n != 1:
            print(f"mutants: error: {m.id}: the text to replace occurs {n} times in {m.path}",
                  file=sys.stderr)
            return 2
    build()
    check_copy_is_used(logs / "copy.log")
    tests = sorted({t for m in chosen for t in m.tests})
    print(f"baseline: {len(tests)} test selections on the unmodified copy ...", flush=True)
    if run_tests(tests, logs / "baseline.log"):
        print(f"mutants: error: the baseline fails (see {logs / 'baseline.log'})", file=sys.stderr)
        return 2
    rows = []
    for m in chosen:
        f = SRC / m.path
        orig = f.read_text()
        t0 = time.monotonic()
        try:
            f.write_text(orig.replace(m.old, m.new))
            build()
            b = time.monotonic() - t0
            rc = run_tests(list(m.tests), logs / f"{m.id}.log")
        finally:
            f.write_text(orig)
        if rc == 0:
            res = "SURVIVED"
        elif rc == 1 or rc < 0:
            res = "killed" if rc == 1 else f"killed (signal {-rc})"
        else:
            res = f"ERROR (pytest exit {rc})"
        rows.append((m, res))
        print(f"{m.id:3} {res:18} build {b:5.1f} s, tests {time.monotonic() - t0 - b:5.1f} s  "
              f"{m.what}", flush=True)
    build()                           # the copy back to the unmodified source
    print("\n| id | file | mutant | tests | result |\n|---|---|---|---|---|")
    for m, res in rows:
        names = ", ".join(t.split("::")[-1] if "::" in t else t.rsplit("/", 1)[-1] for t in m.tests)
        print(f"| {m.id} | {m.path} | {m.what} | {names} | {res} |")
    killed = sum(r.startswith("killed") for _, r in rows)
    print(f"\n{killed} of {len(rows)} mutants killed")
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
