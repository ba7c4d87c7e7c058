"""The run's state lives in a RunContext (webtap.runctx), not in module globals (issue 29):
readers take the active context when called, a stop asked on it ends their input, and two runs
(or two threads) do not share one."""
from __future__ import annotations

import threading

import pytest

from tests.conftest import require_shared, SHARED
from webtap import runctx
from webtap.stream import messages, read_ahead

TRACE = SHARED / "traces" / "arkime" / "http-100-continue.pcap"


def _packets(path) -> int:
    from webtap.capture import open_trace

    with open_trace(str(path)) as t:
        return sum(len(b) for b in t)


def test_readers_count_into_the_active_context():
    path = require_shared(TRACE)
    want = _packets(path)
    a, b = runctx.RunContext(), runctx.RunContext()
    with runctx.activate(a):
        for _ in messages(str(path)):
            pass
    with runctx.activate(b):
        for _ in messages(str(path)):
            pass
        for _ in messages(str(path)):
            pass
    assert (a.packets, b.packets) == (want, 2 * want)
    assert not a.stop_requested and not a.stop_delivered


def test_context_is_bound_at_call_not_at_first_resume():
    """read_ahead resumes the generator in its own thread: the packets still count into the
    context active where messages() was called."""
    path = require_shared(TRACE)
    ctx = runctx.RunContext()
    with runctx.activate(ctx):
        gen = read_ahead(messages(str(path)))
    other = runctx.RunContext()
    with runctx.activate(other):
        n = sum(1 for _ in gen)
    assert n >= 1 and ctx.packets == _packets(path) and other.packets == 0


def test_a_requested_stop_ends_the_input_and_is_marked_delivered():
    path = require_shared(TRACE)
    ctx = runctx.RunContext()
    ctx.stop_requested = True
    with runctx.activate(ctx):
        with pytest.raises(KeyboardInterrupt):
            next(iter(messages(str(path))))
    assert ctx.stop_delivered and ctx.packets == 0
    fresh = runctx.RunContext()                    # the next run starts clean
    with runctx.activate(fresh):
        assert sum(1 for _ in messages(str(path))) >= 1
    assert not fresh.stop_delivered


def test_threads_without_an_active_context_get_their_own():
    seen = []

    def work():
        seen.append(runctx.current())

    main = runctx.RunContext()
    with runctx.activate(main):
        t = threading.Thread(target=work)
        t.start()
        t.join()
        assert runctx.current() is main
    assert seen and seen[0] is not main


def test_no_module_keeps_run_state():
    """The old global (webtap.stream.TALLY) is gone and nothing reaches for it."""
    import webtap.stream

    assert not hasattr(webtap.stream, "TALLY")
