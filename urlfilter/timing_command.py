"""`urlfilter timing TRACE...`: the race between the filter's forged reply and the server's
(urlfilter.timing), what urlfilter.cli's registry loads for this subcommand only: its tables are
pandas DataFrames, which the other subcommands never load."""
from __future__ import annotations

import json
import sys

import pyarrow as pa

from urlfilter.commands import (TIMING_LINE, _check_filter, _check_plots_dir, _load_blacklist,
                                _report_inputs, _select)
from urlfilter.timing import report_columns, summary, timing
from webtap import clikit


def handle(args, run, plots=None) -> int:
    """plots: urlfilter.plot (matplotlib), from the registry with --plots."""
    run.quiet = bool(getattr(args, "quiet", False))
    _check_filter(args.bpf)
    _check_plots_dir(getattr(args, "plots", None))
    out = sys.stdout
    o = run.output(args.output or "-", views={"lines": _select(TIMING_LINE)})
    bl = _load_blacklist(args)
    progress = clikit.progress_wanted(args.progress, o.stdout, run.quiet)
    try:
        df, totals = timing(args.traces, bl, bpf=args.bpf,
                            t_proc_ns=None if args.t_proc_us is None else args.t_proc_us * 1000,
                            progress=progress, with_totals=True)
    except KeyboardInterrupt as e:
        part = getattr(e, "partial", None)     # the connections so far: OUT.partial.EXT
        if part is not None and len(part) and not o.stdout:
            o.write(pa.Table.from_pandas(part, preserve_index=False))
        raise
    _report_inputs(run, totals, len(args.traces))
    if not (args.json and o.stdout):
        o.write(pa.Table.from_pandas(report_columns(df, t_proc_given=args.t_proc_us is not None,
                                                    measured=args.measured), preserve_index=False))
    o.commit()
    if args.plots:
        figs = plots.timing_figures(df)
        figs["margin_cdf"] = plots.margin_cdf(df).figure
        for p in plots.save_figures(figs, args.plots):
            run.note(f"wrote {p}")
    s = summary(df)
    if args.json:
        print(json.dumps(s), file=out)
    elif not run.quiet:
        how = "given" if args.t_proc_us is not None else "measured"
        print(f"{s['won']} of {s['with_handshake']} connections with a handshake won "
              f"({s['share_won']:.1%}, {how} T_proc median {s['t_proc_us_p50']:.2f} us); "
              f"{s['connections'] - s['with_handshake']} without a handshake", file=sys.stderr)
    return 0
