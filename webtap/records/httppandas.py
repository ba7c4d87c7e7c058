"""HTTP transaction records (webtap.records.http) as a pandas DataFrame with the schema's dtypes.
Apart from the record kind itself: pandas costs ~0.2 s of import that no command writing files
needs (the DataFrame API, `httpanalyzer.analyze`, the abuse analytics and figures load it;
stages reach it through the record-kind table, webtap.records)."""
from __future__ import annotations

import pandas as pd
import pyarrow as pa

from webtap.records.http import CATEGORICAL

#: Arrow types whose pandas dtype is the nullable one (an unmatched record's null stays <NA>)
NULLABLE = {pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
            pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype(),
            pa.bool_(): pd.BooleanDtype()}


def to_pandas(table):
    """DataFrame with the schema's dtypes: datetime64[ns, UTC], timedelta64[ns], nullable
    integers, categoricals for method/reason/outcome/unmatched_reason, strings for the rest."""
    df = table.to_pandas(types_mapper=NULLABLE.get)
    for c in CATEGORICAL:
        df[c] = df[c].astype("category")
    return df
