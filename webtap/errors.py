"""Exceptions of webtap. Each subclasses WebtapError and a builtin so callers can catch what
they know.

- :class:`NotACapture` (ValueError): the file is not a pcap/pcapng capture (gzip'd or not).
- :class:`BpfError` (ValueError): libpcap rejected a filter expression; libpcap's text included.
- :class:`CaptureError` (RuntimeError): libpcap or the OS refused an operation (opening an
  interface, injecting, a read error), with libpcap's own error text.

They are defined in the compiled capture module (ext/source.pyx), which raises them.
"""
from webtap._ext.source import BpfError, CaptureError, NotACapture, WebtapError

__all__ = ["WebtapError", "BpfError", "CaptureError", "NotACapture"]
