"""webtap.inflight.InFlight, the one-job-in-flight thread of the Parquet sink and the TLS
exchange stage: jobs run in submit order, never two at once, in another thread; a job's error
is raised by the next submit (which then does not start its job) or by wait/close."""
from __future__ import annotations

import threading
import time

import pytest

from webtap.inflight import InFlight


def test_jobs_in_order_one_at_a_time_in_another_thread():
    job, seen, running = InFlight("t"), [], []
    lock = threading.Lock()

    def work(i):
        with lock:
            running.append(i)
            assert len(running) == 1           # never two jobs at once
        time.sleep(0.001)
        seen.append((i, threading.get_ident()))
        with lock:
            running.remove(i)

    for i in range(20):
        job.submit(work, i)
    job.close()
    assert [i for i, _ in seen] == list(range(20))
    assert all(t != threading.get_ident() for _, t in seen)


def test_error_is_raised_by_the_next_submit_which_does_not_start():
    job, ran = InFlight("t"), []

    def bad():
        raise OSError(28, "No space left on device")

    job.submit(bad)
    with pytest.raises(OSError, match="No space"):
        job.submit(ran.append, 1)
    job.close()
    assert ran == []                             # the job after the failed one never ran


@pytest.mark.parametrize("end", ["wait", "close"])
def test_error_is_raised_by_wait_and_close_once(end):
    job = InFlight("t")
    job.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        getattr(job, end)()
    getattr(job, end)()                          # raised once: the next wait is clean
