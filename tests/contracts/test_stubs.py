"""The contracts of the compiled modules: every ext/<stage>/*.pyx module has a type stub
(webtap/_ext/NAME.pyi), and the stub says what the BUILT module has (issue 19).

Checked against the imported modules, not their source: the public names (functions, classes,
constants) are the same set in the module and in its stub; each function's and method's
parameters (names, order, kind, which have defaults) are those inspect.signature reports for
the compiled function; each class's public members (methods, properties, attributes) are the
same set. A stub that lags behind the module (or describes something the module lacks) fails.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
STUBS = REPO / "webtap" / "_ext"
MODULES = sorted(p.stem for p in (REPO / "ext").rglob("*.pyx"))


def _stub(name: str) -> ast.Module:
    path = STUBS / f"{name}.pyi"
    assert path.exists(), f"no type stub for the compiled module {name}: {path.relative_to(REPO)}"
    return ast.parse(path.read_text(), filename=str(path))


def _params(args: ast.arguments, drop_self: bool) -> list[tuple[str, str, bool]]:
    """(name, kind, has default) of a stub's def, as inspect.Parameter kinds."""
    out = []
    pos = args.posonlyargs + args.args
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    for i, (a, d) in enumerate(zip(pos, defaults)):
        kind = "POSITIONAL_ONLY" if i < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append((a.arg, kind, d is not None))
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", False))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append((a.arg, "KEYWORD_ONLY", d is not None))
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", False))
    if drop_self and out and out[0][0] in ("self", "cls"):
        out = out[1:]
    return out


def _real_params(obj, drop_self: bool) -> list[tuple[str, str, bool]] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None                     # no signature to compare (a builtin slot)
    out = [(p.name, p.kind.name, p.default is not inspect.Parameter.empty)
           for p in sig.parameters.values()]
    if drop_self and out and out[0][0] in ("self", "cls"):
        out = out[1:]
    return out


def _stub_names(body) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names[t.id] = node
    return {k: v for k, v in names.items() if not k.startswith("_") or k == "__init__"}


def _public(mod) -> dict[str, object]:
    """The module's own public names: not imported modules, classes or functions."""
    out = {}
    for k, v in vars(mod).items():
        if k.startswith("_") or inspect.ismodule(v):
            continue
        if (inspect.isclass(v) or inspect.isroutine(v)) and v.__module__ != mod.__name__:
            continue
        out[k] = v
    return out


def _class_members(cls) -> dict[str, object]:
    return {k: v for k, v in vars(cls).items() if not k.startswith("_")}


def test_every_compiled_module_is_listed():
    assert MODULES, "no ext/<stage>/*.pyx found"
    built = {m for m in MODULES if importlib.util.find_spec(f"webtap._ext.{m}") is not None}
    assert built == set(MODULES), f"not built: {set(MODULES) - built}"


@pytest.mark.parametrize("name", MODULES)
def test_stub_matches_built_module(name):
    mod = importlib.import_module(f"webtap._ext.{name}")
    stub = _stub_names(_stub(name).body)
    real = _public(mod)
    assert set(stub) == set(real), (f"{name}.pyi: missing {sorted(set(real) - set(stub))}, "
                                    f"not in the module {sorted(set(stub) - set(real))}")
    problems = []
    for key, node in stub.items():
        obj = real[key]
        if isinstance(node, ast.FunctionDef):
            want = _real_params(obj, drop_self=False)
            if want is not None and _params(node.args, False) != want:
                problems.append(f"{key}{_params(node.args, False)} != built {want}")
        elif isinstance(node, ast.ClassDef):
            if not inspect.isclass(obj):
                problems.append(f"{key} is a class in the stub, not in the module")
                continue
            members = _stub_names(node.body)
            have = _class_members(obj)
            if issubclass(obj, BaseException):
                continue                    # an exception's members are BaseException's
            init = members.pop("__init__", None)
            if init is not None:
                # the constructor (a cdef class's __cinit__/__init__): the class's signature
                want = _real_params(obj, drop_self=False)
                got = _params(init.args, drop_self=True)
                if want is not None and got != want:
                    problems.append(f"{key}(){got} != built {want}")
            if set(members) != set(have):
                problems.append(f"{key}: stub members {sorted(set(members) - set(have))} not "
                                f"built, built members {sorted(set(have) - set(members))} not "
                                f"in the stub")
                continue
            for m, mnode in members.items():
                if not isinstance(mnode, ast.FunctionDef):
                    continue
                deco = {d.id for d in mnode.decorator_list if isinstance(d, ast.Name)}
                if "property" in deco:
                    continue
                attr = inspect.getattr_static(obj, m)
                drop = not isinstance(attr, staticmethod)
                fn = getattr(obj, m)
                want = _real_params(fn, drop_self=drop)
                got = _params(mnode.args, drop_self=drop)
                if isinstance(attr, classmethod) or inspect.ismethod(fn):
                    got = _params(mnode.args, drop_self=True)
                    want = _real_params(fn, drop_self=True)
                if want is not None and got != want:
                    problems.append(f"{key}.{m}{got} != built {want}")
    assert not problems, f"{name}.pyi:\n" + "\n".join(problems)
