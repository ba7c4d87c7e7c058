"""analyze()/iter_record_batches() stream logic and the CLI, with the capture+dissect stages
replaced by message batches built in numpy (the end-to-end tests on real traces are in
test_tshark.py)."""
import numpy as np
import pandas as pd
import pytest

import httpanalyzer
from httpanalyzer import stream as an
from httpanalyzer import cli
from tests.msgbuild import MsgBuilder
from webtap.records import http as records

S = 1_000_000_000
T0 = 1_700_000_000 * S


def fake_traces(monkeypatch, traces):
    """traces: {path: [MsgBuilder, ...]} -> each builder is one batch of that trace."""
    def gen(path, bpf, stats, live=False, progress=None, executor=None, dissector=None,
            packet_hook=None, on_ready=None):
        for b in traces[path]:
            msgs, data = b.build()
            stats.packets += len(msgs)
            yield msgs, data, int(msgs["ts_ns"].max())
    monkeypatch.setattr(an, "_message_batches", gen)


def test_two_traces_merge_in_capture_time_order(monkeypatch):
    a1, a2, b1 = MsgBuilder(), MsgBuilder(), MsgBuilder()
    a1.req(T0, "10.0.0.1", 1000, "10.0.0.2", 80, 1, 100, uri="/a")       # trace a, batch 1
    b1.resp(T0 + 1 * S, "10.0.0.2", 80, "10.0.0.1", 1000, 100, 50)       # its response: trace b
    b1.req(T0 + 2 * S, "10.0.0.1", 1001, "10.0.0.2", 80, 1, 200, uri="/b")
    a2.resp(T0 + 3 * S, "10.0.0.2", 80, "10.0.0.1", 1001, 200, 50)
    a2.req(T0 + 100 * S, "10.0.0.1", 1002, "10.0.0.2", 80, 1, 300, uri="/late")
    fake_traces(monkeypatch, {"a": [a1, a2], "b": [b1]})
    s = an.Summary()
    df = httpanalyzer.analyze(["a", "b"], summary=s)
    p = df[df.matched].sort_values("request_ts")
    assert list(p.uri) == ["/a", "/b"]
    assert list(p.request_trace) == [0, 1] and list(p.response_trace) == [1, 0]
    late = df[~df.matched]
    assert list(late.uri) == ["/late"] and list(late.unmatched_reason) == ["end"]
    assert s.pairing["paired"] == 2 and s.outcomes["paired"] == 2


def test_gc_runs_on_batch_end_time_in_single_trace(monkeypatch):
    a1, a2 = MsgBuilder(), MsgBuilder()
    a1.req(T0, "10.0.0.1", 1000, "10.0.0.2", 80, 1, 100)
    a2.req(T0 + 61 * S, "10.0.0.1", 1001, "10.0.0.2", 80, 1, 200)
    fake_traces(monkeypatch, {"a": [a1, a2]})
    batches = list(an.iter_record_batches("a"))
    # records leave in few large batches (Pairer.due); the first request left by the GC when
    # the second batch's time came, not at the end
    reasons = [r for b in batches for r in b.column("unmatched_reason").to_pylist()]
    assert reasons == ["gc", "end"]


@pytest.mark.parametrize("live,expect", [(False, [["end"]]), (True, [["gc"]])])
def test_idle_batches_move_the_clock_only_live(monkeypatch, live, expect):
    """On an interface a batch without HTTP moves capture time on (the GC emits at once); in a
    file only HTTP messages do, so that where batches end never changes a record."""
    a1 = MsgBuilder()
    a1.req(T0, "10.0.0.1", 1000, "10.0.0.2", 80, 1, 100)

    def gen(path, bpf, stats, live=False, progress=None, read_ahead=False, dissector=None, **_kw):
        msgs, data = a1.build()
        yield msgs, data, T0
        yield msgs[:0], data, T0 + 61 * S          # no messages, 61 s later
        yield msgs[:0], data, T0 + 62 * S
    monkeypatch.setattr(an, "_message_batches", gen)
    out = []
    for b in an.iter_record_batches("a", live=live):
        out.append(b.column("unmatched_reason").to_pylist())
    assert out == expect


@pytest.mark.parametrize("consumers", [None, 2])
def test_records_do_not_depend_on_batching(monkeypatch, jumpy, consumers):
    """One trace read in batches and chunks of other sizes gives the same records: the shared
    traces concatenated (the clock jumps back and forth: GC, clock resets, packets without
    HTTP whose times are far from their neighbours')."""
    import functools
    from collections import Counter

    import webtap.stream

    files = [str(jumpy)]
    ref = an.analyze(files, consumers=consumers)
    assert len(ref) > 1000 and (ref.unmatched_reason == "clock_reset").any()
    assert (ref.unmatched_reason == "gc").any()
    orig = webtap.stream.open_source
    for batch_size, chunk_size in ((97, 2 << 20), (1000, (3 << 20) + 7)):
        monkeypatch.setattr(webtap.stream, "open_source",
                            functools.partial(orig, batch_size=batch_size, chunk_size=chunk_size))
        df = an.analyze(files, consumers=consumers)
        assert Counter(map(tuple, df.astype(str).values.tolist())) == \
            Counter(map(tuple, ref.astype(str).values.tolist())), (batch_size, chunk_size)


