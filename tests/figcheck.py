"""What every figure of the project must have: a title, axis labels (one with a unit), a legend."""
from __future__ import annotations

import re

_UNIT = re.compile(r"\(.+\)|\[.+\]")


def assert_labelled(fig) -> None:
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes, "figure without axes"
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    legends = [ax for ax in axes if ax.get_legend() is not None] + list(fig.legends)
    assert legends, "no legend"
    for ax in axes:
        x, y = ax.get_xlabel(), ax.get_ylabel()
        if ax.get_title() == "" and not suptitle:
            # a twin axes (same position as a titled one) shares its title
            twins = [o for o in axes if o is not ax and o.get_position().bounds == ax.get_position().bounds]
            assert any(o.get_title() for o in twins), f"axes without title: {x!r} / {y!r}"
        if x == "" and any(o.get_xlabel() for o in axes if o is not ax and
                           o.get_position().bounds == ax.get_position().bounds):
            x = "shared (twin)"
        assert x and y, f"axes without axis labels: {ax.get_title()!r}"
        assert _UNIT.search(x) or _UNIT.search(y), f"no unit on either axis: {x!r} / {y!r}"
