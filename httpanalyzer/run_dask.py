"""`httpanalyzer TRACE... --dask SCHED`: the HTTP run on a Dask cluster (httpanalyzer.distributed,
the optional extra webtap[dask]). httpanalyzer.cli's registry (Parts: `parts.dask`) loads this
module for --dask only: a run without it never loads the temporary-folder and tree-removal
modules (tempfile, shutil: ~3-4 ms of start-up, issue 29) nor the Dask side."""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile

from httpanalyzer import distributed
from httpanalyzer.consumers import max_consumers
from httpanalyzer.run import _fields_schema, _report_inputs, _views
from webtap import clikit


def main(a, run, parts) -> int:
    """`httpanalyzer TRACE... --dask SCHED`: chunks on a Dask cluster, records as a Parquet
    dataset (-o OUT.parquet) or, for the other outputs, streamed from a temporary dataset."""
    out = a.output
    dataset_out = out not in (None, "-") and os.path.splitext(out)[1].lower() in (".parquet", ".pq")
    _check_scheduler(a.dask)
    if dataset_out:
        o = run.output(out, directory=True)
    else:
        o = run.output(out or "-", views=_views(a, out, parts),
                       schema=_fields_schema(a, out, a.headers, parts))
    tmp = None if dataset_out else tempfile.mkdtemp(prefix="httpanalyzer-dask-")
    target = o.target if dataset_out else os.path.join(tmp, "records")
    progress = None if not a.no_progress else False
    try:
        try:
            res = distributed.run(a.traces, target, scheduler=a.dask, bpf=a.bpf,
                                  gc_timeout=a.gc_timeout, max_pending=a.max_pending,
                                  chunk_packets=a.chunk_packets,
                                  chunk_bytes=int(a.chunk_mb * (1 << 20)) if a.chunk_mb else None,
                                  progress=progress, headers=a.headers)
        except distributed.OverlappingTraces as e:
            raise clikit.UsageError(clikit.describe(e)) from None
        except (ValueError, RuntimeError) as e:
            raise clikit.RunError(clikit.describe(e)) from None
        summary = res.summary
        summary.detailed = a.summary
        dataset = distributed.open_dataset(target)
        # a dataset output is only counted here: the columns the summary reads, not the records
        cols = None if not dataset_out else (
            ["matched", "interim", "outcome", "status", "method", "response_time"] if a.summary
            else ["matched"])
        for batch in dataset.to_batches(columns=cols):
            batch = batch.drop_columns(["chunk"]) if "chunk" in batch.schema.names else batch
            summary.add(batch)
            if not dataset_out:
                o.write(batch)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    _report_inputs(run, summary, len(a.traces))
    o.commit()
    if a.summary:
        dest = sys.stderr if out in (None, "-") else sys.stdout
        print(summary.table(), file=dest)
        print(f"\nDask: {res.chunks} chunks, {res.boundaries_replayed} boundaries replayed "
              f"({res.replayed_messages} messages), {res.reruns} chunks re-run; seconds: "
              + ", ".join(f"{k} {v:.2f}" for k, v in res.seconds.items()), file=dest)
        print(f"Executor: {summary.executor}", file=dest)
    return 0


def _check_scheduler(spec: str) -> None:
    """--dask takes 'local', 'local:N' or a scheduler address; anything else is a usage error
    here (and not a network error after seconds of trying)."""
    if spec == "local" or spec.startswith("local:"):
        n = spec[len("local:"):] if spec != "local" else "1"
        hi = max_consumers()
        if not (n.isdigit() and 1 <= int(n) <= hi):
            raise clikit.UsageError(f"--dask local:N needs N in 1 .. {hi} worker processes "
                                    f"(4 per core, at most 64), {spec!r}")
        return
    if re.fullmatch(r"(tcp|tls|ws|wss|ucx)://[^\s:/]+(:[0-9]+)?/?|[^\s:/]+:[0-9]+", spec):
        return
    raise clikit.UsageError(f"--dask needs 'local', 'local:N' or a scheduler address "
                            f"(tcp://host:8786), {spec!r}")
