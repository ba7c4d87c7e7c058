"""Imports of project modules inside functions, one by one (issue 29, "Done when": imports inside
functions only in the command registry and for optional dependencies).

tests/contracts/test_imports_at_top.py holds the general rule. This test is stricter for imports
that name a project module (webtap, httpanalyzer, urlfilter, the compiled webtap._ext modules):
each (importing module, imported module) pair found inside a function must be listed in ALLOWED
below, with its reason, and the reason is checked against the code:

- ``registry``: the import is in a command registry (a function of a cli.py, which after issue 29
  holds only the parser and the table of what each subcommand and option loads);
- ``optional``: the imported module reaches, through its own top-level imports, a package of an
  optional extra of pyproject.toml (test_imports_at_top.OPTIONAL_ROOTS: dask, cryptography, ...).

NOT_YET lists the pairs that still break the rule (to shrink). A pair that is no longer found
fails too (the lists only shrink with the code). The lazy tables that are no import statement
(httpanalyzer.cli.Parts, the PEP 562 tables of httpanalyzer and webtap.records) are checked by
test_imports_at_top.test_dynamic_imports_only_in_a_registry. The counts for a note:
``python -m tests.contracts.test_function_imports``.
"""
from __future__ import annotations

import ast
import sys

from tests.contracts.importast import from_module
from tests.contracts.test_imports_at_top import OPTIONAL_ROOTS, PACKAGES, ROOT, _graph

REGISTRY, OPTIONAL = "registry", "optional"

# (importing module, imported module) -> (kind, why)
ALLOWED = {
    ("webtap.cli", "webtap.commands"): (REGISTRY, "`webtap info` / `webtap dissect` (numpy, the reader, the walk)"),
}

#: still imported inside a function (issue 29, to shrink): pair -> why it is not moved yet. Empty
#: since the tenth session: httpanalyzer.tls imports httpanalyzer.zeek at its top (both hold
#: pyarrow already), and `tls --plots` takes httpanalyzer.tls_plot from the registry (Parts)
NOT_YET: dict = {}


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
            if mod not in hit and any(d.split(".")[0] in roots or d in hit for d in deps):
                hit.add(mod)
                changed = True
    return hit


def _check():
    files, top, _ = _graph()
    optional = _reaches(top, OPTIONAL_ROOTS)
    found = function_project_imports()
    bad, seen = [], set()
    for mod, func, line, target in found:
        key = (mod, target)
        seen.add(key)
        where = f"{files[mod].relative_to(ROOT)}:{line} ({func}) imports {target}"
        if key in NOT_YET:
            continue
        if key not in ALLOWED:
            bad.append(f"{where}: move it to the top of the module, or list it in ALLOWED with its reason")
            continue
        kind = ALLOWED[key][0]
        holds = {REGISTRY: files[mod].name == "cli.py", OPTIONAL: target in optional}[kind]
        if not holds:
            bad.append(f"{where}: listed as {kind}, which does not hold here (registry: a function "
                       f"of a cli.py; optional: reaches one of {OPTIONAL_ROOTS})")
    stale = sorted((set(ALLOWED) | set(NOT_YET)) - seen)
    return found, bad, stale


def test_function_level_project_imports_are_listed_with_a_true_reason():
    _, bad, _ = _check()
    assert not bad, "\n".join(bad)


def test_allow_list_has_no_stale_entry():
    _, _, stale = _check()
    assert not stale, f"ALLOWED or NOT_YET lists pairs no longer imported inside a function: {stale}"


def test_an_unlisted_or_mislabelled_import_fails(monkeypatch):
    """The check itself can fail: a pair taken off the list, a pair given a false reason, and (an
    import statement put inside a function of a module that is no cli.py) a pair listed as
    registry where it is not one."""
    monkeypatch.delitem(ALLOWED, ("webtap.cli", "webtap.commands"))
    _, bad, _ = _check()
    assert any("(_handle) imports webtap.commands: move it" in b for b in bad), bad
    monkeypatch.setitem(ALLOWED, ("webtap.cli", "webtap.commands"), (OPTIONAL, "wrong"))
    real = function_project_imports()
    monkeypatch.setattr(sys.modules[__name__], "function_project_imports",
                        lambda: real + [("httpanalyzer.tls", "handle", 1, "httpanalyzer.tls_plot")])
    monkeypatch.setitem(ALLOWED, ("httpanalyzer.tls", "httpanalyzer.tls_plot"), (REGISTRY, "wrong"))
    _, bad, _ = _check()
    assert any("imports webtap.commands: listed as optional," in b for b in bad), bad
    assert any("imports httpanalyzer.tls_plot: listed as registry," in b for b in bad), bad


if __name__ == "__main__":
    found, bad, stale = _check()
    kinds: dict = {}
    for mod, _, _, t in found:
        k = "not yet" if (mod, t) in NOT_YET else str(ALLOWED.get((mod, t), ("not allowed",))[0])
        kinds[k] = kinds.get(k, 0) + 1
    print(f"project imports inside functions: {len(found)} ({kinds}); not allowed {len(bad)}, stale {len(stale)}")
    for b in bad:
        print("  " + b)
