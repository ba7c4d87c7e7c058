"""Imports of project modules inside functions, one by one (issue 29, "Done when": imports inside
functions only in the command registry and for optional or heavy dependencies).

tests/contracts/test_imports_at_top.py holds the general rule (stdlib and light modules at the
top; the command layer and heavy modules may be lazy). This test is stricter for imports that
name a project module (webtap, httpanalyzer, urlfilter, the compiled webtap._ext modules): each
(importing module, imported module) pair found inside a function must be listed in ALLOWED
below, with its reason, and the reason is checked against the code:

- ``registry``: the import is in a command dispatcher (``main`` / ``cli`` / ``_handle`` of a cli.py),
  which loads a subcommand's module only when that subcommand runs;
- ``heavy``: the imported module reaches, through its own top-level imports, pyarrow, pandas,
  matplotlib, dask, tqdm, scipy, duckdb, zat or multiprocessing (what a header-only run or
  ``--help`` never loads);
- ``numpy``: the imported module reaches numpy or a compiled webtap._ext module at import (tens of
  ms): the command layer defers it so that ``--help`` and usage errors stay within the 90 ms
  start-up (benchmarks/bench_startup.py). Only allowed in a cli.py.

A pair that is no longer found fails too (the list only shrinks with the code). The counts for a
note: ``python -m tests.contracts.test_function_imports``.
"""
from __future__ import annotations

import ast
from pathlib import Path

from tests.contracts.importast import from_module
from tests.contracts.test_imports_at_top import HEAVY_ROOTS, PACKAGES, ROOT, _graph

REGISTRY, HEAVY, NUMPY = "registry", "heavy", "numpy"
# the functions of a cli.py that dispatch to a subcommand's module
REGISTRY_FUNCTIONS = ("main", "cli", "_handle")

# (importing module, imported module) -> (kind or kinds, why); with several kinds, each place the
# pair occurs must satisfy one of them
ALLOWED = {
    # -- the command registries: a subcommand's module, loaded when it runs
    ("webtap.cli", "webtap.commands"): (REGISTRY, "`webtap info` / `webtap dissect` (numpy, the reader, the walk)"),
    # -- heavy modules (pyarrow, pandas, matplotlib, dask, multiprocessing)
    ("httpanalyzer.abuse", "httpanalyzer.abuse_plot"): (HEAVY, "matplotlib, for --plots only"),
    ("httpanalyzer.compare_tls", "httpanalyzer.tls"): (HEAVY, "pyarrow: the TLS records, once the arguments are checked"),
    ("httpanalyzer.tls", "httpanalyzer.tls_plot"): (HEAVY, "matplotlib: --plots only"),
    ("httpanalyzer.tls", "httpanalyzer.zeek"): (HEAVY, "pyarrow + zat: the Zeek log view only"),
    ("httpanalyzer.writers", "httpanalyzer.zeek"): (HEAVY, "pyarrow + zat: the Zeek log view only"),
    ("urlfilter.analyzer", "urlfilter.store"): (HEAVY, "the SQLite store with its pyarrow import/export"),
    ("urlfilter.analyzer", "urlfilter.tree"): (HEAVY, "the URL tree (pyarrow columns)"),
    ("urlfilter.analyzer", "urlfilter.urlstore"): (HEAVY, "the URL store (pyarrow columns)"),
    ("urlfilter.plot", "urlfilter.measure"): (HEAVY, "pandas"),
    # -- numpy and the compiled walk, deferred by the command layer (start-up of --help)
}


