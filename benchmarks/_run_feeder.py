"""One analyzer run in its own process, with N feeder consumers (0: single process; 'drain':
consumers that only take frames off their rings, no pairing). Prints a JSON line of counts,
the in-process time and the feeder's per-consumer balance."""
import json
import sys
import time

t0 = time.perf_counter()
import httpanalyzer  # noqa: E402
from httpanalyzer.balance import balance_table  # noqa: E402

trace, consumers = sys.argv[1], int(sys.argv[2])
drain = len(sys.argv) > 3 and sys.argv[3] == "drain"
t1 = time.perf_counter()
s = httpanalyzer.Summary(detailed=False)   # as the CLI without --summary
n = 0
fb: dict = {}
kw = {"drain_only": True} if drain else {}
for b in httpanalyzer.iter_record_batches(trace, summary=s, consumers=consumers, feeder=fb,
                                          feeder_options=kw):
    n += b.num_rows
t2 = time.perf_counter()
out = {"packets": s.packets, "bytes": s.bytes, "records": n, "paired": s.pairing.get("paired", 0),
       "messages": s.pairing.get("messages", 0), "import_s": t1 - t0, "loop_s": t2 - t1}
if fb.get("consumers"):
    df = balance_table(fb)
    out["balance"] = df[["messages", "messages_pct", "transactions", "transactions_pct",
                         "stall_ns"]].reset_index().to_dict("records")
    out["forwarded"] = int(df["messages"].sum())
print(json.dumps(out))
