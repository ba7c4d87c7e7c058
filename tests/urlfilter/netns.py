"""Three network namespaces for the live-filter test: client, server and filter, joined through a
Linux bridge in a fourth namespace, with the client's and the server's traffic mirrored to the
filter by tc (ingress qdisc, u32 match-all, mirred egress mirror: the kernel here has neither netem
nor matchall, see ../shared/docs/ARCHITECTURE.md).

    client ns  c0 10.231.X.1 ──┐
    server ns  s0 10.231.X.2 ──┼── br0 (bridge ns) ── mirror of hc/hs ingress ──> hf ──> f0 (filter ns)
    filter ns  f0 (no address) ┘     hf: learning off, flood off (it only receives the mirror
                                     and sends what the filter injects)

Every name carries a unique tag; `Topology.close()` deletes the namespaces (which deletes their
interfaces) and is called from a `finally`, so nothing is left behind even when the test fails.
Only the addresses inside these namespaces are ever targeted.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time


def _sh(*args, check=True, timeout=10):
    return subprocess.run(list(args), check=check, timeout=timeout, capture_output=True, text=True)


def can_build() -> str | None:
    """None when this machine can build the topology, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "tc", "bridge"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    return None


class Topology:
    def __init__(self, tag: str | None = None):
        t = tag or f"{os.getpid() % 100000:05d}{int(time.time() * 1000) % 100:02d}"
        self.tag = t
        self.ns = {k: f"wt{k}{t}" for k in ("c", "s", "f", "b")}
        self.net = 10 + int(t) % 240
        self.client_ip = f"10.231.{self.net}.1"
        self.server_ip = f"10.231.{self.net}.2"
        self.filter_if = "f0"
        self._made: list[str] = []

    def ns_exec(self, which: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns[which]]

    def _in(self, which, *cmd):
        return _sh(*self.ns_exec(which), *cmd)

    def build(self) -> "Topology":
        ns = self.ns
        for n in ns.values():
            _sh("ip", "netns", "add", n)
            self._made.append(n)
        t = self.tag
        for side, inner in (("c", "c0"), ("s", "s0"), ("f", "f0")):
            _sh("ip", "link", "add", inner, "netns", ns[side], "type", "veth",
                "peer", "name", f"h{side}{t}", "netns", ns["b"])
        self._in("b", "ip", "link", "add", "br0", "type", "bridge")
        for side in "csf":
            self._in("b", "ip", "link", "set", f"h{side}{t}", "master", "br0", "up")
        self._in("b", "ip", "link", "set", "br0", "up")
        # the filter's port: never learn from what the filter injects, never get flooded copies
        self._in("b", "bridge", "link", "set", "dev", f"hf{t}", "learning", "off", "flood", "off",
                 "mcast_flood", "off")
        for side in "cs":
            self._in("b", "tc", "qdisc", "add", "dev", f"h{side}{t}", "ingress")
            self._in("b", "tc", "filter", "add", "dev", f"h{side}{t}", "parent", "ffff:", "protocol", "all",
                     "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "mirror", "dev", f"hf{t}")
        self._in("c", "ip", "addr", "add", f"{self.client_ip}/24", "dev", "c0")
        self._in("s", "ip", "addr", "add", f"{self.server_ip}/24", "dev", "s0")
        for side, inner in (("c", "c0"), ("s", "s0"), ("f", "f0")):
            self._in(side, "ip", "link", "set", inner, "up")
            self._in(side, "ip", "link", "set", "lo", "up")
        return self

    def close(self) -> None:
        for n in reversed(self._made):
            _sh("ip", "netns", "del", n, check=False)
        self._made.clear()

    def __enter__(self):
        try:
            return self.build()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc):
        self.close()
