"""analysis.content_type_counts: responses per media type (RFC 9110 8.3.1), from the
Content-Type header column (issue 34, Lin et al.'s MIME checks as a report)."""
from __future__ import annotations

import pandas as pd
import pytest

from httpanalyzer import analysis


def test_media_type_is_type_and_subtype_case_insensitive_without_parameters():
    # RFC 9110 8.3.1: "text/html;charset=utf-8", "Text/HTML;Charset=\\"utf-8\\"" and
    # "text/html; charset=\\"utf-8\\"" are the same media type
    vals = pd.Series(['text/html;charset=utf-8', 'Text/HTML;Charset="utf-8"',
                      'text/html; charset="utf-8"', " image/PNG ", None, "garbage"])
    assert analysis.media_types(vals).tolist()[:4] == ["text/html"] * 3 + ["image/png"]
    assert pd.isna(analysis.media_types(vals).iloc[4])
    assert analysis.media_types(vals).iloc[5] == "garbage"


def test_counts_per_media_type():
    df = pd.DataFrame({"response_content_type": ["text/html; charset=UTF-8", "TEXT/HTML",
                                                 "application/json", None, "image/gif",
                                                 "image/gif;x=1"]})
    got = analysis.content_type_counts(df)
    assert got["count"].to_dict() == {"text/html": 2, "image/gif": 2, "application/json": 1}
    assert got["pct"].sum() == pytest.approx(100.0)


def test_without_the_header_column_it_says_how_to_get_it():
    with pytest.raises(KeyError, match="Content-Type"):
        analysis.content_type_counts(pd.DataFrame({"status": [200]}))


@pytest.mark.parametrize("rel", ["arkime/http-content-gzip.pcap",
                                 "zeek/http/1000-requests-one-dropped-response.pcap.gz"])
def test_on_a_shared_trace_the_counts_are_the_column_values(rel):
    """On a real trace: every response with a Content-Type in its first packet is counted once,
    under its own media type (the column's values are checked against tshark in
    tests/outputs/test_headers_tshark.py)."""
    import httpanalyzer
    from tests.conftest import SHARED

    path = SHARED / "traces" / rel
    if not path.exists():
        pytest.skip(f"{path} not here")
    df = httpanalyzer.analyze(str(path), headers=["Content-Type"], consumers=0)
    col = df["response_content_type"].dropna()
    assert len(col) > 0
    got = analysis.content_type_counts(df)
    assert int(got["count"].sum()) == len(col)
    for v in col.unique()[:20]:
        mt = v.split(";")[0].strip().lower()
        assert got.loc[mt, "count"] >= (col == v).sum()
