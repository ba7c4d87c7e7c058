"""Exceptions of urlfilter: each subclasses UrlFilterError and the builtin a caller would
naturally catch. UrlFilterError (a webtap.errors.WebtapError) and TreeCorrupt, which the compiled
tree raises, are defined at the bottom of the core, webtap.errors; they are re-exported here."""

from webtap.errors import TreeCorrupt, UrlFilterError

__all__ = ["UrlFilterError", "TreeCorrupt", "InvalidUrl", "TreeFull", "StoreError"]


class InvalidUrl(UrlFilterError, ValueError):
    """A URL with no canonical form; .reason is one of urlfilter.canon.REASONS."""

    def __init__(self, url, reason):
        self.url = url
        self.reason = reason
        shown = url if len(url) <= 120 else url[:117] + "..."
        super().__init__(f"invalid URL ({reason}): {shown!r}")


class TreeFull(UrlFilterError, OverflowError):
    """More URLs than the tree's 28-bit ids can address (2^28 - 1)."""


class StoreError(UrlFilterError, RuntimeError):
    """The SQLite store refused an operation (unknown id, duplicate URL, bad period)."""