def test_keyboard_interrupt_ends_input_and_flushes(monkeypatch):
    a1 = MsgBuilder()
    a1.req(T0, "10.0.0.1", 1000, "10.0.0.2", 80, 1, 100)

    def gen(path, bpf, stats, live=False, progress=None, read_ahead=False, dissector=None, **_kw):
        msgs, data = a1.build()
        yield msgs, data, T0
        raise KeyboardInterrupt
    monkeypatch.setattr(an, "_message_batches", gen)
    s = an.Summary()
    batches = list(an.iter_record_batches("eth0", live=True, summary=s))
    assert s.interrupted and [b.column("unmatched_reason").to_pylist() for b in batches] == [["end"]]


def test_dataframe_dtypes(monkeypatch):
    a1 = MsgBuilder()
    a1.req(T0, "10.0.0.1", 1000, "10.0.0.2", 80, 1, 100)
    a1.resp(T0 + S, "10.0.0.2", 80, "10.0.0.1", 1000, 100, 2)
    fake_traces(monkeypatch, {"a": [a1]})
    df = httpanalyzer.analyze("a")
    assert list(df.columns[:17]) == records.CONTRACT_COLUMNS
    assert str(df.request_ts.dtype) == "datetime64[ns, UTC]"
    assert str(df.response_time.dtype) == "timedelta64[ns]"
    for c in ("method", "reason"):
        assert isinstance(df[c].dtype, pd.CategoricalDtype)
    for c in ("status", "request_ack", "response_seq", "client_port"):
        assert str(df[c].dtype).startswith("UInt")


@pytest.mark.parametrize("ext", ["txt", "csv", "parquet"])
def test_cli_writes_each_format_and_summary(monkeypatch, tmp_path, capsys, ext):
    a1 = MsgBuilder()
    a1.req(T0, "10.0.0.1", 1000, "10.0.0.2", 80, 1, 100)
    a1.resp(T0 + S, "10.0.0.2", 80, "10.0.0.1", 1000, 100, 2, status=404, reason="Not Found")
    a1.req(T0 + 2, "10.0.0.1", 1001, "10.0.0.2", 80, 1, 7)
    fake_traces(monkeypatch, {"x.pcap": [a1]})
    out = tmp_path / f"o.{ext}"
    assert cli.main(["x.pcap", "-o", str(out), "--summary", "--no-progress"]) == 0
    assert out.stat().st_size > 0
    text = capsys.readouterr().out
    assert "404" in text and "request_unmatched_end" in text and "p50" in text


def test_cli_rejects_unknown_extension(capsys):
    assert cli.main(["x.pcap", "-o", "o.xlsx"]) == 2


def _shared(rel):
    import os

    base = os.environ.get("WEBTAP_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
    path = os.path.join(base, "traces", rel)
    if not os.path.exists(path):
        pytest.skip(f"shared trace absent: {path}")
    return path


def test_cli_on_a_real_trace_line_format(tmp_path, capsys):
    path = _shared("zeek/http/1000-requests-one-dropped-response.pcap.gz")
    out = tmp_path / "o.txt"
    assert cli.main([path, "-o", str(out), "--no-progress", "--summary"]) == 0
    lines = out.read_bytes().split(b"\n")[:-1]
    assert len(lines) == 1000                      # 999 pairs + 1 request without response
    fields = [ln.split(b"|") for ln in lines]
    assert all(len(f) == 13 for f in fields)
    assert sum(1 for f in fields if f[5] == b"") == 1
    assert all(f[0] == b"::1" and f[3] == b"80" and f[9] == b"GET" for f in fields)
    text = capsys.readouterr().out
    assert "request_unmatched_end" in text


def test_analyze_real_trace_with_bpf_filter():
    path = _shared("elcabezzonn-pcaps/aug16_part2.pcap.gz")
    all_ = httpanalyzer.analyze(path)
    none = httpanalyzer.analyze(path, bpf="udp")
    assert len(all_) > 500 and len(none) == 0
    assert all_.matched.sum() > 500


def test_cli_skips_an_unreadable_file_and_rejects_a_bad_filter(tmp_path, capsys):
    good = _shared("dpkt/nb6-http.pcap")
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"hello, not a capture")
    out = tmp_path / "o.csv"
    assert cli.main([str(bad), good, "-o", str(out), "--no-progress"]) == 0
    # one error line for the unreadable file (docs/CLI.md); the other is still read
    assert "bad.pcap" in capsys.readouterr().err and out.stat().st_size > 0
    assert cli.main([str(bad), "-o", str(out), "--no-progress"]) == 1
    assert cli.main([good, "-f", "bogus ((", "--no-progress"]) == 2
