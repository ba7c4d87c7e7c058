# Type stubs of webtap._ext.canon (ext/url/canon.pyx): the C canonical URL form (ext/url/urlcanon.h).
import numpy as np
import numpy.typing as npt

CODES: dict[int, str]

def canonicalize_bytes(url: bytes, key: bool = False, path: int = 0) -> tuple[bytes, int]: ...
def canonicalize_batch(
    data: bytes | npt.NDArray[np.uint8], offsets: npt.ArrayLike, key: bool = False, sep: int = -1,
    path: int = 0
) -> tuple[bytes, npt.NDArray[np.int64], npt.NDArray[np.int8]]: ...
def key_flip(s: bytes) -> bytes: ...
