"""Shared by the import contracts (test_imports_at_top.py, test_function_imports.py): the module
an import statement names, read from the source's syntax tree."""
from __future__ import annotations

import ast


def from_module(node: ast.ImportFrom, modname: str, is_pkg: bool) -> str:
    """The absolute module of `from X import ...` written in module `modname` (a package's
    __init__ when is_pkg): relative levels resolved against it."""
    if not node.level:
        return node.module or ""
    base = modname.split(".")
    base = base[:len(base) - node.level + (1 if is_pkg else 0)]
    return ".".join(base + ([node.module] if node.module else []))
