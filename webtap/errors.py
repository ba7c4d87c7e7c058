"""Every error the project raises derives from :class:`WebtapError`, defined here, at the bottom
of the core: this module imports nothing of the project, so the compiled modules (ext/) import
it at their top and raise these classes, and each package's own base class derives from it
(httpanalyzer.errors.HttpAnalyzerError, urlfilter.errors.UrlFilterError). Each class also
subclasses the builtin a caller would naturally catch.

- :class:`NotACapture` (ValueError): the file is not a pcap/pcapng capture (gzip'd or not).
- :class:`BpfError` (ValueError): libpcap rejected a filter expression; libpcap's text included.
- :class:`CaptureError` (RuntimeError): libpcap or the OS refused an operation (opening an
  interface, injecting, a read error), with libpcap's own error text.
- :class:`UrlFilterError`: the base of the URL tree's and urlfilter's errors; the tree itself is
  a compiled module of the core (ext/url/avl.pyx), which raises :class:`TreeCorrupt`
  (RuntimeError) when its arrays violate an invariant (a bug, or a damaged snapshot file).
"""

__all__ = ["WebtapError", "BpfError", "CaptureError", "NotACapture", "UrlFilterError",
           "TreeCorrupt"]


class WebtapError(Exception):
    """Base class of every error of webtap, httpanalyzer and urlfilter."""


class CaptureError(WebtapError, RuntimeError):
    """libpcap (or the OS) refused an operation; the message is libpcap's own error text."""


class NotACapture(WebtapError, ValueError):
    """The file is not a pcap or pcapng capture (nor a gzip-compressed one)."""


class BpfError(WebtapError, ValueError):
    """libpcap could not compile the BPF filter expression."""


class UrlFilterError(WebtapError):
    """Base class of urlfilter's errors (InvalidUrl, TreeFull, StoreError, NotAList) and of the
    compiled tree's TreeCorrupt."""


class TreeCorrupt(UrlFilterError, RuntimeError):
    """The tree's arrays violate an invariant (a bug, or a damaged snapshot file)."""
