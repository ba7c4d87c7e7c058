"""The state of one run, carried by a :class:`RunContext` object instead of module globals.

A run (one command line, or one library call such as ``httpanalyzer.analyze``) has state that
several layers share: the packets read so far (the command line reports them when a signal ends
the run), and whether a stop was asked for (SIGINT/SIGTERM while the main thread was busy
writing or pairing) and taken by a reader. The command line (webtap.clikit) makes one context
per run and *activates* it for the run's duration; the readers (webtap.stream.messages,
read_ahead, the fanout capture) take the active context when they are called and keep that
object, so a thread they start sees the same one. Outside a command line, :func:`current`
gives a fresh context for the calling thread's context (Python's contextvars), which nothing
stops.

This module imports nothing of the project: it sits at the bottom of the core, beside
webtap.errors.
"""
from __future__ import annotations

import contextvars

__all__ = ["RunContext", "current", "activate"]


class RunContext:
    """packets: packets read so far by the run's readers (one addition per batch).
    stop_requested: set by the command line's signal handler; a reader that sees it ends its
    input with KeyboardInterrupt at its next batch. stop_delivered: a reader did so."""

    __slots__ = ("packets", "stop_requested", "stop_delivered")

    def __init__(self) -> None:
        self.packets = 0
        self.stop_requested = False
        self.stop_delivered = False

    def deliver_stop(self) -> KeyboardInterrupt:
        """Mark the stop as taken; returns the exception the reader raises."""
        self.stop_delivered = True
        return KeyboardInterrupt("stop requested")

    def __repr__(self) -> str:
        return (f"RunContext(packets={self.packets}, stop_requested={self.stop_requested}, "
                f"stop_delivered={self.stop_delivered})")


_ACTIVE: contextvars.ContextVar[RunContext] = contextvars.ContextVar("webtap_run")


def current() -> RunContext:
    """The active run's context; a new one (made active) when none is."""
    try:
        return _ACTIVE.get()
    except LookupError:
        ctx = RunContext()
        _ACTIVE.set(ctx)
        return ctx


class activate:
    """``with activate(ctx):`` makes ctx the active context for the block (nests; restores the
    previous one on exit)."""

    __slots__ = ("ctx", "_token")

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def __enter__(self) -> RunContext:
        self._token = _ACTIVE.set(self.ctx)
        return self.ctx

    def __exit__(self, *exc) -> None:
        _ACTIVE.reset(self._token)
