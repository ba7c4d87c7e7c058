"""CSV output (webtap.clikit.OUTPUTS: ".csv" -> webtap.csvsink:CsvWriter): pyarrow's CSV writer
over the record batches, no Python per record. Loaded by the extension table only for a CSV
output, so its pyarrow.csv import stands at the top (issue 29)."""
from __future__ import annotations

import pyarrow.csv as pacsv

from webtap.writers import batches_of

__all__ = ["CsvWriter"]


class CsvWriter:
    """CSV: a header row of the column names (also when there are no rows, if the schema is
    known); quoting only where needed."""

    def __init__(self, f, schema=None):
        self.f = f
        self.schema = schema
        self.w = None

    def write(self, data) -> None:
        if self.w is None:
            self.schema = data.schema          # a header even if no batch has a row
        for b in batches_of(data):
            if self.w is None:
                self.w = pacsv.CSVWriter(self.f, b.schema,
                                         write_options=pacsv.WriteOptions(quoting_style="needed"))
            self.w.write_batch(b)

    def close(self, meta: dict) -> None:
        if self.w is None and self.schema is not None and len(self.schema):
            pacsv.CSVWriter(self.f, self.schema).close()
        elif self.w is not None:
            self.w.close()
        self.f.flush()
