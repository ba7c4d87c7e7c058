"""The README's DuckDB queries, run: a Parquet file of the command line and the Dask dataset
(partitioned by chunk) queried with DuckDB give what pandas computes from the same records."""
from __future__ import annotations

import subprocess
import sys

import pytest

duckdb = pytest.importorskip("duckdb", reason="make test installs duckdb")


def test_parquet_file_and_dask_dataset(jumpy, tmp_path):
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from httpanalyzer import distributed
    from webtap.records import http as records

    out = tmp_path / "out.parquet"
    p = subprocess.run([sys.executable, "-m", "httpanalyzer.cli", str(jumpy), "--consumers", "0",
                        "--headers", "Server", "-o", str(out)], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    df = records.to_pandas(pq.read_table(out))
    con = duckdb.connect()
    # the README's query: transactions and median response time (s) per server software
    # (Parquet has no duration type: DuckDB sees response_time as BIGINT nanoseconds)
    q = f"""
        SELECT response_server, count(*) AS n, median(response_time) / 1e9 AS median_s
        FROM read_parquet('{out}')
        WHERE matched AND NOT interim
        GROUP BY response_server ORDER BY n DESC, response_server LIMIT 5"""
    got = con.sql(q).fetchall()
    final = df[df.matched & ~df.interim]
    want = (final.groupby("response_server", observed=True)
            .agg(n=("response_time", "size"),
                 median_s=("response_time", lambda s: s.astype("int64").median() / 1e9))
            .reset_index().sort_values(["n", "response_server"], ascending=[False, True]).head(5))
    assert [(a, b) for a, b, _ in got] == list(zip(want.response_server, want.n))
    assert [round(c, 9) for *_, c in got] == [round(float(c), 9) for c in want.median_s]
    assert got[0][1] > 100
    # one flow's transactions across tools: Community ID
    cid = df.community_id.iloc[0]
    n = con.sql(f"SELECT count(*) FROM read_parquet('{out}') WHERE community_id = '{cid}'").fetchall()[0][0]
    assert n == int((df.community_id == cid).sum())

    # the Dask dataset: one folder per chunk (hive partitioning)
    dsdir = tmp_path / "ds.parquet"
    distributed.run([str(jumpy)], str(dsdir), chunk_packets=50_000, headers=["Server"])
    rows = con.sql(f"""SELECT count(*), count(DISTINCT chunk), sum(CASE WHEN matched THEN 1 ELSE 0 END)
                       FROM read_parquet('{dsdir}/*/*.parquet', hive_partitioning = true)""").fetchall()[0]
    t = ds.dataset(str(dsdir), format="parquet", partitioning="hive").to_table()
    assert rows[0] == t.num_rows == len(df)
    assert rows[1] == len(set(t.column("chunk").to_pylist())) > 1
    assert rows[2] == int(df.matched.sum())
