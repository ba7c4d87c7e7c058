"""Type stub of webtap._ext.communityid (ext/out/communityid.pyx): Community ID v1 over columns."""
import numpy as np
import numpy.typing as npt
import pyarrow as pa

ID_LEN: int

def community_id(src_ip: npt.NDArray[np.uint8], src_port: npt.NDArray[np.uint16],
                 dst_ip: npt.NDArray[np.uint8], dst_port: npt.NDArray[np.uint16],
                 ip_version: npt.NDArray[np.uint8], proto: int | npt.NDArray[np.uint8] = 6,
                 seed: int = 0) -> pa.StringArray: ...
