"""Type stub of webtap._ext.abuse (ext/out/abuse.pyx): nginx limit_req and sliding-window counts."""
import numpy as np
import numpy.typing as npt

LIMIT_REQ_OUTCOMES: tuple[str, str, str]

def limit_req(key: npt.NDArray[np.int64], now_ms: npt.NDArray[np.int64], nkeys: int, rate: int,
              burst: int, delay: int) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64],
                                               npt.NDArray[np.int64]]: ...
def window_counts(group: npt.NDArray[np.int64], t: npt.NDArray[np.int64],
                  width: int) -> npt.NDArray[np.int64]: ...