def _project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def function_project_imports():
    """[(importing module, function, line, imported module)] for every import statement inside a
    function that names a project module. `from pkg import mod` names pkg.mod when that is a
    module; PEP 562 __getattr__ and `try: ... except ImportError` imports are left out (lazy API,
    optional parts), as in test_imports_at_top."""
    files, _, _ = _graph()
    out = []
    for mod, f in sorted(files.items()):
        tree = ast.parse(f.read_text())
        is_pkg = f.name == "__init__.py"

        def visit(node, func, skip):
            for ch in ast.iter_child_nodes(node):
                fn, sk = func, skip
                if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    fn = ch.name if func is None else f"{func}.{ch.name}"
                    sk = skip or (ch.name == "__getattr__" and node is tree)
                if isinstance(ch, ast.Try) and any(
                        h.type is not None and "ImportError" in ast.unparse(h.type) for h in ch.handlers):
                    sk = True
                if isinstance(ch, (ast.Import, ast.ImportFrom)) and func is not None and not skip:
                    if isinstance(ch, ast.ImportFrom):
                        src = from_module(ch, mod, is_pkg)
                        targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in files else src for a in ch.names]
                    else:
                        targets = [a.name for a in ch.names]
                    for t in dict.fromkeys(targets):
                        if _project(t):
                            out.append((mod, func, ch.lineno, t))
                visit(ch, fn, sk)

        visit(tree, None, False)
    return out


def _reaches(top: dict, roots) -> set:
    """Project modules whose top-level imports reach a module under `roots` (fixed point)."""
    hit: set = set()
    changed = True
    while changed:
        changed = False
        for mod, deps in top.items():
            if mod not in hit and any(d.startswith(roots) or d in hit for d in deps):
                hit.add(mod)
                changed = True
    return hit


def _check():
    files, top, _ = _graph()
    heavy = _reaches(top, tuple(r + "." for r in HEAVY_ROOTS) + HEAVY_ROOTS)
    numpy = _reaches(top, ("numpy", "webtap._ext."))
    found = function_project_imports()
    bad, seen = [], set()
    for mod, func, line, target in found:
        key = (mod, target)
        seen.add(key)
        where = f"{files[mod].relative_to(ROOT)}:{line} ({func}) imports {target}"
        if key not in ALLOWED:
            bad.append(f"{where}: move it to the top of the module, or list it in ALLOWED with its reason")
            continue
        kinds = ALLOWED[key][0]
        kinds = (kinds,) if isinstance(kinds, str) else kinds
        in_cli = files[mod].name == "cli.py"
        holds = {
            REGISTRY: in_cli and func in REGISTRY_FUNCTIONS,
            HEAVY: target in heavy or target.split(".")[0] in HEAVY_ROOTS,
            NUMPY: in_cli and (target in numpy or target in heavy or target.startswith("webtap._ext.")),
        }
        if not any(holds[k] for k in kinds):
            bad.append(f"{where}: listed as {'/'.join(kinds)}, which does not hold here (registry: "
                       f"cli.py {'/'.join(REGISTRY_FUNCTIONS)}; heavy: reaches one of {HEAVY_ROOTS}; numpy: a cli.py "
                       f"deferring numpy or a compiled module)")
    stale = sorted(set(ALLOWED) - seen)
    return found, bad, stale


def test_function_level_project_imports_are_listed_with_a_true_reason():
    _, bad, _ = _check()
    assert not bad, "\n".join(bad)


def test_allow_list_has_no_stale_entry():
    _, _, stale = _check()
    assert not stale, f"ALLOWED lists pairs no longer imported inside a function: {stale}"


def test_an_unlisted_or_mislabelled_import_fails(monkeypatch):
    """The check itself can fail: a pair taken off the list, and a numpy-only module called heavy."""
    monkeypatch.delitem(ALLOWED, ("webtap.cli", "webtap.commands"))
    monkeypatch.setitem(ALLOWED, ("urlfilter.plot", "urlfilter.measure"), (NUMPY, "wrong"))
    monkeypatch.setitem(ALLOWED, ("httpanalyzer.abuse", "httpanalyzer.abuse_plot"), (REGISTRY, "wrong"))
    _, bad, _ = _check()
    assert any("(_handle) imports webtap.commands: move it" in b for b in bad), bad
    assert any("imports urlfilter.measure: listed as numpy," in b for b in bad), bad
    assert any("imports httpanalyzer.abuse_plot: listed as registry," in b for b in bad), bad


if __name__ == "__main__":
    found, bad, stale = _check()
    kinds: dict = {}
    for mod, _, _, t in found:
        k = str(ALLOWED.get((mod, t), ("not allowed",))[0])
        kinds[k] = kinds.get(k, 0) + 1
    print(f"project imports inside functions: {len(found)} ({kinds}); not allowed {len(bad)}, stale {len(stale)}")
    for b in bad:
        print("  " + b)
