# Type stubs of webtap._ext.urlpolicy (ext/url/urlpolicy.pyx): the URL filter's rules across layers
# (issue 34), first match per lookup in one nogil loop; compiled by urlfilter.policy.
import numpy as np
import numpy.typing as npt

KINDS: dict[str, int]
RULE_DTYPE: np.dtype
COND_DTYPE: np.dtype
VAL_DTYPE: np.dtype
JA4_LEN: int

def match_rules(
    rules: npt.NDArray, conds: npt.NDArray, vals: npt.NDArray, blob: npt.NDArray[np.uint8],
    msgs: npt.NDArray, data: npt.NDArray[np.uint8], rows: npt.ArrayLike,
    keys: npt.NDArray[np.uint8], koffs: npt.ArrayLike, proto: int | npt.ArrayLike,
    sni: tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]] | None = None,
    ja4: npt.NDArray[np.uint8] | None = None,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8], int]: ...
