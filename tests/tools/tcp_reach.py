"""Which packets reach TCP, and which TCP segment they hold, in webtap's walk (ext/walk/l34.c) and in
tshark's dissection, frame by frame: the check of the decapsulation (docs/ACCURACY.md,
"Encapsulations").

    python -m tests.tools.tcp_reach TRACE...     # prints every difference and a summary per file

tshark runs with IP reassembly as in its defaults and the Teredo heuristic on (webtap takes a UDP
datagram that is exactly one IPv6 packet for Teredo on any port; tshark does so only with
`teredo.heuristic_teredo`). A frame is compared when tshark's last protocol layers hold TCP and no
ICMP error quotes the packet (tshark decodes the TCP header quoted in an ICMP error; webtap does
not, by design). For such a frame webtap must reach the same TCP segment: ports, sequence number
and payload length of the innermost TCP header. A frame tshark reassembles from IP fragments
is not compared (webtap skips fragments: `ip_fragment`), whichever IP layer was fragmented.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field

SEP = "\x1f"
FIELDS = ("frame.number", "frame.protocols", "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.len",
          "ip.flags.mf", "ip.frag_offset", "ipv6.fraghdr.offset", "ip.fragment", "ipv6.fragment")


@dataclass
class ReachResult:
    path: str
    tcp_frames: int = 0           # frames where tshark's innermost layer is TCP (compared)
    agree: int = 0
    fragments: int = 0            # tshark reassembled IP fragments: not compared
    differences: list = field(default_factory=list)
    webtap_only: int = 0          # frames webtap reaches TCP in and tshark does not
    webtap_only_examples: list = field(default_factory=list)


def run_tshark(path: str) -> dict[int, list[str]]:
    cmd = ["tshark", "-n", "-r", path, "-o", "tcp.desegment_tcp_streams:FALSE",
           "-o", "teredo.heuristic_teredo:TRUE", "-T", "fields", "-E", f"separator={SEP}",
           "-E", "occurrence=l"]
    for f in FIELDS:
        cmd += ["-e", f]
    p = subprocess.run(cmd, capture_output=True, env={**os.environ, "LC_ALL": "C.UTF-8"})
    if p.returncode != 0:
        raise RuntimeError(f"tshark failed on {path}: {p.stderr.decode(errors='replace')[-300:]}")
    rows = {}
    for line in p.stdout.decode("utf-8", "surrogateescape").split("\n"):
        cols = line.split(SEP)
        if len(cols) == len(FIELDS) and cols[0].isdigit():
            rows[int(cols[0])] = cols
    return rows


def compare_reach(path: str) -> ReachResult:
    from tests.dissect.trace_batches import read_trace
    from webtap._ext.dissect import l34_batch

    res = ReachResult(path=path)
    packets, data = read_trace(path)
    walk = l34_batch(packets, data)
    tsh = run_tshark(path)
    for i in range(len(packets)):
        frame = int(packets["index"][i]) + 1
        row = tsh.get(frame)
        w = walk[i]
        if row is None:
            continue
        protos = row[1].split(":")
        t_tcp = "tcp" in protos and "icmp" not in protos and "icmpv6" not in protos
        if t_tcp and row[2] and row[4]:
            # innermost layers are TCP (not TCP inside an ICMP error, SOCKS, ...)
            frag = (row[6] == "1" or (row[7] not in ("", "0")) or (row[8] not in ("", "0"))
                    or row[9] != "" or row[10] != "")
            if frag:
                res.fragments += 1
                continue
            res.tcp_frames += 1
            want = (int(row[2]), int(row[3]), int(row[4]), int(row[5] or 0))
            got = (int(w["src_port"]), int(w["dst_port"]), int(w["seq"]), int(w["payload_len"])) if w["tcp_ok"] else None
            if got == want:
                res.agree += 1
            else:
                res.differences.append(f"frame {frame} tshark {want} webtap {got} reason {int(w['reason'])} {row[1]}")
        elif w["tcp_ok"] and "tcp" not in protos:
            res.webtap_only += 1
            if len(res.webtap_only_examples) < 3:
                res.webtap_only_examples.append(f"frame {frame} webtap {(int(w['src_port']), int(w['dst_port']))} tshark {row[1]}")
    return res


def main(argv: list[str]) -> int:
    from concurrent.futures import ProcessPoolExecutor

    paths = argv[1:]
    with ProcessPoolExecutor(max_workers=2) as ex:
        for r in ex.map(compare_reach, paths):
            bad = len(r.differences) + r.webtap_only
            print(f"{'DIFF' if bad else 'ok  '} {r.path} tcp={r.tcp_frames} agree={r.agree} frag={r.fragments} webtap_only={r.webtap_only}")
            for d in r.differences[:5] + r.webtap_only_examples:
                print("     ", d[:220])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
