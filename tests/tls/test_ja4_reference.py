"""JA4 against the reference tool's published outputs (FoxIO-LLC/ja4 python/test/testdata/*.json,
copied unchanged into ../shared/traces-tls/ja4/): every JA4 value listed there must be the JA4 of
a ClientHello webtap found on the same connection, in the same order."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.conftest import SHARED

JA4_DIR = SHARED / "traces-tls" / "ja4"
PREFIX = "python_test_testdata_"
CASES = sorted(p.name[len(PREFIX):-5] for p in JA4_DIR.glob(PREFIX + "*.json")) if JA4_DIR.is_dir() else []


def reference(capture: str) -> dict:
    """{(client ip, client port, server ip, server port): [JA4.1, JA4.2, ...]}"""
    out = {}
    for e in json.loads((JA4_DIR / (PREFIX + capture + ".json")).read_text()):
        vals = [e[k] for k in sorted((k for k in e if k.startswith("JA4.")), key=lambda k: int(k[4:]))]
        if vals:
            out[(e["src"], int(e["srcport"]), e["dst"], int(e["dstport"]))] = vals
    return out


def test_reference_outputs_present():
    if not JA4_DIR.is_dir():
        pytest.skip(f"shared data absent: {JA4_DIR}")
    assert len(CASES) == 11
    assert sum(len(v) for c in CASES for v in reference(c).values()) >= 80


@pytest.mark.parametrize("capture", CASES)
def test_ja4_matches_reference(capture):
    from httpanalyzer import analyze_tls

    ref = reference(capture)
    df = analyze_tls(str(JA4_DIR / capture))
    got = defaultdict(list)
    for r in df.itertuples(index=False):
        if isinstance(r.ja4, str):
            got[(r.client_ip, r.client_port, r.server_ip, r.server_port)].append(r.ja4)
    for key, vals in ref.items():
        assert got.get(key, [])[:len(vals)] == vals, key
