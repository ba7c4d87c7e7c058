"""Writers: the paper's line format byte for byte, CSV and Parquet round trips."""
import io

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from httpanalyzer import lines as linefmt, writers
from webtap.records import http as records
from webtap.csvsink import CsvWriter
from webtap.parquetsink import ParquetWriter
from webtap.writers import LineWriter
from httpanalyzer.pairing import Pairer
from tests.msgbuild import MsgBuilder

S = 1_000_000_000


def paper_example_batch():
    b = MsgBuilder()
    b.req(1393978285 * S + 777_375_000, "123.111.50.23", 2311, "214.223.22.6", 80, 1, 99,
          uri="http://service.host.com/icon.gif", host="service.host.com", ua="Mozilla/4.0")
    b.resp(1393978285 * S + 881_505_000, "214.223.22.6", 80, "123.111.50.23", 2311, 99, 2)
    b.req(1393978300 * S + 5, "10.0.0.1", 5000, "10.0.0.2", 8080, 1, 7, method="PROPFIND",
          uri="/a|b,c", host=None, ua=None)
    p = Pairer()
    p.feed(*b.build())
    p.flush()
    return p.take()


def test_line_format_matches_the_paper_example_byte_for_byte():
    out = linefmt.format_lines(paper_example_batch())
    lines = out.split(b"\n")
    assert lines[0] == (b"123.111.50.23|2311|214.223.22.6|80|1393978285.777375000|"
                        b"1393978285.881505000|0.104130000|OK|200|GET|Mozilla/4.0|"
                        b"service.host.com|http://service.host.com/icon.gif")
    # '|' inside a field is escaped (\x7c), so the line keeps its 13 fields
    assert lines[1] == b"10.0.0.1|5000|10.0.0.2|8080|1393978300.000000005|||||PROPFIND|||/a\\x7cb,c"
    assert all(line.count(b"|") == 12 for line in lines[:2])
    assert lines[2] == b"" and len(lines) == 3


def test_negative_response_time_is_signed():
    arr = pa.array([-1, -1_500_000_000, 0, None], pa.duration("ns"))
    assert writers.seconds_text(arr).to_pylist() == ["-0.000000001", "-1.500000000",
                                                     "0.000000000", None]


def _write(path, cls, view=None):
    with open(path, "wb") as f:
        w = cls(f, schema=records.SCHEMA)
        b = paper_example_batch()
        w.write(view(b) if view else b)
        w.close({"webtap.partial": "false"})


def test_csv_round_trip(tmp_path):
    _write(tmp_path / "o.csv", CsvWriter, writers.csv_view)
    df = pd.read_csv(tmp_path / "o.csv", dtype=str, keep_default_na=False)
    assert list(df.columns) == records.SCHEMA.names
    assert df.request_ts[0] == "1393978285.777375000" and df.response_time[0] == "0.104130000"
    assert df.uri[1] == "/a|b,c" and df.response_ts[1] == "" and df.matched[1] == "false"


def test_parquet_round_trip(tmp_path):
    _write(tmp_path / "o.parquet", ParquetWriter)
    t = pq.read_table(tmp_path / "o.parquet")
    assert pq.read_metadata(tmp_path / "o.parquet").metadata[b"webtap.partial"] == b"false"
    assert t.schema.equals(records.SCHEMA)
    df = records.to_pandas(t)
    assert str(df.request_ts.dtype) == "datetime64[ns, UTC]"
    assert str(df.status.dtype) == "UInt16" and df.status.isna().tolist() == [False, True]
    assert isinstance(df.method.dtype, pd.CategoricalDtype)
    assert df.response_time[0] == pd.Timedelta(104_130_000, "ns")


def test_line_writer_to_file_object_and_back():
    buf = io.BytesIO()
    w = LineWriter(buf)
    w.write(writers.line_view(paper_example_batch()))
    w.write(writers.line_view(records.empty_batch()))
    w.close({})
    assert buf.getvalue().count(b"\n") == 2
    back = linefmt.read_lines(io.BytesIO(buf.getvalue()))
    assert back.column("uri").to_pylist() == ["http://service.host.com/icon.gif", "/a|b,c"]
    assert back.column("status").to_pylist() == [200, None]
