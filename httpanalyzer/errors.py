"""Exceptions of httpanalyzer: each subclasses HttpAnalyzerError and the builtin a caller would
naturally catch.

- :class:`ConsumerFailed` (RuntimeError): a pairing consumer process died or raised
  (httpanalyzer.feeder); it carries the consumer's traceback.
- :class:`OverlappingTraces` (ValueError): the traces given to the distributed analyzer overlap
  in time (httpanalyzer.distributed).
- :class:`WorkersLost` (RuntimeError): Dask gave up on a task of the distributed analyzer, its
  workers having died more often than the scheduler allows (exit 1 in the CLI).
- :class:`TsharkError` (RuntimeError): tshark, editcap or capinfos failed (httpanalyzer.tshark);
  the message names the tool.
- :class:`TruthError` (RuntimeError): the decrypted truth of `compare --tls --keylog` cannot be
  built at all (httpanalyzer.tls_truth: the optional `cryptography` package is missing).

The core's own errors (webtap.errors: NotACapture, BpfError, CaptureError) pass through
unchanged; HttpAnalyzerError derives from their base, webtap.errors.WebtapError.
"""

from webtap.errors import WebtapError


class HttpAnalyzerError(WebtapError):
    """Base class of httpanalyzer's errors."""


class ConsumerFailed(HttpAnalyzerError, RuntimeError):
    """A consumer died or raised. consumer: its id; exitcode; messages/frames: what it had
    fed to its pairing table; detail: its traceback when it raised."""

    def __init__(self, consumer: int, exitcode, messages: int, frames: int, detail: str = ""):
        self.consumer, self.exitcode, self.messages, self.frames, self.detail = (
            consumer, exitcode, messages, frames, detail)
        how = f"raised:\n{detail}" if detail else f"died (exit code {exitcode})"
        super().__init__(f"feeder consumer {consumer} {how} after {messages} HTTP messages "
                         f"in {frames} frames")


class OverlappingTraces(HttpAnalyzerError, ValueError):
    """Several traces overlap in capture time: one stream would interleave them."""


class WorkersLost(HttpAnalyzerError, RuntimeError):
    """Dask's KilledWorker for a task of httpanalyzer.distributed: its workers died more often
    than distributed.scheduler.allowed-failures; the message names the task."""


class TsharkError(HttpAnalyzerError, RuntimeError):
    """tshark (or editcap/capinfos) failed: the message names the tool, its exit status and the
    end of its stderr."""


class TruthError(HttpAnalyzerError, RuntimeError):
    """The decrypted truth cannot be built at all (the optional dependency missing)."""
