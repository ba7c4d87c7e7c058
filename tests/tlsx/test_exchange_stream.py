"""The exchanges of a streamed run (one trace or a live capture): written while the run goes on,
in row groups, as the handshakes are (httpanalyzer.tls ExchangeRun.ready, OnePass).

ExchangeTable.bounds() says (ready_before) below which packet no record is still to come and
(hellos, next_hello) which ClientHellos the connections a later record can belong to have. Both
are checked against the records the stage really makes afterwards, over batches small enough
that requests wait across many batch ends. The streamed files are checked against the table the
stage gives when nothing is streamed (iter_exchanges: every record at the end, one join)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import SHARED

TRACES = ["traces-tls/httpreplay/2019-05-01-airfrance-fr-traffic.pcap",
          "traces-tls/pcapplusplus/ExamplesTest_pcap_examples_tls2.pcap",
          "traces-tls/ndpi/teams.pcap"]


def _path(rel):
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    return path


def _walk(table, b):
    """One batch walked with the stage as the walk's tap (its records stay in the table)."""
    from webtap._ext.dissect import dissect_batch
    dissect_batch(b.packets, np.asarray(b.data), None, None, 0, None, None, table.tap)


def _first(raw):
    return np.where(raw["has_req"] == 1, raw["req_frame"], raw["resp_frame"])


@pytest.mark.parametrize("rel", TRACES)
def test_bounds_hold_for_every_record_made_later(rel):
    from webtap._ext.exchange import ExchangeTable
    from webtap.capture import open_trace
    from webtap.records.exchange import EXCHANGE_RECORD_DTYPE

    table = ExchangeTable()
    seen = []                          # (bounds, the records taken at the same time)
    with open_trace(str(_path(rel)), progress=False, batch_size=8) as tr:
        for b in tr:
            _walk(table, b)
            seen.append((table.bounds(), table.take().view(EXCHANGE_RECORD_DTYPE)))
    table.flush()
    seen.append(((None, None, None), table.take().view(EXCHANGE_RECORD_DTYPE)))
    total = sum(len(r) for _, r in seen)
    assert total >= 20
    # the smallest first frame of the records taken at or after each call
    big = np.uint64(2**64 - 1)
    mins = np.array([_first(r).min() if len(r) else big for _, r in seen], dtype=np.uint64)
    later = np.minimum.accumulate(mins[::-1])[::-1]
    useful = 0
    for k, ((before, next_hello, hellos), _) in enumerate(seen[:-1]):
        # a record's frames are 1-based, the bound a 0-based packet index
        assert later[k + 1] > before, f"a record made after batch {k} starts below its bound"
        # every record made later belongs to a connection the call named, or to a newer one
        made = np.concatenate([r["ch_frame"] for _, r in seen[k + 1:]])
        known = np.isin(made, hellos) | (made >= next_hello)
        assert known.all(), f"a record made after batch {k} belongs to a connection it did not name"
        useful += bool(len(seen[k][1])) and bool((_first(seen[k][1]) <= before).any())
    # the bound is not trivially low: records were ready while others were still to come
    assert useful >= 3


def test_bounds_give_up_once_frames_go_back():
    """Several traces in a row number their frames each from 1: a record of the next trace may
    sort before any already taken, so nothing is ready any more."""
    from webtap._ext.exchange import ExchangeTable
    from webtap.capture import open_trace

    path = _path(TRACES[0])
    table = ExchangeTable()
    for k in range(2):
        with open_trace(str(path), progress=False, batch_size=64) as tr:
            for b in tr:
                _walk(table, b)
        if k == 0:
            assert table.bounds()[0] > 100
    assert table.bounds()[0] == 0


@pytest.mark.parametrize("rel", TRACES[:2])
@pytest.mark.parametrize("how", ["tls", "one-pass", "consumers"])
def test_streamed_exchanges_are_the_whole_table(tmp_path, small_streams, rel, how):
    from httpanalyzer.cli import main
    from httpanalyzer.tls_exchange import iter_exchanges

    path = _path(rel)
    want, _ = iter_exchanges([str(path)])          # nothing streamed: one table at the end
    made = small_streams(8, 8)
    x = tmp_path / "x.parquet"
    if how == "tls":
        args = ["tls", str(path), "-o", str(tmp_path / "t.parquet"), "--exchanges-out", str(x)]
    else:
        args = [str(path), "-o", str(tmp_path / "h.parquet"), "--tls-out", str(tmp_path / "t.parquet"),
                "--exchanges-out", str(x), "--consumers", "0" if how == "one-pass" else "2",
                "--no-progress"]
    assert main(args + ["-q"]) == 0
    got = pq.read_table(x)
    assert want.num_rows >= 20
    assert got.equals(want)
    # written while the run went on: row groups of at least STREAM_ROWS records, then the rest
    groups = [g.num_rows for g in (pq.ParquetFile(x).metadata.row_group(i)
                                   for i in range(pq.ParquetFile(x).num_row_groups))]
    assert len(groups) >= 2 and all(n >= 8 for n in groups[:-1])
    (one,) = made
    assert one.xwritten == [] and one.written == []          # nothing kept (no --plots)


