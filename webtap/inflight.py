"""Jobs in flight in a thread of their own: how a stage or a sink overlaps the run.

    job = InFlight("webtap-exchange")
    for batch in batches:
        job.submit(stage.feed, batch)   # waits for the previous job (raising its error) first
    job.close()                         # waits for the last one; its error is raised here

The work handed over must release the GIL to gain anything (the C stages and pyarrow's Parquet
writer do). One worker runs the jobs in the order given; at most `depth` of them (1 by default)
are unfinished at once, so whatever they hold (a packet batch's buffer, a row group) is bounded
by `depth`. A job holds what it reads through its arguments; the submitter must not change it
until the job is done (a packet batch's chunk buffer is not: webtap.capture.ChunkPool reuses a
buffer only once no one refers to it). After a job failed, the jobs behind it are not run; the
error is raised by the next submit() or wait().

Used by the Parquet sink (webtap.parquetsink.ParquetWriter: a full row group is encoded and
compressed while the run goes on), by the TLS stage (httpanalyzer.tls.TlsRun: its batches) and
by the TLS exchange stage at the end of a run (httpanalyzer.tls.ExchangeRun.start_rows: its
records' columns built while the handshakes are put in order).
"""
from __future__ import annotations

import os
import queue
import threading
import weakref

__all__ = ["InFlight"]


class _State:
    """What the worker thread shares with its InFlight (not the InFlight itself, so that an
    InFlight nobody closes is still collected, and its worker told to end). Jobs carry a number;
    the worker says which it finished last under `cond`. A signal (KeyboardInterrupt, raised in
    the main thread between any two bytecodes) can cut a submit or a wait anywhere without
    leaving a lock held or a count that waits for a job never handed over: a wait waits only for
    numbers put on the queue, and `with cond` releases the lock whatever is raised."""

    __slots__ = ("jobs", "cond", "finished", "error", "skip", "pid", "at_end", "thread")

    def __init__(self, at_end=None):
        self.pid = os.getpid()              # a forked child starts a worker of its own
        self.jobs = queue.SimpleQueue()
        self.cond = threading.Condition()
        self.finished = 0                   # the number of the last job that ended
        self.error: BaseException | None = None
        self.skip = 0                       # jobs up to this number are not run (see _wait_for)
        self.at_end = at_end                # the worker's last step (InFlight's at_end)
        self.thread: threading.Thread | None = None


def _worker(st: _State) -> None:
    while True:
        item = st.jobs.get()
        if item is None:
            if st.at_end is not None:
                st.at_end()
            return
        n, fn, args, kw = item
        try:
            if st.error is None and n > st.skip:   # not behind a failed job
                fn(*args, **kw)
        except BaseException as e:          # noqa: BLE001 - raised by the next wait()
            st.error = e
        finally:
            del fn, args, kw, item          # the job's data is not held past its end
            with st.cond:
                st.finished = n
                st.cond.notify_all()


class InFlight:
    """Runs one submitted job at a time in a worker thread of its own, started by the first
    submit and kept for the next ones (threading only: concurrent.futures would add ~5 ms to
    the start-up of every command that writes; a thread started per job cost ~65 us a job,
    the hand-over to the kept one ~6.5 us, in-process on a loaded machine: the exchange stage
    submits a job per packet batch)."""

    def __init__(self, name: str, depth: int = 1, at_end=None):
        """at_end: called by the worker thread as its last step, when it is told to end (close(),
        or the InFlight collected): what the jobs left in the thread's own state is freed there,
        before close() returns, not by the thread's exit destructors after it (the TLS stage's
        libcrypto state: ext/out/digest.h)."""
        if depth < 1:
            raise ValueError("depth must be >= 1")
        self.name = name
        self.depth = depth
        self.at_end = at_end
        self._st: _State | None = None
        self._put = 0                       # the number of the last job put on the queue

    def submit(self, fn, *args, **kw) -> None:
        """Wait until fewer than `depth` jobs are unfinished (an earlier job's error is raised
        here, and this one is then not started), then run fn(*args, **kw) in the worker
        thread after them."""
        self._wait_for(self._put - self.depth + 1)
        st = self._st
        if st is None or st.pid != os.getpid():
            st = self._st = _State(self.at_end)
            self._put = 0
            st.thread = threading.Thread(target=_worker, args=(st,), name=self.name, daemon=True)
            st.thread.start()
            # an InFlight collected without close() still ends its worker
            weakref.finalize(self, st.jobs.put, None)
        n = self._put + 1
        st.jobs.put((n, fn, args, kw))
        self._put = n

    def wait(self) -> None:
        """Until the job under way is done; its error is raised here. Interrupted while waiting
        (a signal), the job stays under way: the next wait waits for it again."""
        self._wait_for(self._put)

    def _wait_for(self, n: int) -> None:
        """Until job n is done; a failed job's error is raised here."""
        st = self._st
        if st is None:
            return
        with st.cond:
            while st.finished < n:
                st.cond.wait()
            e = st.error
            if e is not None:
                # the jobs handed over behind the failed one are not run either, whenever the
                # worker reaches them: skip first, then the error cleared (the worker reads
                # them without the lock)
                st.skip = self._put
                st.error = None
        if e is not None:
            raise e

    def close(self) -> None:
        """Wait for the job under way (its error is raised here), end the worker thread and wait
        for it (its at_end done); a later submit starts a new one."""
        try:
            self.wait()
        finally:
            st = self._st
            if st is not None and st.finished >= self._put:   # not when a signal cut the wait
                self._st = None
                st.jobs.put(None)
                if st.thread is not threading.current_thread():
                    st.thread.join()
