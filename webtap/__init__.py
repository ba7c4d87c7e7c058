"""webtap core: the stages shared by httpanalyzer and urlfilter (capture and dissect).

Data flow: capture (webtap.capture) -> dissect (webtap.dissect) -> pair (httpanalyzer) |
match (urlfilter) -> records -> analysis.
"""
__version__ = "0.1.0"

from webtap._ext.source import libpcap_version  # noqa: E402

__all__ = ["__version__", "libpcap_version"]