def test_ready_looks_again_when_the_handshakes_move_on(monkeypatch):
    """ready() also looks when TlsRun hands out handshakes (moved: the join's limit moved on),
    however few records came since its last look: the records that waited for those handshakes
    are handed out then, not only once STREAM_ROWS more records have come. One thread walks
    (the stage's tap over real packets) and asks, so the sequence is the same on every run;
    every record is handed out once, each part before every record after it."""
    from httpanalyzer import tls as tlsmod
    from webtap._ext.dissect import dissect_batch
    from webtap.capture import open_trace

    monkeypatch.setattr(tlsmod.ExchangeRun, "STREAM_ROWS", 4)
    run = tlsmod.ExchangeRun(stream=True)
    parts, early = [], 0
    with open_trace(str(_path(TRACES[0])), progress=False, batch_size=16) as tr:
        for b in tr:
            with run.lock:
                dissect_batch(b.packets, np.asarray(b.data), None, None, 0, None, None, run.tap)
            run.collect()
            assert run.ready(0) is None              # no handshake out yet: nothing joins
            if run._nraw < run._next_try:
                assert run.ready(1 << 40) is None    # the count alone does not look now
                out = run.ready(1 << 40, moved=True)
                if out is not None:
                    early += 1
                    parts.append(out)
    parts.append(run.finish())
    assert early >= 3
    firsts = [_first(p) for p in parts if len(p)]
    for k in range(len(firsts) - 1):
        assert firsts[k].max() <= np.concatenate(firsts[k + 1:]).min()
    from httpanalyzer.tls_exchange import iter_exchanges
    want, _ = iter_exchanges([str(_path(TRACES[0]))])
    assert sum(len(p) for p in parts) == want.num_rows


def test_columns_every_record_has_are_required_in_parquet(tmp_path):
    """The 4-tuple, Community ID, ClientHello frame and flags are never null: written as required
    Parquet columns (no definition levels), the others optional; the file reads back as the
    table."""
    from httpanalyzer.cli import main
    from httpanalyzer.tls_exchange import iter_exchanges
    from webtap.records.exchange import EXCHANGE_REQUIRED

    path = _path(TRACES[1])
    want, _ = iter_exchanges([str(path)])
    x = tmp_path / "x.parquet"
    assert main(["tls", str(path), "-o", str(tmp_path / "t.parquet"), "--exchanges-out", str(x),
                 "-q"]) == 0
    f = pq.ParquetFile(x)
    required = {f.schema.column(i).name for i in range(len(f.schema))
                if f.schema.column(i).max_definition_level == 0}
    assert required == set(EXCHANGE_REQUIRED)
    assert all(want.column(c).null_count == 0 for c in required)
    assert any(want.column(c).null_count for c in want.column_names if c not in required)
    assert f.read().equals(want)


def test_streamed_exchanges_as_csv(tmp_path, small_streams):
    """The text formats get each streamed table through the same view as the last one."""
    import csv

    from httpanalyzer.cli import main
    from httpanalyzer.tls import text_view
    from httpanalyzer.tls_exchange import iter_exchanges

    path = _path(TRACES[0])
    want, _ = iter_exchanges([str(path)])
    small_streams(8, 8)
    x = tmp_path / "x.csv"
    assert main(["tls", str(path), "-o", str(tmp_path / "t.csv"), "--exchanges-out", str(x),
                 "-q"]) == 0
    with open(x, newline="") as f:
        rows = list(csv.reader(f))
    view = text_view(want)
    assert rows[0] == view.column_names
    assert len(rows) - 1 == want.num_rows
    frames = [r[view.column_names.index("request_frame")] for r in rows[1:]]
    assert frames == ["" if v is None else str(v) for v in want["request_frame"].to_pylist()]


def _pcap_records(raw):
    """(timestamp, record bytes) of each packet of a little-endian pcap."""
    import struct

    out, o = [], 24
    while o < len(raw):
        ts_s, ts_us, incl, _ = struct.unpack_from("<IIII", raw, o)
        out.append(((ts_s, ts_us), raw[o:o + 16 + incl]))
        o += 16 + incl
    return out


