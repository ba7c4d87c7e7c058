"""The TLS stage's messages come from the dissector's walk (ext/walk/dissect.pyx, MSG_TLS / MSG_QUIC
of ext/walk/message.pxd): the HTTP messages of that walk do not change, split hellos complete whatever
the batch boundaries (the watch list, ext/tls/tls.pxd TlsWatch, carries their flows from one batch
to the next), and a watch list that fills up hands over every TCP payload instead of losing
continuations."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import SHARED
from tests.tls import hellobuild as hb


def _batches(path, batch_size=8192):
    from webtap.capture import open_trace

    with open_trace(str(path), progress=False, batch_size=batch_size) as tr:
        for b in tr:
            yield b.packets.copy(), np.frombuffer(bytes(b.data), np.uint8)


def _records(path, cuts=None, batch_size=8192):
    """The TLS stage fed batch by batch; cuts: split every batch into slices of this many
    packets (the slices share the batch's buffer)."""
    from httpanalyzer.tls import TlsRun

    run = TlsRun()
    for pk, data in _batches(path, batch_size):
        step = cuts or len(pk) or 1
        for i in range(0, len(pk), step):
            assert run.feed(pk[i:i + step], data) is None   # records leave at the end, in order
    tab = run.finish()
    return (tab.to_pylist() if tab is not None else []), run.counters()


def _split_pcap(path, n):
    """n ClientHellos of two segments each: every first segment, then every second one, then
    the ServerHellos (so n flows wait for their continuation at once)."""
    from tests.pcapbuild import pcap

    t, first, second, sh = 1_700_000_000 * 10**9, [], [], []
    stream = hb.records(hb.client_hello(exts=[hb.keyshare_ext([(0x11EC, b"\x01" * 1216)]),
                                              hb.sni_ext(b"two.example")]))
    srv = _sh()
    for i in range(n):
        cli = f"10.1.{i >> 8 & 255}.{i & 255}"
        first.append(hb.tcp_packet(cli, "10.0.0.2", 40000, 443, 1000, 5000, stream[:1000]))
        second.append(hb.tcp_packet(cli, "10.0.0.2", 40000, 443, 2000, 5000, stream[1000:]))
        sh.append(hb.tcp_packet("10.0.0.2", cli, 443, 40000, 5000, 1000 + len(stream), srv))
    pkts = [(t + k * 1000, p) for k, p in enumerate(first + second + sh)]
    path.write_bytes(pcap(pkts))


def _sh():
    return hb.records(hb.server_hello(cipher=0x1302, exts=[hb.ext(43, b"\x03\x04")]))


def test_http_messages_unchanged_and_tls_kinds_apart():
    """The walk with the watch list gives the same HTTP messages and counters, and the TLS
    stage's messages (kinds 3 and 4 only) in their own array."""
    from webtap.dissect import dissect
    from webtap.records.message import MSG_REQUEST
    from httpanalyzer.tls import TlsRun

    path = SHARED / "traces" / "arkime" / "arkime_synthetic.pcap"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    run, kinds, http = TlsRun(), set(), 0
    for pk, data in _batches(path):
        a = dissect(pk, data)
        b = dissect(pk, data, tls_watch=run.watch)
        assert a.tls is None
        assert a.msgs.tobytes() == b.msgs.tobytes() and a.counters == b.counters
        kinds |= set(np.unique(b.tls["kind"]).tolist())
        http += int((a.msgs["kind"] == MSG_REQUEST).sum())
        run.feed(pk, data, b.tls)
    assert http > 0 and kinds == {3, 4}      # this trace has HTTP, TLS over TCP and QUIC
    assert run.counters()["client_hello"] > 0


def test_split_hellos_whatever_the_batching(tmp_path):
    """A ClientHello whose second segment is in a later batch completes as when both are in
    one batch: the same records for batches of 1, 2, 3 packets and one batch."""
    p = tmp_path / "split.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.chrome_like(sni=f"s{i}.example".encode())),
                           "ch_split": [700, 500, 10_000], "sh": _sh()} for i in range(5)])
    ref, c = _records(p)
    assert len(ref) == 5 and all(r["matched"] and r["ch_segments"] == 3 for r in ref)
    assert c["split_hello"] == 5
    for cuts in (1, 2, 3):
        got, _ = _records(p, cuts=cuts)
        assert got == ref, cuts


def test_full_watch_list_loses_no_continuation(tmp_path):
    """3,000 split ClientHellos start in one batch (more than the 4,096-slot watch list holds
    at half load, with the default 1,024 reassemblies): the walk then hands over every TCP
    payload. The reassembly table keeps the last 1,024 (the older ones leave with reason
    reassembly_cap, as before the walk was shared) and every one of those completes, the
    ones the watch list had no room for included."""
    p = tmp_path / "many.pcap"
    _split_pcap(p, 3000)
    recs, c = _records(p, batch_size=1 << 16)
    done = [r for r in recs if r["matched"]]
    assert len(done) == 1024
    assert all(r["ch_segments"] == 2 and r["sni"] == "two.example" for r in done)
    assert {r["client_ip"] for r in done} == {f"10.1.{i >> 8 & 255}.{i & 255}" for i in range(1976, 3000)}
    assert c["split_hello"] == 1024 and c["evicted_reassembly_cap"] == 1976 and c["incomplete"] == 0
