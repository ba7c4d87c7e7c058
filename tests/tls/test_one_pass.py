"""`httpanalyzer TRACE -o http --tls-out tls`: one pass serves both kinds; the TLS records equal
`httpanalyzer tls`, in one process and with feeder consumers, and the HTTP records do not change."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.conftest import SHARED, require_shared

TRACE = SHARED / "traces-tls" / "ndpi" / "teams.pcap"


def _rows(path):
    t = pq.read_table(path)
    return sorted(map(str, t.to_pylist()))


@pytest.mark.parametrize("consumers", ["0", "2"])
def test_tls_out_equals_tls_subcommand(tmp_path, consumers):
    from httpanalyzer.cli import main

    require_shared(TRACE)
    assert main([str(TRACE), "-o", str(tmp_path / "h.parquet"), "--tls-out", str(tmp_path / "t.parquet"),
                 "--consumers", consumers, "--no-progress"]) == 0
    assert main(["tls", str(TRACE), "-o", str(tmp_path / "ref.parquet")]) == 0
    assert main([str(TRACE), "-o", str(tmp_path / "h0.parquet"), "--consumers", "0", "--no-progress"]) == 0
    got, ref = _rows(tmp_path / "t.parquet"), _rows(tmp_path / "ref.parquet")
    assert len(ref) > 30 and got == ref
    assert _rows(tmp_path / "h.parquet") == _rows(tmp_path / "h0.parquet")


@pytest.mark.parametrize("args", [
    ["-o", "h.parquet", "--tls-out", "t.parquet", "--exchanges-out", "x.parquet"],
    ["tls", "-o", "t.csv", "--exchanges-out", "x.csv"],
])
def test_no_thread_of_the_run_outlives_it(tmp_path, args):
    """A run's threads (read-ahead, walk, the TLS and exchange stages, the Parquet writers) have
    all ended when main() returns (the signal forwarder right after): a stage thread that still
    ended beside the process's exit ran its libcrypto clean-up against OpenSSL's own exit
    handler, a crash 1 run in 150 of the TLS bench trace (ext/out/digest.h). QUIC and TLS over
    TCP in one run."""
    import threading

    from httpanalyzer.cli import main

    quic = SHARED / "traces-tls" / "tcpdump" / "quic_handshake.pcap"
    require_shared(TRACE)
    require_shared(quic)
    before = {t.ident for t in threading.enumerate()}
    sub = args[:1] if args[0] == "tls" else []
    rest = [str(tmp_path / a) if a.endswith((".parquet", ".csv")) else a for a in args[len(sub):]]
    assert main(sub + [str(TRACE), str(quic)] + rest + (["-q"] if sub else ["--no-progress", "-q"])) == 0
    new = [t for t in threading.enumerate() if t.ident not in before]
    for t in new:
        if t.name == "webtap-signals":      # ends on its own once main() closed its pipe (EOF);
            t.join(10)                      # it never touches libcrypto
    assert [t.name for t in new if t.is_alive()] == []


@pytest.mark.parametrize("consumers", ["0", "2"])
def test_the_http_pass_finishes_its_hook_when_the_input_ends(tmp_path, monkeypatch, consumers):
    """httpanalyzer.stream calls the packet hook's finish() once, after its last batch and before
    the outputs are prepared: the one-pass exchanges start being put in order there (while the
    HTTP pass makes its last records), not only in prepare()."""
    from httpanalyzer import tls as tlsmod
    from httpanalyzer.cli import main

    require_shared(TRACE)
    seen = []
    for cls, name in ((tlsmod.OnePass, "feed"), (tlsmod.OnePass, "finish"),
                      (tlsmod.OnePass, "prepare"), (tlsmod.ExchangeRun, "start_rows")):
        def spy(self, *a, _f=getattr(cls, name), _n=name, **kw):
            seen.append(_n)
            return _f(self, *a, **kw)
        monkeypatch.setattr(cls, name, spy)
    assert main([str(TRACE), "-o", str(tmp_path / "h.parquet"), "--tls-out", str(tmp_path / "t.parquet"),
                 "--exchanges-out", str(tmp_path / "x.parquet"), "--consumers", consumers,
                 "--no-progress"]) == 0
    calls = [c for c in seen if c != "feed"]
    assert seen.count("feed") >= 1 and seen[-len(calls):] == calls    # every feed came first
    # finish once, starting the order; prepare's own start_rows call then does nothing
    assert calls[:3] == ["finish", "start_rows", "prepare"] and calls.count("finish") == 1
    assert pq.read_table(tmp_path / "x.parquet").num_rows > 0