def test_handshakes_no_exchange_can_need_are_dropped(tmp_path, monkeypatch, small_streams):
    """A long capture holds the handshakes of the connections that can still have exchanges,
    not all, however long one of them lives: one connection asks every 2 s for 220 s while 40
    short ones (tests/tlsx/convbuild.py) come and go, each idle past the GC timeout before the
    next starts. The long one's handshake stays joined to the end; the streamed file is still
    the whole table."""
    from httpanalyzer.cli import main
    from httpanalyzer.tls_exchange import iter_exchanges
    from tests.tlsx.convbuild import build, rec, tls12_handshake
    from webtap.records import exchange as xmod

    t0 = 1_700_000_000_000_000_000
    fl = list(tls12_handshake())
    for _ in range(110):
        fl += [("c", [rec(23, 120)], "req"), ("s", [rec(23, 1800)], "resp")]
    raws = [build(fl, 700, client=("10.0.0.9", 50000), t0=t0, gap_ns=1_000_000_000)[0]]
    for i in range(40):
        fs = list(tls12_handshake(resumed=bool(i % 2)))
        for _ in range(3):
            fs += [("c", [rec(23, 120)], "req"), ("s", [rec(23, 1800)], "resp")]
        raws.append(build(fs, 700, client=("10.0.0.1", 40000 + i), t0=t0 + (i + 1) * 5_000_000_000)[0])
    packets = sorted((p for raw in raws for p in _pcap_records(raw)), key=lambda p: p[0])
    path = tmp_path / "conv.pcap"
    path.write_bytes(raws[0][:24] + b"".join(r for _, r in packets))
    want, _ = iter_exchanges([str(path)], gc_timeout=2.0)
    assert want.num_rows == 110 + 120 and all(want["matched"].to_pylist())
    assert want["sni"].null_count == 0          # the join found every handshake

    held = []
    keep = xmod.JoinedHandshakes.keep

    def counting_keep(self, hellos, after):
        keep(self, hellos, after)
        held.append(self.rows)
    monkeypatch.setattr(xmod.JoinedHandshakes, "keep", counting_keep)
    monkeypatch.setattr(xmod.JoinedHandshakes, "SLACK", 0)
    small_streams(2, 2, batch=16)
    x = tmp_path / "x.parquet"
    assert main(["tls", str(path), "-o", str(tmp_path / "t.parquet"), "--exchanges-out", str(x),
                 "--gc-timeout", "2", "-q"]) == 0
    assert pq.read_table(x).equals(want)
    # 41 handshakes went by; never more than a few held at once (twice those needed: the long
    # connection's, the short one's under way, one or two just begun)
    assert len(held) >= 15 and max(held) <= 12


def test_joined_handshakes_keep_those_a_later_exchange_can_need(monkeypatch):
    from webtap.records.exchange import JoinedHandshakes

    monkeypatch.setattr(JoinedHandshakes, "SLACK", 0)

    def tab(frames):
        return pa.table({"request_frame": pa.array(frames, pa.uint64()),
                         "sni": pa.array([f"h{f}" for f in frames], pa.string())})
    j = JoinedHandshakes()
    j.add(tab([1, 5, None]))           # no ClientHello frame: joined by none
    j.add(tab([7, 9]))
    j.add(None)
    j.add(tab([]))
    assert j.rows == 5 and len(j.tabs) == 2
    j.keep(np.array([1, 5, 7], np.uint64), 9)          # 3 needed: 5 rows are not over 2 x 3
    assert j.rows == 5
    j.keep(np.array([5], np.uint64), 9)                # frame 5, and 9 (not seen yet) on
    assert j.table()["sni"].to_pylist() == ["h5", "h9"] and j.rows == 2
    j.add(tab([12]))
    j.keep(np.array([], np.uint64), 100)
    assert j.tabs == [] and j.rows == 0 and j.table() is None


def test_streamed_parts_are_the_records_row_groups():
    """ExchangeRun.STREAM_ROWS is the row group the Parquet sink makes of the HTTP records (a
    constant of its own: httpanalyzer.tls does not load pyarrow.parquet for other outputs)."""
    from httpanalyzer.tls import ExchangeRun
    from webtap.parquetsink import ParquetWriter

    assert ExchangeRun.STREAM_ROWS == ParquetWriter.ROW_GROUP_ROWS


def test_ready_does_not_look_again_below_a_bound_that_did_not_move(monkeypatch):
    """A request that waits its GC timeout holds the bound while records pile up behind it:
    ready() looks at them again only once the bound has moved (each record taken later starts
    at or after the bound read when it was taken), not at every STREAM_ROWS more records."""
    from httpanalyzer import tls as tlsmod
    from webtap.records.exchange import EXCHANGE_RECORD_DTYPE

    monkeypatch.setattr(tlsmod.ExchangeRun, "STREAM_ROWS", 4)
    run = tlsmod.ExchangeRun(stream=True)
    looks = []
    below = run._below
    monkeypatch.setattr(run, "_below", lambda b, m: looks.append(b) or below(b, m))

    def take(frames):
        r = np.zeros(len(frames), EXCHANGE_RECORD_DTYPE)
        r["has_req"], r["req_frame"], r["ch_frame"] = 1, frames, 1
        run._raw.append(r.view(np.uint8))
        run._nraw += len(frames)
    run._before = 10                   # a request of frame 11 waits
    take([3, 20, 21, 22])              # one below the bound: too few
    assert run.ready(100) is None and looks == [10]
    for k in range(5):                 # more records behind the waiting request
        take([30 + k * 4 + j for j in range(4)])
        assert run.ready(100) is None
    assert looks == [10]
    take([50, 51, 52, 53])
    run._before = 40                   # the request is answered: the bound read with them moves
    out = run.ready(100)
    assert looks == [10, 40]
    # frames are 1-based, the bound a 0-based packet index: frame 40 is below index 40
    assert sorted(out["req_frame"].tolist()) == [3, 20, 21, 22] + list(range(30, 41))
    assert run._nraw == 28 - 15
