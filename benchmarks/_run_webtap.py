"""One webtap analyzer run in its own process (so its peak RSS is its own): consume every record
batch of a trace, print a JSON line of counts and the in-process time."""
import json
import sys
import time

t0 = time.perf_counter()
import httpanalyzer  # noqa: E402
import pyarrow  # noqa: E402,F401  (the names below load on first use: start-up is counted here)

httpanalyzer.iter_record_batches, httpanalyzer.Summary  # noqa: B018
t1 = time.perf_counter()
c1 = time.process_time()
s = httpanalyzer.Summary(detailed=False)   # as the CLI without --summary
n = 0
for b in httpanalyzer.iter_record_batches(sys.argv[1], summary=s):
    n += b.num_rows
t2 = time.perf_counter()
c2 = time.process_time()
print(json.dumps({"packets": s.packets, "bytes": s.bytes, "records": n,
                  "paired": s.pairing.get("paired", 0), "messages": s.pairing.get("messages", 0),
                  "import_s": t1 - t0, "loop_s": t2 - t1,
                  "loop_cpu_s": c2 - c1}))
