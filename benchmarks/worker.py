"""One webtap contender of a benchmark, run in its own process: `python -m benchmarks.worker
MODE TRACE`. Prints a JSON object with what it counted, so the benchmark can check answers."""
from __future__ import annotations

import json
import sys
import time


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    from webtap.capture import open_trace
    from webtap.dissect import dissect

    out = {"mode": mode}
    t0 = time.perf_counter()
    with open_trace(path, progress=False) as trace:
        if mode == "read":
            n = 0
            for batch in trace:
                n += len(batch)
            out["packets"] = n
        elif mode == "dissect":
            n = msgs = 0
            for batch in trace:
                n += len(batch)
                msgs += len(dissect(batch.packets, batch.data).msgs)
            out["packets"] = n
            out["messages"] = msgs
        else:
            sys.exit(f"unknown mode {mode}")
        out["counters"] = trace.counters
    out["loop_seconds"] = time.perf_counter() - t0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
