"""Writing figures: one helper for both packages' plot modules (httpanalyzer.plot,
urlfilter.plot), which build pyplot-free matplotlib Figures; the CLIs' `--plots DIR` and
`make demo` write them with this."""
from __future__ import annotations

import pathlib


def save_figures(figs: dict, directory, dpi: int = 110) -> list:
    """Write each Figure of `figs` (name -> Figure) as DIR/name.png; returns the paths."""
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name, fig in figs.items():
        p = d / f"{name}.png"
        fig.savefig(p, dpi=dpi, bbox_inches="tight")
        out.append(p)
    return out
