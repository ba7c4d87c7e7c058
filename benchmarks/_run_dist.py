"""One run of the distributed analyzer (or the single process) in its own process. Prints a
JSON line: counts, the in-process time of the run and, distributed, its plan / map / repair
seconds and boundary statistics. The LocalCluster is started before the clock starts (its
start-up is reported apart: a cluster is started once and serves many runs).

    python -m benchmarks._run_dist TRACE single
    python -m benchmarks._run_dist TRACE dask WORKERS CHUNK_MB OUT_DIR
"""
import json
import sys
import time

import httpanalyzer


def _warm() -> None:
    """Import what a task needs in each worker (an editable build checks itself on import)."""
    import pandas  # noqa: F401  (pyarrow's record batches import it on first use)
    import pyarrow.parquet  # noqa: F401

    import httpanalyzer.distributed  # noqa: F401
    import webtap.dissect  # noqa: F401


def main() -> None:

    trace, mode = sys.argv[1], sys.argv[2]
    out: dict = {}
    if mode == "single":
        s = httpanalyzer.Summary(detailed=False)
        t1 = time.perf_counter()
        c1 = time.process_time()
        n = 0
        for b in httpanalyzer.iter_record_batches(trace, summary=s, consumers=0):
            n += b.num_rows
        out.update(loop_s=time.perf_counter() - t1, cpu_s=time.process_time() - c1, records=n, packets=s.packets, bytes=s.bytes,
                   paired=s.pairing.get("paired", 0), messages=s.pairing.get("messages", 0))
    else:
        from dask.distributed import Client, LocalCluster

        import pyarrow.dataset as ds

        from httpanalyzer import distributed

        workers, chunk_mb, out_dir = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        client.run(_warm)     # workers import once
        out["cluster_start_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        c1 = time.process_time()
        res = distributed.run(trace, out_dir, scheduler=client, chunk_bytes=int(chunk_mb * 2**20))
        out["loop_s"] = time.perf_counter() - t1
        out["driver_cpu_s"] = time.process_time() - c1
        d = ds.dataset(out_dir, format="parquet", partitioning="hive")
        out.update(records=d.count_rows(), packets=res.summary.packets, bytes=res.summary.bytes,
                   paired=res.summary.pairing.get("paired", 0),
                   messages=res.summary.pairing.get("messages", 0), chunks=res.chunks,
                   boundaries_replayed=res.boundaries_replayed, reruns=res.reruns,
                   replayed_messages=res.replayed_messages, seconds=res.seconds,
                   chunk_seconds=res.chunk_seconds, chunk_cpu_seconds=res.chunk_cpu_seconds)
        client.close()
        cluster.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
