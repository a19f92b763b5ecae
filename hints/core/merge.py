"""Merging candidate modules into one with the ast only (nothing here runs them): each member's
top-level names get a per-member suffix, scope-aware, so that a kernel parameter or a local that
shares a global's name keeps its meaning; module-level imports are hoisted and shared. The
composite of per-shape winners (engine.generate.composite) and the staged family (hints.staged)
build their modules this way."""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass

from engine.errors import KernelBrainError


class MergeError(KernelBrainError, ValueError):
    """The members cannot be merged into one module (the message says why)."""


@dataclass(frozen=True)
class Merged:
    """The members' bodies, renamed apart, with the imports they share."""

    imports: Imports
    bodies: list  # per member, its statements (imports hoisted into `imports`)
    classes: list  # per member, its ModelNew class (renamed) within its body


def merge_modules(members: list[tuple[str, str]], reserved: frozenset = frozenset()) -> Merged:
    """Members given as (id, source): parsed, docstrings dropped, imports shared, top-level
    names suffixed apart; `reserved` are names the merged module defines itself."""
    trees = []
    for ident, source in members:
        try:
            trees.append(ast.parse(source))
        except SyntaxError as exc:
            raise MergeError(f"{ident} does not parse: {exc.msg}") from exc
    tag = free_tag(trees)
    imports, bodies, classes = Imports(reserved), [], []
    for i, ((ident, _), tree) in enumerate(zip(members, trees, strict=True)):
        body = [s for s in tree.body if not is_docstring(s)]
        mapping = {name: f"{name}{tag}{i}" for name in module_names(body)}
        mapping.update(imports.add(body, f"{tag}{i}"))
        body = [s for s in body if not isinstance(s, ast.Import | ast.ImportFrom)]
        Renamer(mapping).module(body)
        found = {s.name: s for s in body if isinstance(s, ast.ClassDef)}
        new = found.get(mapping.get("ModelNew", ""))
        if new is None:
            raise MergeError(f"{ident} defines no top-level class ModelNew")
        bodies.append(body)
        classes.append(new)
    return Merged(imports, bodies, classes)


def body_lines(body) -> list[str]:
    """A member's statements as source lines, definitions two blank lines apart."""
    parts = []
    for stmt in body:
        spaced = isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        parts += ["", "", ast.unparse(stmt)] if spaced else [ast.unparse(stmt)]
    return parts


def is_docstring(stmt) -> bool:
    value = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def free_tag(trees) -> str:
    """A suffix no identifier of any member ends with a digit after: renamed names are new."""
    seen = set()
    for tree in trees:
        for node in ast.walk(tree):
            for attr in ("id", "name", "attr", "arg", "asname"):
                value = getattr(node, attr, None)
                if isinstance(value, str):
                    seen.add(value)
    for n in itertools.count(1):
        tag = "_" * n + "kb"
        if not any(tag in name for name in seen):
            return tag
    raise AssertionError("unreachable")


SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def same_scope(node):
    """`node` and the nodes of its scope: a nested function, lambda, class or comprehension is
    yielded (its name binds here, its decorators and bases run here) but not entered."""
    yield node
    if isinstance(node, SCOPES):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            outer = [
                *node.decorator_list,
                *getattr(node, "bases", []),
                *getattr(node, "keywords", []),
            ]
            for child in outer:
                yield from same_scope(child)
        return
    for child in ast.iter_child_nodes(node):
        yield from same_scope(child)


def import_binds(node) -> list[tuple[ast.alias, str]]:
    """(alias, name it binds) for the names of an import that a rename can rebind: not the
    root of a plain dotted import (`import a.b` binds `a`, which no alias can)."""
    out = []
    for alias in node.names:
        if alias.asname:
            out.append((alias, alias.asname))
        elif isinstance(node, ast.ImportFrom):
            out.append((alias, alias.name))
        elif "." not in alias.name:
            out.append((alias, alias.name))
    return out


