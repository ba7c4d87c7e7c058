"""A message batch (webtap.dissect.MessageBatch) as a pandas DataFrame: pandas at the top, loaded
through the record-kind table (webtap.records) when the view is first asked for."""
from __future__ import annotations

import numpy as np
import pandas as pd

from webtap.records.message import METHOD_NAMES, MSG_REQUEST, SPAN_FIELDS
from webtap.records.messageview import column

__all__ = ["to_pandas"]


def to_pandas(mb, errors: str = "replace"):
    """A DataFrame with one row per message: text columns as strings, addresses as text,
    `kind` and `method_name` as categoricals (method_name from webtap.records.message.METHOD_NAMES)."""
    m = mb.msgs
    cols: dict[str, object] = {
        "ts_ns": m["ts_ns"],
        "frame": m["pkt_index"] + 1,               # tshark's 1-based frame.number
        "kind": pd.Categorical.from_codes(
            np.where(m["kind"] == MSG_REQUEST, 0, 1).astype(np.int8), ["request", "response"]
        ),
        "src_ip": column(mb, "src_ip").to_pandas(),
        "src_port": m["src_port"],
        "dst_ip": column(mb, "dst_ip").to_pandas(),
        "dst_port": m["dst_port"],
        "seq": m["seq"],
        "ack": m["ack"],
        "payload_len": m["payload_len"],
        "method_name": pd.Categorical.from_codes(
            m["method_id"].astype(np.int16) - 1, list(METHOD_NAMES[1:])
        ),
    }
    for name in SPAN_FIELDS:
        cols[name] = column(mb, name, errors).to_pandas()
    cols["encap"] = column(mb, "encap_text").to_pandas()
    cols["outer_src"] = column(mb, "outer_src").to_pandas()
    cols["outer_dst"] = column(mb, "outer_dst").to_pandas()
    cols["tunnel_id"] = m["tunnel_id"]
    for name in ("status", "flags", "vlan", "ip_version", "tcp_flags", "ttl", "window",
                 "linktype", "payload_off", "payload_caplen", "pkt_offset"):
        cols[name] = m[name]
    return pd.DataFrame(cols)
