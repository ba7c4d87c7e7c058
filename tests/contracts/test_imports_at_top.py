"""Imports stand at the top of a module (issue 29): the dependency graph is what the top of the
files says. An import inside a function is allowed only where start-up needs it:

- in the command layer (`*/cli.py`, `__main__.py`, `webtap/startup.py`), which loads a command's
  machinery only when that command runs (the lazy command registry);
- in a `try:` whose `except ImportError` handles a missing optional part (an extension built
  only on Linux, an optional package), or in a package's PEP 562 `__getattr__` (lazy API);
- of a heavy or optional module: one that is, or reaches through its own top-level imports,
  pyarrow, pandas, matplotlib, dask, tqdm, scipy, duckdb, zat, or multiprocessing's process
  machinery (the feeder and fanout executors). A run that reads only a header (or fails on its
  arguments) never imports them (benchmarks/bench_startup.py: <= 90 ms).

The graph is read statically (ast), so this test does not depend on what happens to be imported
already."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.contracts.importast import from_module

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("webtap", "httpanalyzer", "urlfilter")
HEAVY_ROOTS = ("pyarrow", "pandas", "matplotlib", "dask", "distributed", "tqdm", "scipy",
               "duckdb", "zat", "multiprocessing", "concurrent")
COMMAND_LAYER = ("cli.py", "__main__.py", "startup.py")


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


def _heavy(files, top):
    """Project modules whose own top-level imports reach a heavy root (fixed point)."""
    heavy = set()
    changed = True
    while changed:
        changed = False
        for mod, deps in top.items():
            if mod in heavy:
                continue
            if any(d.split(".")[0] in HEAVY_ROOTS or d in heavy for d in deps):
                heavy.add(mod)
                changed = True
    return heavy


def _is_heavy(name: str, heavy: set) -> bool:
    return name.split(".")[0] in HEAVY_ROOTS or name in heavy


def function_level_imports():
    """(allowed, not allowed) function-level imports: (module, line, first name)."""
    files, top, inner = _graph()
    heavy = _heavy(files, top)
    ok, bad = [], []
    for mod, line, names in inner:
        f = files[mod]
        if f.name in COMMAND_LAYER or any(_is_heavy(n, heavy) for n in names):
            ok.append((mod, line, names[0]))
        elif names[0].split(".")[0] not in PACKAGES and names[0].split(".")[0] in sys.stdlib_module_names:
            bad.append((mod, line, names[0]))
        else:
            bad.append((mod, line, names[0]))
    return ok, bad


def test_no_function_level_import_outside_the_command_layer_unless_heavy():
    ok, bad = function_level_imports()
    assert not bad, "imports to move to the top of their module:\n" + "\n".join(
        f"{m}:{ln} {n}" for m, ln, n in bad)


if __name__ == "__main__":        # the counts for a note: python -m tests.contracts.test_imports_at_top
    ok, bad = function_level_imports()
    print(f"function-level imports: {len(ok)} allowed (command layer or heavy), {len(bad)} to move")
    for m, ln, n in bad:
        print(f"  {m}:{ln} {n}")
