"""Type stub of webtap._ext.xcolumns (ext/out/xcolumns.pyx): the exchange records' Arrow column
buffers and their handshake join, written by C without the GIL (issue 33;
webtap.records.exchange.exchange_table)."""
from typing import Any

import numpy as np
import numpy.typing as npt

REASONS: tuple[str | None, ...]
JOINED: tuple[str, ...]

def exchange_columns(raw: npt.NDArray[Any], order: npt.NDArray[np.int64], hs: tuple | None = None,
                     own: bool = True, joined: bool = True) -> dict[str, tuple]: ...