def bound(statements) -> set[str]:
    """Names that `statements` bind in their own scope."""
    names = set()
    for stmt in statements:
        for node in same_scope(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names |= {name for _, name in import_binds(node)}
    return names


def module_names(body) -> set[str]:
    """A member's own top-level names (module-level imports are shared, not renamed; an import
    nested in a top-level `try` or `if` is the member's own)."""
    nested = [s for s in body if not isinstance(s, ast.Import | ast.ImportFrom)]
    return bound(nested)


class Imports:
    """Module-level imports of all members, one name a line, each name bound once."""

    def __init__(self, reserved: frozenset = frozenset()):
        self.reserved = reserved  # names the merged module defines itself: members' never take them
        self.bound: dict[str, str] = {}  # name -> what binds it ("import torch" for torch.nn)
        self.order: list[str] = []  # the import lines, first seen first

    def _keep(self, line: str, name: str, binding: str) -> None:
        if line not in self.order:
            self.order.append(line)
        self.bound.setdefault(name, binding)

    def add(self, body, suffix: str) -> dict[str, str]:
        """Take the module-level imports of one member; returns the renames its imports need
        (a name that another member's import binds to something else, or one of ours)."""
        renames = {}
        for stmt in body:
            if not isinstance(stmt, ast.Import | ast.ImportFrom):
                continue
            for alias in stmt.names:
                if alias.name == "*":
                    raise MergeError("a member imports *: its names cannot be merged")
                one = (
                    ast.Import([alias])
                    if isinstance(stmt, ast.Import)
                    else ast.ImportFrom(stmt.module, [alias], stmt.level)
                )
                line = ast.unparse(one)
                if isinstance(stmt, ast.Import) and not alias.asname:
                    name = alias.name.split(".")[0]
                    binding = f"import {name}"  # `import a.b` binds `a` as `import a` does
                else:
                    name, binding = alias.asname or alias.name, line
                if name not in self.reserved and self.bound.get(name, binding) == binding:
                    self._keep(line, name, binding)
                    continue
                if name not in {n for _, n in import_binds(one)}:
                    raise MergeError(f"two members bind {name!r} to different modules")
                renames[name] = f"{name}{suffix}"
                alias = ast.alias(alias.name, renames[name])
                one.names = [alias]
                self._keep(ast.unparse(one), renames[name], ast.unparse(one))
        return renames

    def require(self, module: str) -> None:
        line = f"import {module}"
        if self.bound.get(module, line) != line:
            raise MergeError(f"a member binds {module!r} to something else than the module")
        self._keep(line, module, line)

    def lines(self) -> list[str]:
        future = [line for line in self.order if line.startswith("from __future__")]
        return future + [line for line in self.order if line not in future]


def function_scope(fn, outer: set[str]) -> set[str]:
    """The names a function's body sees as its own (shadowing the module's), given the names
    the enclosing scopes shadow."""
    a = fn.args
    params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    params |= {p.arg for p in (a.vararg, a.kwarg) if p}
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    globals_ = [node for s in body for node in same_scope(s) if isinstance(node, ast.Global)]
    declared = {name for node in globals_ for name in node.names}
    return (outer | params | bound(body)) - declared


class Renamer:
    """Renames a member's module-level names wherever they mean the module-level binding."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def module(self, body) -> None:
        for stmt in body:
            for node in same_scope(stmt):  # definitions and handlers bound at module level
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    node.name = self.mapping.get(node.name, node.name)
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    node.name = self.mapping.get(node.name, node.name)
                elif isinstance(node, ast.Import | ast.ImportFrom):
                    for alias, name in import_binds(node):
                        if name in self.mapping:
                            alias.asname = self.mapping[name]
            self.visit(stmt, frozenset())

    def visit(self, node, shadow) -> None:
        if isinstance(node, ast.Name):
            if node.id not in shadow:
                node.id = self.mapping.get(node.id, node.id)
        elif isinstance(node, ast.Global):
            node.names = [self.mapping.get(n, n) for n in node.names]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            self.function(node, shadow, shadow)
        elif isinstance(node, ast.ClassDef):
            for outer in [*node.decorator_list, *node.bases, *node.keywords]:
                self.visit(outer, shadow)
            inside = shadow | bound(node.body)
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.function(stmt, inside, shadow)  # methods do not see the class's names
                else:
                    self.visit(stmt, inside)
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            names = [n for g in node.generators for n in ast.walk(g.target)]
            targets = {n.id for n in names if isinstance(n, ast.Name)}
            for child in ast.iter_child_nodes(node):
                self.visit(child, shadow | targets)
        else:
            for child in ast.iter_child_nodes(node):
                self.visit(child, shadow)

    def function(self, fn, around, enclosing) -> None:
        """Decorators, defaults and annotations in the scope around the definition; the body in
        its own scope, nested in `enclosing` (a method's is the module's, not the class's)."""
        a = fn.args
        outer = [*getattr(fn, "decorator_list", []), *a.defaults]
        outer += [d for d in a.kw_defaults if d is not None]
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
        outer += [p.annotation for p in params if p.annotation is not None]
        if getattr(fn, "returns", None) is not None:
            outer.append(fn.returns)
        for node in outer:
            self.visit(node, around)
        inner = function_scope(fn, set(enclosing))
        for stmt in fn.body if isinstance(fn.body, list) else [fn.body]:
            self.visit(stmt, inner)


def method_args(cls: ast.ClassDef, name: str) -> ast.arguments:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return stmt.args
    if name == "__init__":
        return ast.arguments([], [ast.arg("self")], None, [], [], None, [])
    raise MergeError(f"{cls.name} has no {name} method")


def call_arguments(outer: ast.arguments, inner: ast.arguments) -> str:
    """The arguments with which a method taking `outer` passes its own on to one taking
    `inner` (both without their `self`)."""
    mine = [p.arg for p in [*outer.posonlyargs, *outer.args][1:]]
    theirs = [*inner.posonlyargs, *inner.args][1:]
    parts = mine if inner.vararg else mine[: len(theirs)]
    if outer.vararg and inner.vararg:
        parts = [*parts, f"*{outer.vararg.arg}"]
    kwonly = {p.arg for p in inner.kwonlyargs}
    parts += [f"{p.arg}={p.arg}" for p in outer.kwonlyargs if p.arg in kwonly or inner.kwarg]
    if outer.kwarg and inner.kwarg:
        parts.append(f"**{outer.kwarg.arg}")
    return ", ".join(parts)
