"""Every option of every command has a help text and the subcommands are listed; `webtap
dissect` without -o streams one escaped line per message with the null convention (vlan empty
when untagged, status empty for a request); the extension table's rows are as documented."""
from __future__ import annotations

import argparse
import pathlib

import pytest

from tests.cli import contract as C


def _parsers():
    from httpanalyzer import cli as hcli, compare
    from urlfilter import cli as ucli
    from webtap import cli as wcli

    return {"httpanalyzer": hcli.build_parser(), "httpanalyzer compare": compare.build_parser(),
            "webtap": wcli.build_parser(), "urlfilter": ucli._parser()}


def _walk(name, parser):
    yield name, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub, p in a.choices.items():
                yield from _walk(f"{name} {sub}", p)


@pytest.mark.parametrize("tool", ["httpanalyzer", "httpanalyzer compare", "webtap", "urlfilter"])
def test_every_option_has_help(tool):
    missing = []
    for name, p in _walk(tool, _parsers()[tool]):
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not a.help or a.help == argparse.SUPPRESS and a.option_strings == []:
                missing.append(f"{name}: {a.option_strings or a.dest}")
    assert not missing, missing


def test_subcommands_in_help():
    p = _parsers()
    assert "compare" in p["httpanalyzer"].format_help()
    assert "httpanalyzer tls TRACE" in p["httpanalyzer"].format_help()       # issue 30
    for sub in ("info", "dissect"):
        assert sub in p["webtap"].format_help()
    for sub in ("import", "match", "stats", "scan", "run", "timing"):
        assert sub in p["urlfilter"].format_help()


def test_same_flags_everywhere():
    p = _parsers()
    for name, parser in _walk("urlfilter", p["urlfilter"]):
        opts = {o for a in parser._actions for o in a.option_strings}
        if name.split()[-1] in ("scan", "run", "timing"):
            assert {"-f", "--filter", "--bpf", "--db", "--blacklist"} <= opts, name
        if name.split()[-1] in ("scan", "timing"):
            assert "--plots" in opts and "--plot" not in opts
    for tool in ("httpanalyzer", "webtap"):
        for name, parser in _walk(tool, p[tool]):
            opts = {o for a in parser._actions for o in a.option_strings}
            if name in ("httpanalyzer", "webtap dissect", "webtap info"):
                assert {"-f", "--filter", "--bpf", "--debug", "--quiet"} <= opts, name


def test_dissect_streams_lines_with_nulls(tmp_path):
    trace = tmp_path / "t.pcap"
    trace.write_bytes(C.good_pcap(5))
    r = C.run(["webtap.cli", "dissect", trace])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 10
    fields = [x.split("|") for x in lines]
    assert all(len(f) == 13 for f in fields)
    # ts_ns|kind|src_ip|src_port|dst_ip|dst_port|vlan|method|status|reason|host|uri|user_agent
    assert all(f[6] == "" for f in fields)                       # untagged: no 65535
    assert [f[8] for f in fields if f[1] == "request"] == [""] * 5
    assert [f[8] for f in fields if f[1] == "response"] == ["200"] * 5


def test_extension_table_rows():
    from webtap import clikit

    for ext, fmt in clikit.OUTPUTS.items():
        assert ext.startswith(".") and ext == ext.lower()
        mod, _, cls = fmt.writer.partition(":")
        assert mod and cls and fmt.help
    assert clikit.OUTPUTS[".parquet"].stream is False and clikit.OUTPUTS[".csv"].stream is True


def test_output_help_lists_every_text_format():
    # issue 30: `tls` and `dissect` write .jsonl and .log too; their help and the README say so
    from httpanalyzer import tls

    subs = dict(_walk("webtap", _parsers()["webtap"]))
    subs["httpanalyzer tls"] = tls.build_parser()
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name in ("httpanalyzer tls", "webtap dissect"):
        h = " ".join(subs[name].format_help().split())
        assert ".jsonl, .log" in h, name
        line = next(ln for ln in readme.splitlines() if ln.startswith(name + " TRACE..."))
        assert ".jsonl|.log" in line, line
    assert "build/user-venv/bin" in readme and 'export PATH="$PWD/build/user-venv/bin:$PATH"' in readme
