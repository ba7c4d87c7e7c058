"""The one QUIC Initial gatherer (ext/tls/quic_initial.c, issue 29): the TLS stage and the
filter's SNI pass read the same CRYPTO frames the same way. A ClientHello cut into many frames,
in one packet (more than the in-packet path's 16, shuffled, some repeated, PING/ACK/PADDING
between them) and over two datagrams, gives both tables the same one ClientHello: the SNI the
test put in, once. A frame past the 16 KiB cap, or a CONNECTION_CLOSE among the frames, gives
neither a hello."""
from __future__ import annotations

import random

import numpy as np
import pytest

from httpanalyzer.tls import analyze_tls
from webtap._ext import urlmatch as um
from webtap.capture import open_trace

from .hello import client_hello, crypto, frame, initial, sni_ext, write

DCID = bytes.fromhex("a1a2a3a4a5a6a7a8")
SNI = b"many-frames.example"
PING = b"\x01"
ACK = b"\x02\x05\x00\x00\x01"        # largest 5, delay 0, no extra range, first range 1


def _pieces(ch: bytes, n: int, seed: int) -> list[bytes]:
    """ch cut into n CRYPTO frames, shuffled, every third one repeated, PING/ACK in between."""
    cuts = sorted(random.Random(seed).sample(range(1, len(ch)), n - 1))
    bounds = [0, *cuts, len(ch)]
    fr = [crypto(a, ch[a:b]) for a, b in zip(bounds, bounds[1:])]
    fr += fr[::3]
    random.Random(seed + 1).shuffle(fr)
    return [f + (PING if i % 2 else ACK) for i, f in enumerate(fr)]


def _sni_rows(path):
    t = um.SniTable()
    names, cnt = [], np.zeros(len(um.SNI_REASONS), np.uint64)
    for b in open_trace(str(path)):
        msgs, proto, flags, keys, koff, sni, soff, c = t.extract(b.packets, b.data, False)
        cnt += c
        names += [bytes(sni[soff[i]:soff[i + 1]]) for i in range(len(msgs))]
    return names, dict(zip(um.SNI_REASONS, cnt.tolist()))


def _tls_snis(path):
    df = analyze_tls(str(path))
    return [s.encode() for s in df["sni"] if isinstance(s, str)], df


@pytest.mark.parametrize("n", [2, 16, 17, 40])
def test_many_frames_in_one_packet(tmp_path, n):
    ch = client_hello(sni_ext(SNI), quic=True)
    p = tmp_path / "one.pcap"
    write(p, [frame(initial(b"".join(_pieces(ch, n, n)), dcid=DCID), sport=1000 + n, udp=True)])
    names, cnt = _sni_rows(p)
    assert names == [SNI] and cnt["quic_crypto_bad"] == 0 and cnt["quic_hello_bad"] == 0
    snis, df = _tls_snis(p)
    assert snis == [SNI] and len(df) == 1


@pytest.mark.parametrize("n", [4, 30])
def test_frames_over_two_datagrams(tmp_path, n):
    ch = client_hello(sni_ext(SNI), quic=True)
    pieces = _pieces(ch, n, 7 * n)
    half = len(pieces) // 2
    p = tmp_path / "two.pcap"
    write(p, [frame(initial(b"".join(pieces[:half]), dcid=DCID, pn=0), sport=2000, udp=True),
              frame(initial(b"".join(pieces[half:]), dcid=DCID, pn=1), sport=2000, udp=True)])
    names, cnt = _sni_rows(p)
    assert names == [SNI] and cnt["quic_crypto_bad"] == 0
    snis, _ = _tls_snis(p)
    assert snis == [SNI]


def test_frame_past_the_cap_gives_no_hello(tmp_path):
    ch = client_hello(sni_ext(SNI), quic=True)
    p = tmp_path / "cap.pcap"
    write(p, [frame(initial(crypto(0, ch[:100]) + crypto(16384, b"x") + crypto(100, ch[100:]),
                            dcid=DCID), sport=3000, udp=True)])
    names, cnt = _sni_rows(p)
    assert names == [] and cnt["quic_crypto_bad"] == 1
    snis, _ = _tls_snis(p)
    assert snis == []


def test_connection_close_among_the_frames(tmp_path):
    """A CONNECTION_CLOSE (0x1c) ends the frame walk: the filter counts the Initial bad (no
    lookup); the TLS stage keeps the frames before it and finds no whole hello."""
    ch = client_hello(sni_ext(SNI), quic=True)
    k = len(ch) // 2
    close = b"\x1c\x02\x00\x00"
    p = tmp_path / "close.pcap"
    write(p, [frame(initial(crypto(0, ch[:k]) + close + crypto(k, ch[k:]), dcid=DCID), sport=4000,
                    udp=True)])
    names, cnt = _sni_rows(p)
    assert names == [] and cnt["quic_crypto_bad"] == 1
    snis, _ = _tls_snis(p)
    assert snis == []
