"""webtap's `encap` text (webtap.records.message.ENCAP_NAMES joined by commas) for a frame, from tshark's
frame.protocols: the reference the records' encap column is checked against."""
from __future__ import annotations

#: tshark frame.protocols layer -> webtap's layer name (webtap.records.message.ENCAP_NAMES); an inner
#: "eth" counts only once a tunnel was entered, IP-in-IP from two IP layers in a row.
_TSHARK_LAYER = {"gre": "gre", "erspan": "erspan", "vxlan": "vxlan", "geneve": "geneve",
                 "gtp": "gtpu", "teredo": "teredo", "ayiya": "ayiya", "pppoes": "pppoe",
                 "mpls": "mpls", "llc": "llc", "wlan": "wlan"}


def tshark_encap(protocols: str) -> str | None:
    """webtap's `encap` text for one frame, from tshark's frame.protocols."""
    layers = protocols.split(":")
    out: list[str] = []
    last_ip = None
    for i, p in enumerate(layers):
        if i == 0:
            continue                                  # the link layer itself
        if p in ("ip", "ipv6"):
            if last_ip is not None:
                out.append(("4" if p == "ip" else "6") + "in" + ("4" if last_ip == "ip" else "6"))
            last_ip = p
            continue
        if p in ("tcp", "udp", "ethertype", "vlan", "data", "pwethheuristic", "pwethcw", "pwethnocw",
                 "ppp", "ipv6.hopopts", "ipv6.routing", "ipv6.dstopts"):
            if p == "udp":
                last_ip = None                        # an IP header after UDP is a tunnel's payload
            if p == "ppp" and (not out or out[-1] != "pppoe"):
                out.append("ppp")
            continue
        if p == "eth":
            if out:
                out.append("eth")
            continue
        if p in _TSHARK_LAYER:
            out.append(_TSHARK_LAYER[p])
            if p in ("gre", "gtp", "teredo", "ayiya"):
                last_ip = None
    return ",".join(out) or None
