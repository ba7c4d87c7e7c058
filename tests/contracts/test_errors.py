"""Every exception class a package defines (or re-exports from its compiled modules) is under
that package's base error: WebtapError, HttpAnalyzerError, UrlFilterError (issue 19)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

BASES = {"webtap": ("webtap.errors", "WebtapError"),
         "httpanalyzer": ("httpanalyzer.errors", "HttpAnalyzerError"),
         "urlfilter": ("urlfilter.errors", "UrlFilterError")}
#: compiled modules and whose errors they raise
EXT_OWNER = {"source": "webtap", "dissect": "webtap", "pairing": "httpanalyzer",
             "feeder": "httpanalyzer", "avl": "urlfilter", "canon": "urlfilter",
             "urlmatch": "urlfilter"}


def _modules(pkg: str):
    mod = importlib.import_module(pkg)
    yield mod
    for info in pkgutil.iter_modules(mod.__path__, pkg + "."):
        if info.name.startswith("webtap._ext") or info.name.endswith(("cli", "__main__")):
            continue
        yield importlib.import_module(info.name)


def _errors(mod):
    return [v for v in vars(mod).values()
            if inspect.isclass(v) and issubclass(v, BaseException)
            and v.__module__.split(".")[0] in ("webtap", "httpanalyzer", "urlfilter")]


@pytest.mark.parametrize("pkg", sorted(BASES))
def test_package_errors_under_base(pkg):
    base = getattr(importlib.import_module(BASES[pkg][0]), BASES[pkg][1])
    found = {e for m in _modules(pkg) for e in _errors(m) if e.__module__.startswith(pkg)}
    found |= {e for name, owner in EXT_OWNER.items() if owner == pkg
              for e in _errors(importlib.import_module(f"webtap._ext.{name}"))}
    assert found, f"no error classes found in {pkg}"
    # webtap.clikit.Interrupted is how SIGINT/SIGTERM travel: a KeyboardInterrupt, deliberately
    # not an Exception (no `except Exception` may swallow Ctrl-C)
    bad = sorted(e.__qualname__ for e in found
                 if not issubclass(e, base) and not issubclass(e, KeyboardInterrupt))
    assert not bad, f"{pkg}: not under {base.__name__}: {bad}"
