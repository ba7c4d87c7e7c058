"""Imports stand at the top of a module (issue 29): the dependency graph is what the top of the
files says. An import inside a function is allowed only where lazy loading has its one place:

- in a command registry (`*/cli.py`, `__main__.py`, `webtap/startup.py`), which loads a command's
  module (or a part only an option needs: `--plots`, `--dask`, ...) once the arguments are parsed;
- in a `try:` whose `except ImportError` handles a missing optional part (an extension built
  only on Linux), or in a package's PEP 562 `__getattr__` (the lazy tables: the public API of
  `httpanalyzer`, its executors, the record kinds of `webtap.records`);
- of an optional dependency: a package of one of the extras in pyproject.toml
  ([project.optional-dependencies], the `test` extra aside), which a run without it never needs;
- the few named in EXCEPTIONS below, each with its reason.

A third-party module being large (pyarrow, pandas, matplotlib) is no reason any more: a module
that needs it imports it at the top and is itself loaded only by the command that needs it.
NOT_YET lists what still breaks the rule (the list only shrinks: a pair no longer found fails).

The graph is read statically (ast), so this test does not depend on what happens to be imported
already. Counts for a note: python -m tests.contracts.test_imports_at_top"""
from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.contracts.importast import from_module

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("webtap", "httpanalyzer", "urlfilter")
COMMAND_LAYER = ("cli.py", "__main__.py", "startup.py")


