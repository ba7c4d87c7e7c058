"""HTTP transaction records from packet traces without TCP reassembly.

    import httpanalyzer
    df = httpanalyzer.analyze("trace.pcap")            # pandas DataFrame, one row per record
    for batch in httpanalyzer.iter_record_batches(["a.pcap", "b.pcap"]):   # Arrow batches
        ...

The names below are loaded on first use (PEP 562): `import httpanalyzer.cli` must not pay for
numpy and pyarrow before it knows what the run needs (start-up is part of every run). So are
the executors with consumer processes (EXECUTORS: `httpanalyzer.feeder`, `httpanalyzer.fanout`),
which httpanalyzer.stream names through this package when a run chooses them.
"""
import webtap  # noqa: F401  (first: it sets up the process before numpy is imported)

__all__ = ["analyze", "analyze_tls", "iter_record_batches", "Summary", "Pairer", "COLUMNS", "SCHEMA"]

_WHERE = {"analyze": "httpanalyzer.stream", "analyze_tls": "httpanalyzer.tls",
          "iter_record_batches": "httpanalyzer.stream",
          "Summary": "httpanalyzer.stream", "Pairer": "httpanalyzer.pairing",
          "COLUMNS": "webtap.records.http", "SCHEMA": "webtap.records.http"}


#: the executors with consumer processes (multiprocessing, pyarrow): name -> module
EXECUTORS = {"feeder": "httpanalyzer.feeder", "fanout": "httpanalyzer.fanout"}


def __getattr__(name):
    if name in EXECUTORS:
        import importlib

        return importlib.import_module(EXECUTORS[name])
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'httpanalyzer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
