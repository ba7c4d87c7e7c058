"""`httpanalyzer tls TRACE --plots DIR` (issue 29): the figures module (httpanalyzer.tls_plot:
matplotlib, pandas) comes from the httpanalyzer command's registry (httpanalyzer.cli.Parts), not
from an import inside httpanalyzer.tls. Through the command the figures are written (with
--exchanges-out the exchanges' too); the tls module's own cli, called without the registry's
parts, refuses --plots as a usage error (exit 2) before anything is read."""
from __future__ import annotations

from httpanalyzer.cli import main
from httpanalyzer.tls import cli as tls_cli
from tests.conftest import TRACES, require_shared


def _trace():
    return str(require_shared(TRACES / "ndpi" / "1kxun.pcap"))      # TLS handshakes and HTTP


def test_tls_plots_through_the_command(tmp_path):
    figs = tmp_path / "figs"
    assert main(["tls", _trace(), "-o", str(tmp_path / "t.csv"), "-q", "--plots", str(figs),
                 "--exchanges-out", str(tmp_path / "x.csv")]) == 0
    names = sorted(p.name for p in figs.iterdir())
    assert names and all(n.endswith(".png") and (figs / n).stat().st_size > 1000 for n in names)
    assert any("response_time" in n or "exchange" in n for n in names), names


def test_tls_plots_without_the_registry_is_a_usage_error(tmp_path, capsys):
    figs = tmp_path / "figs"
    assert tls_cli([_trace(), "-o", str(tmp_path / "t.csv"), "--plots", str(figs)]) == 2
    assert "--plots needs the httpanalyzer command" in capsys.readouterr().err
    assert not figs.exists() and not (tmp_path / "t.csv").exists()
