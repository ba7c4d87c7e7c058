"""HTTP transaction records from packet traces without TCP reassembly.

    import httpanalyzer
    df = httpanalyzer.analyze("trace.pcap")            # pandas DataFrame, one row per record
    for batch in httpanalyzer.iter_record_batches(["a.pcap", "b.pcap"]):   # Arrow batches
        ...
"""
import webtap  # noqa: F401  (first: it sets up the process before numpy is imported)
from httpanalyzer.stream import Summary, analyze, iter_record_batches
from httpanalyzer.pairing import Pairer
from httpanalyzer.records import COLUMNS, SCHEMA
from httpanalyzer.tls import analyze_tls

__all__ = ["analyze", "analyze_tls", "iter_record_batches", "Summary", "Pairer", "COLUMNS", "SCHEMA"]
