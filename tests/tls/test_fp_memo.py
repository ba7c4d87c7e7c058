"""The fingerprints' digest memo (ext/tls/tls_fp.c tls_fp_digest: recent MD5 / SHA-256 inputs
and their digests, a hit only for an input equal byte for byte): JA3, JA3S and JA4 of many
handshakes whose inputs repeat, evict one another from the memo's 256 slots, and some of which
are too long to be kept, against Python's hashlib over the strings written from the built hellos'
own fields (JA3, salesforce/ja3) and tests/tls/ja4_spec.py (JA4.md)."""
from __future__ import annotations

import hashlib
import random

from httpanalyzer import analyze_tls
from tests.tls import hellobuild as hb
from tests.tls import ja4_spec


def test_fingerprints_of_repeated_and_evicted_inputs_are_the_references(tmp_path):
    rnd = random.Random(29)
    variants = []
    for k in range(300):
        n = 3 + k % 7 if k % 10 else 90 + k % 13          # every tenth: a JA3/JA4 input > 480 bytes
        ciphers = [c for c in (0x1301 + (k * 7 + i) % 4000 for i in range(n))
                   if c not in ja4_spec.GREASE]              # (JA3 leaves GREASE values out)
        groups = [0x001d, 0x0017 + k % 3]
        exts = [hb.sni_ext(f"h{k}.example".encode()), hb.groups_ext(groups),
                hb.ecpf_ext([0]), hb.ext(13 + k % 2, b"\x00\x02\x04\x03"), hb.ext(65281, b"\x00")]
        ext_types = [0, 10, 11, 13 + k % 2, 65281]
        sh_cipher = ciphers[k % n]
        variants.append((hb.client_hello(ciphers=ciphers, exts=exts), ciphers, ext_types, groups,
                         hb.server_hello(cipher=sh_cipher, exts=[hb.ext(65281, b"\x00")]), sh_cipher))
    order = [v for v in range(300) for _ in range(2)]
    rnd.shuffle(order)
    conns = [{"ch": hb.records(variants[v][0]), "sh": hb.records(variants[v][4])} for v in order]
    p = tmp_path / "memo.pcap"
    hb.handshake_pcap(p, conns)
    df = analyze_tls(str(p))
    assert len(df) == 600 and df.matched.all()
    for (_, r), v in zip(df.iterrows(), order):
        msg, ciphers, ext_types, groups, _, sh_cipher = variants[v]
        ja3 = f"{0x0303},{'-'.join(map(str, ciphers))},{'-'.join(map(str, ext_types))}," \
              f"{'-'.join(map(str, groups))},0"
        assert r.ja3 == hashlib.md5(ja3.encode()).hexdigest()
        assert r.ja3s == hashlib.md5(f"{0x0303},{sh_cipher},65281".encode()).hexdigest()
        assert r.ja4 == ja4_spec.ja4(ja4_spec.parse_client_hello(msg))
    long_inputs = sum(1 for v in range(300) if v % 10 == 0)
    assert long_inputs == 30
