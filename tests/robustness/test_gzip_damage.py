"""Found by the corrupt-trace corpus: a gzip'd capture damaged in the middle of its deflate data
(not cut short) was refused whole as "empty file, not a capture" when it was smaller than the
1 MiB read: zlib returns nothing of a decompress() call that fails."""
import gzip
import os

from tests import pcapbuild as pb
from webtap.capture import open_trace


def test_damage_inside_deflate_data_keeps_the_packets_before_it(tmp_path):
    pkts = [(i * 1000, os.urandom(600)) for i in range(300)]
    z = bytearray(gzip.compress(pb.pcap(pkts), mtime=0))
    mid = len(z) // 2
    for j in range(mid, mid + 8):
        z[j] ^= 0xA5
    p = tmp_path / "d.pcap.gz"
    p.write_bytes(bytes(z))
    with open_trace(p) as t:
        got = [b.packet(i) for b in t for i in range(len(b))]
        warnings = t.warnings
    # random payloads barely compress: the damage sits near the middle packet
    assert 100 < len(got) < 300
    assert got == [d for _, d in pkts[: len(got)]]
    assert any("gzip stream damaged" in w for w in warnings)