def optional_roots() -> tuple:
    """The import names of the packages of pyproject.toml's optional extras (but `test`): a
    distribution's name with '-' as '_', and the extras it names in brackets (dask[distributed]
    brings the package `distributed`)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    roots = set()
    for name, reqs in extras.items():
        if name == "test":
            continue
        for r in reqs:
            m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[([^\]]*)\])?", r)
            roots.add(m.group(1).lower().replace("-", "_"))
            roots.update(x.strip().lower().replace("-", "_") for x in (m.group(2) or "").split(",") if x.strip())
    return tuple(sorted(roots))


OPTIONAL_ROOTS = optional_roots()

#: (importing module, imported module) -> why it stays inside a function
EXCEPTIONS = {
    ("httpanalyzer.plot", "matplotlib.pyplot"): "pyplot picks a backend when imported: only for a "
        "figure drawn on pyplot's own axes (a notebook's), never by the commands",
    ("urlfilter.plot", "matplotlib.pyplot"): "pyplot picks a backend when imported: margin_cdf "
        "chooses Agg first when it writes a file",
    ("httpanalyzer.compare_report", "matplotlib.pyplot"): "pyplot picks a backend when imported "
        "(write_report's figures)",
}

#: what still breaks the rule (issue 29, to shrink): (importing module, imported module) -> why.
#: Empty since the tenth session: the line writer (webtap.writers) imports pyarrow at its top and
#: is built for the first record (webtap.clikit.Output), the line reader is webtap.linereader /
#: httpanalyzer.lines, dissect's views are webtap.records.messageview's, and tqdm is the optional
#: extra webtap[progress] (webtap.capture.progress_bar)
NOT_YET: dict = {}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(tree: ast.AST, modname: str, is_pkg: bool):
    """(node, imported module names, inside a function, under TYPE_CHECKING) per import."""
    parents = {}
    for node in ast.walk(tree):
        for ch in ast.iter_child_nodes(node):
            parents[ch] = node
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom):
            mod = from_module(node, modname, is_pkg)
            names = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            names = [a.name for a in node.names]
        infn = tc = False
        p = node
        while p in parents:
            p = parents[p]
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
                infn = True
                if p.name == "__getattr__" and parents.get(p) is tree:
                    tc = True                     # PEP 562 lazy attribute of a module
            if isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test):
                tc = True
            if isinstance(p, ast.Try) and any(
                    h.type is not None and "ImportError" in ast.unparse(h.type) for h in p.handlers):
                tc = True                         # an optional part, tried
        yield node, names, infn, tc


def _graph():
    files = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            files[_module_name(f)] = f
    top: dict[str, set[str]] = {}
    inner: list[tuple[str, int, list[str]]] = []
    for mod, f in files.items():
        tree = ast.parse(f.read_text())
        top[mod] = set()
        for node, names, infn, tc in _imports(tree, mod, f.name == "__init__.py"):
            if tc:
                continue
            if infn:
                inner.append((mod, node.lineno, names))
            else:
                top[mod].update(names)
    return files, top, inner


def _optional(name: str) -> bool:
    return name.split(".")[0] in OPTIONAL_ROOTS


def function_level_imports():
    """(allowed, listed in NOT_YET, not allowed) function-level imports of modules outside the
    project (stdlib and third party): (module, line, name)."""
    files, _, inner = _graph()
    ok, later, bad = [], [], []
    for mod, line, names in inner:
        name = names[0]
        if name.split(".")[0] in PACKAGES:
            continue                     # project modules: test_function_imports, pair by pair
        if files[mod].name in COMMAND_LAYER or _optional(name) or (mod, name) in EXCEPTIONS:
            ok.append((mod, line, name))
        elif (mod, name) in NOT_YET:
            later.append((mod, line, name))
        else:
            bad.append((mod, line, name))
    return ok, later, bad


def dynamic_imports():
    """(module, line) of importlib.import_module / __import__ calls outside a command registry
    and a package's PEP 562 __getattr__: lazy loading by another name is lazy loading too."""
    files, _, _ = _graph()
    out = []
    for mod, f in files.items():
        if f.name in COMMAND_LAYER:
            continue
        tree = ast.parse(f.read_text())
        getattrs = {id(n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"}
        inside = set()
        for n in tree.body:
            if id(n) in getattrs:
                inside.update(id(x) for x in ast.walk(n))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and id(node) not in inside:
                fn = ast.unparse(node.func)
                if fn in ("importlib.import_module", "import_module", "__import__"):
                    out.append((mod, node.lineno))
    return out


#: the output registry of webtap.clikit (format -> writer module:class, loaded for that output)
DYNAMIC_REGISTRIES = {"webtap.clikit"}


def test_no_function_level_import_outside_a_registry_unless_optional():
    _, _, bad = function_level_imports()
    assert not bad, "imports to move to the top of their module:\n" + "\n".join(
        f"{m}:{ln} {n}" for m, ln, n in bad)


def test_not_yet_list_has_no_stale_entry():
    _, later, _ = function_level_imports()
    stale = sorted(set(NOT_YET) - {(m, n) for m, _, n in later})
    assert not stale, f"NOT_YET lists imports no longer inside a function: {stale}"


def test_dynamic_imports_only_in_a_registry():
    bad = [(m, ln) for m, ln in dynamic_imports() if m not in DYNAMIC_REGISTRIES]
    assert not bad, f"importlib/__import__ outside a command registry or __getattr__: {bad}"


def test_optional_roots_are_the_extras():
    """Read from pyproject.toml, not written here: dask (and its distributed), cryptography, the
    readers of the tests (zat, duckdb, communityid), marisa-trie and tqdm (the progress bar,
    webtap[progress]) are optional; pyarrow, pandas and matplotlib (required dependencies) are
    not."""
    assert {"dask", "distributed", "cryptography", "zat", "duckdb", "communityid", "marisa_trie",
            "tqdm"} <= set(OPTIONAL_ROOTS)
    assert not {"pyarrow", "pandas", "matplotlib", "numpy"} & set(OPTIONAL_ROOTS)


def test_the_rule_can_fail(monkeypatch):
    """An excepted import taken off its list is reported as an import to move (NOT_YET is empty:
    an EXCEPTIONS entry stands in for it)."""
    monkeypatch.delitem(EXCEPTIONS, ("httpanalyzer.plot", "matplotlib.pyplot"))
    _, _, bad = function_level_imports()
    assert any(m == "httpanalyzer.plot" and n == "matplotlib.pyplot" for m, _, n in bad), bad


if __name__ == "__main__":
    ok, later, bad = function_level_imports()
    third = lambda xs: [x for x in xs if x[2].split(".")[0] not in PACKAGES]   # noqa: E731
    print(f"function-level imports (stdlib and third party): {len(ok)} allowed (registry, optional "
          f"or excepted; {len(third(ok))} third-party), {len(later)} not yet moved ({len(third(later))} third-party), "
          f"{len(bad)} to move; dynamic imports outside a registry: "
          f"{len([d for d in dynamic_imports() if d[0] not in DYNAMIC_REGISTRIES])}")
    for m, ln, n in later + bad:
        print(f"  {m}:{ln} {n}")
