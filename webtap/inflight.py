"""One job in flight in a thread of its own: how a stage or a sink overlaps the run.

    job = InFlight("webtap-exchange")
    for batch in batches:
        job.submit(stage.feed, batch)   # waits for the previous job (raising its error) first
    job.close()                         # waits for the last one; its error is raised here

The work handed over must release the GIL to gain anything (the C stages and pyarrow's Parquet
writer do). One job at most is under way, so the order of the jobs is kept and whatever a job
holds (a packet batch's buffer, a row group) is bounded by one; the submitter must keep what the
job reads alive and unchanged until the next submit() or wait() returns (a packet batch's chunk
buffer is: webtap.capture.ChunkPool reuses a buffer only once no one refers to it).

Used by the Parquet sink (webtap.writers.ParquetWriter: a full row group is encoded and
compressed while the run goes on) and by the TLS exchange stage (httpanalyzer.tls.ExchangeRun:
its record walk over a batch's TCP events runs while the next batch is walked and paired).
"""
from __future__ import annotations

import threading

__all__ = ["InFlight"]


class InFlight:
    """Runs one submitted job at a time, each in a thread started for it (threading only:
    concurrent.futures would add ~5 ms to the start-up of every command that writes)."""

    def __init__(self, name: str):
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, fn, *args, **kw) -> None:
        """Wait for the job under way (its error is raised here, and this one is then not
        started), then start fn(*args, **kw) in a thread."""
        self.wait()

        def job():
            try:
                fn(*args, **kw)
            except BaseException as e:      # noqa: BLE001 - raised by the next wait()
                self._error = e

        t = threading.Thread(target=job, name=self.name, daemon=True)
        t.start()
        self._thread = t

    def wait(self) -> None:
        """Until the job under way is done; its error is raised here. Interrupted while waiting
        (a signal), the job stays under way: the next wait waits for it again."""
        t = self._thread
        if t is None:
            return
        t.join()
        self._thread = None
        e, self._error = self._error, None
        if e is not None:
            raise e

    def close(self) -> None:
        """Wait for the job under way; its error is raised here."""
        self.wait()
