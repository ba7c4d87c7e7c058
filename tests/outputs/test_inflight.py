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


def test_depth_bounds_the_unfinished_jobs_and_keeps_their_order():
    """depth=3: a submit returns while up to three jobs are unfinished and waits for the fourth;
    the jobs still run one at a time, in order."""
    job, seen = InFlight("t-depth", depth=3), []
    gate = threading.Event()

    def work(i):
        gate.wait(10)
        seen.append(i)

    for i in range(3):
        job.submit(work, i)                      # three unfinished: none waited
    t = threading.Thread(target=job.submit, args=(work, 3))
    t.start()
    t.join(0.2)
    assert t.is_alive()                          # the fourth waits for a place
    assert seen == []
    gate.set()
    t.join(10)
    assert not t.is_alive()
    for i in range(4, 12):
        job.submit(work, i)
    job.close()
    assert seen == list(range(12))


def test_depth_jobs_behind_a_failed_one_are_not_run():
    """With jobs queued behind a failed one, none of them runs (the error is raised once, by
    the next submit or wait), and the jobs submitted after that run again."""
    job, ran = InFlight("t-depth-err", depth=4), []
    gate = threading.Event()

    def bad():
        gate.wait(10)
        raise OSError(28, "No space left on device")

    job.submit(bad)
    job.submit(ran.append, 1)
    job.submit(ran.append, 2)
    gate.set()
    with pytest.raises(OSError, match="No space"):
        job.wait()
    job.submit(ran.append, 3)
    job.close()
    assert ran == [3]


def test_depth_must_be_positive():
    with pytest.raises(ValueError):
        InFlight("t", depth=0)


@pytest.mark.parametrize("end", ["wait", "close"])
def test_error_is_raised_by_wait_and_close_once(end):
    job = InFlight("t")
    job.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        getattr(job, end)()
    getattr(job, end)()                          # raised once: the next wait is clean


def test_one_worker_thread_kept_across_jobs_and_ended_by_close():
    """The jobs run in one worker thread (not a thread each: ~65 us a job), which close ends;
    a submit after close starts a new one; an InFlight dropped without close ends its worker."""
    import gc

    job, idents = InFlight("t-kept"), []
    for _ in range(10):
        job.submit(lambda: idents.append(threading.get_ident()))
    job.wait()
    assert len(set(idents)) == 1 and idents[0] != threading.get_ident()
    workers = [t for t in threading.enumerate() if t.name == "t-kept"]
    assert len(workers) == 1
    job.close()
    workers[0].join(5)
    assert not workers[0].is_alive()
    threads = []
    job.submit(lambda: threads.append(threading.current_thread()))
    job.close()
    assert threads and threads[0] is not workers[0] and threads[0].name == "t-kept"
    dropped = InFlight("t-dropped")
    dropped.submit(int)
    dropped.wait()
    (w,) = [t for t in threading.enumerate() if t.name == "t-dropped"]
    del dropped
    gc.collect()
    w.join(5)
    assert not w.is_alive()


def test_a_forked_child_runs_its_jobs_in_a_worker_of_its_own():
    """After fork the parent's worker thread does not exist in the child: the child's first
    submit starts its own (else its jobs would wait forever)."""
    import os

    job = InFlight("t-fork")
    job.submit(int)
    job.wait()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the child
        try:
            out = []
            job.submit(out.append, 7)
            job.close()
            os.write(w, b"ok" if out == [7] else b"no")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 2)
    os.waitpid(pid, 0)
    job.close()
    assert got == b"ok"


def test_signals_at_any_point_leave_it_usable():
    """KeyboardInterrupt (a signal) raised in the submitting thread at arbitrary points of
    submit and wait, thousands of times (in a child process: the interrupts must not reach
    pytest): afterwards close still returns (a lock left held, or a count waiting for a job
    never handed over, hung an interrupted --exchanges-out run under load), and no two jobs
    ever ran at once."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _SIGNAL_CHILD], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    interrupted, ran, distinct = map(int, r.stdout.split())
    assert interrupted > 10 and ran > 0 and ran == distinct, r.stdout


_SIGNAL_CHILD = """
import _thread, threading, time, sys
from webtap.inflight import InFlight
job, running, ran = InFlight("t-sig"), [], []
lock = threading.Lock()
def work(i):
    with lock:
        running.append(i)
        if len(running) != 1:
            sys.exit("two jobs at once")
    time.sleep(0.0002)
    ran.append(i)
    with lock:
        running.remove(i)
go, stop = threading.Event(), threading.Event()
def interrupter():
    go.wait()
    while not stop.is_set():
        _thread.interrupt_main()
        time.sleep(0.0003)
interrupted = 0
t = threading.Thread(target=interrupter, daemon=True)
t.start()
for i in range(3000):
    try:
        go.set()
        job.submit(work, i)
        if i % 7 == 0:
            job.wait()
    except KeyboardInterrupt:
        interrupted += 1
stop.set()
while True:                 # absorb the interrupts still on their way
    try:
        stop.set()
        while t.is_alive():
            t.join(0.01)
        time.sleep(0.02)
        break
    except KeyboardInterrupt:
        interrupted += 1
done = threading.Event()
def closer():
    job.close()
    done.set()
threading.Thread(target=closer, daemon=True).start()
if not done.wait(10):
    sys.exit("close() hung after interrupted submits and waits")
print(interrupted, len(ran), len(set(ran)))
"""


def test_close_runs_at_end_in_the_worker_and_waits_for_it():
    """at_end is the worker thread's last step, and close() returns only once it is done and the
    thread has ended: what a job left in the thread's own state (the TLS stage's libcrypto
    contexts) is freed before the caller goes on, not by the thread's exit destructors beside a
    process exit (ext/out/digest.h)."""
    ended = []

    def at_end():
        time.sleep(0.05)             # still running when close() would return without the join
        ended.append(threading.current_thread())

    job, ran = InFlight("t-end", at_end=at_end), []
    job.submit(lambda: ran.append(threading.current_thread()))
    job.close()
    assert ended == ran and ran[0] is not threading.current_thread()
    assert not ran[0].is_alive()
    job.submit(int)                  # a new worker, which ends the same way
    job.close()
    assert len(ended) == 2 and ended[1] is not ended[0] and not ended[1].is_alive()


def test_at_end_runs_after_a_failed_job_too():
    ended = []
    job = InFlight("t-end-err", at_end=lambda: ended.append(1))
    job.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        job.close()                  # the error is raised, and the worker ended all the same
    assert ended == [1]
    job.close()
    assert ended == [1]
