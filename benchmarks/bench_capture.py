"""Capture + dissect throughput, in one run on the same trace held in the page cache:

* the bare libpcap loop (benchmarks/pcap_loop.c: pcap_next_ex, touching nothing),
* webtap read (chunked reader, batches) and webtap read+dissect (every packet to HTTP spans),
  each as a whole process and as its read loop alone (the process time includes starting
  Python and importing NumPy, ~0.2 s, which only a large trace amortises),
* httpry -r (HTTP request/response logging, its default fields),
* tshark -r with TCP reassembly off, printing the same HTTP fields webtap extracts.

Every contender runs $WEBTAP_BENCH_REPEAT times, alternating (benchmarks.common.paired).
Prints packets/s, peak RSS and each contender's time relative to webtap read+dissect (median of
per-round ratios of whole processes; the loops' in-process figures beside, labelled),
and checks the answers: the libpcap loop and webtap agree on the packet count, and every tool
found HTTP. Trace: $WEBTAP_BENCH_TRACE or one made by ../shared/scripts/make-bench-trace.
"""
from __future__ import annotations

import json
import shutil
import sys

from benchmarks.common import REPEAT, bench_trace, c_tool, median, paired, paired_table, warm, webtap_cmd

TSHARK_FIELDS = ["frame.number", "http.request.method", "http.request.uri", "http.host",
                 "http.user_agent", "http.response.code", "http.response.phrase"]


def build_pcap_loop() -> str:
    return c_tool("pcap_loop", "-lpcap")


def main() -> int:
    trace = bench_trace()
    warm(trace)
    contenders = [("libpcap pcap_next_ex loop (C)", [build_pcap_loop(), str(trace)]),
                  ("webtap read", webtap_cmd("worker", "read", str(trace))),
                  ("webtap read+dissect", webtap_cmd("worker", "dissect", str(trace)))]
    if shutil.which("httpry"):
        contenders.append(("httpry -r", ["httpry", "-q", "-r", str(trace)]))
    if shutil.which("tshark"):
        from httpanalyzer.tshark import TSHARK_FIRST_PACKET   # one home of the flags

        cmd = ["tshark", "-n", "-r", str(trace), *TSHARK_FIRST_PACKET,
               "-Y", "http.request || http.response", "-T", "fields"]
        for f in TSHARK_FIELDS:
            cmd += ["-e", f]
        contenders.append(("tshark -r (reassembly off)", cmd))
    res = paired(contenders, REPEAT)
    packets, captured = map(int, res["libpcap pcap_next_ex loop (C)"]["outs"][-1].split())
    read = json.loads(res["webtap read"]["outs"][-1])
    dis = json.loads(res["webtap read+dissect"]["outs"][-1])
    wire = read["counters"]["wire_bytes"]
    extra = {"  webtap read, its loop": median([json.loads(o)["loop_seconds"] for o in res["webtap read"]["outs"]]),
             "  webtap read+dissect, its loop": median([json.loads(o)["loop_seconds"]
                                                        for o in res["webtap read+dissect"]["outs"]])}
    print(f"trace: {trace} ({packets} packets, {captured / 2**20:.1f} MiB captured)")
    print(paired_table(res, "webtap read+dissect", packets, wire, extra=extra))
    httpry_lines = len(res["httpry -r"]["outs"][-1].splitlines()) if "httpry -r" in res else None
    tshark_frames = (len(res["tshark -r (reassembly off)"]["outs"][-1].splitlines())
                     if "tshark -r (reassembly off)" in res else None)
    print(f"HTTP first packets: webtap {dis['messages']}"
          + (f", tshark {tshark_frames}" if tshark_frames is not None else "")
          + (f", httpry {httpry_lines} lines" if httpry_lines is not None else ""))

    # Answers, not just times.
    assert read["packets"] == packets == dis["packets"], (read, packets, dis)
    assert dis["messages"] > 0
    if tshark_frames is not None:
        assert tshark_frames > 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
