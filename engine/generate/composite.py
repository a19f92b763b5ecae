"""The composite candidate: one standalone module whose ModelNew sends each call, by its input
shapes, to the member kernel that measured best at that shape (an exact-shape table, then the
nearest known shape by log-size distance, then the default: the best geometric mean).

The members' sources are merged with the ast only (nothing here runs them): each member's
top-level names get a per-member suffix, scope-aware, so that a kernel parameter or a local that
shares a global's name keeps its meaning; module-level imports are hoisted and shared. The
composite's ModelNew subclasses the default member's, so its parameters (and state_dict) are the
default's; the other members are held outside the module tree, built with the same constructor
arguments, and given the same weights when a state_dict that fits them is loaded.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass

from engine.jobs import source_sha256

ORIGIN = "composite"
# The names the composite itself defines at module level: members' names never take them.
RESERVED = frozenset(
    "ModelNew COMPOSITE_ROUTES composite_key composite_distance composite_member".split()
)


HEADER = "# A composite of per-shape winners: ModelNew sends each call, by its input shapes, to"
MEMBER_LINE = re.compile(r"^# member (\d+): \S+, sha256 ([0-9a-f]{64})$", re.MULTILINE)
ROUTE_LINE = re.compile(r"^    \(.*\): (\d+),  # ([^:\s]+)", re.MULTILINE)


class CompositeError(ValueError):
    """The members cannot be merged into one module (the message says why)."""


@dataclass(frozen=True)
class Member:
    id: str
    source: str


@dataclass(frozen=True)
class Route:
    """Calls whose inputs have `inputs` (a shape per tensor argument, None for any other
    argument) go to member `member`: it measured best at size `label`."""

    label: str
    inputs: tuple
    member: int
    note: str = ""


def input_key(spec: list) -> tuple:
    """A problem's input spec ([shape or None, ...]) as the key the composite computes."""
    return tuple(None if s is None else tuple(s) for s in spec)


def composite_source(members: list[Member], routes: list[Route]) -> str:
    """The composite module's source; members[0] is the default (the best geometric mean)."""
    if len(members) < 2:
        raise CompositeError("a composite needs at least two members")
    trees = []
    for m in members:
        try:
            trees.append(ast.parse(m.source))
        except SyntaxError as exc:
            raise CompositeError(f"{m.id} does not parse: {exc.msg}") from exc
    tag = _free_tag(trees)
    imports, bodies, signatures = _Imports(), [], []
    for i, (m, tree) in enumerate(zip(members, trees, strict=True)):
        body = [s for s in tree.body if not _is_docstring(s)]
        mapping = {name: f"{name}{tag}{i}" for name in _module_names(body)}
        mapping.update(imports.add(body, f"{tag}{i}"))
        body = [s for s in body if not isinstance(s, ast.Import | ast.ImportFrom)]
        _Renamer(mapping).module(body)
        classes = {s.name: s for s in body if isinstance(s, ast.ClassDef)}
        new = classes.get(mapping.get("ModelNew", ""))
        if new is None:
            raise CompositeError(f"{m.id} defines no top-level class ModelNew")
        signatures.append((new.name, _method_args(new, "__init__"), _method_args(new, "forward")))
        bodies.append((m, body))
    for name in ("math", "torch"):
        imports.require(name)
    parts = [
        HEADER,
        "# the member that measured best at that shape (exact shapes, then the nearest, then the",
        f"# default: {members[0].id}, the best geometric mean).",
        *imports.lines(),
    ]
    for i, (m, body) in enumerate(bodies):
        parts += ["", "", f"# member {i}: {m.id}, sha256 {source_sha256(m.source)}"]
        for stmt in body:
            spaced = isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            parts += ["", "", ast.unparse(stmt)] if spaced else [ast.unparse(stmt)]
    parts += ["", "", *_dispatch(routes, len(members)), "", "", *_model_new(signatures)]
    source = "\n".join(parts) + "\n"
    ast.parse(source)  # what we wrote must parse: anything else is a bug here
    return source


def _is_docstring(stmt) -> bool:
    value = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def _free_tag(trees) -> str:
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


def _same_scope(node):
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
                yield from _same_scope(child)
        return
    for child in ast.iter_child_nodes(node):
        yield from _same_scope(child)


def _import_binds(node) -> list[tuple[ast.alias, str]]:
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


def _bound(statements) -> set[str]:
    """Names that `statements` bind in their own scope."""
    names = set()
    for stmt in statements:
        for node in _same_scope(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names |= {name for _, name in _import_binds(node)}
    return names


def _module_names(body) -> set[str]:
    """A member's own top-level names (module-level imports are shared, not renamed; an import
    nested in a top-level `try` or `if` is the member's own)."""
    nested = [s for s in body if not isinstance(s, ast.Import | ast.ImportFrom)]
    return _bound(nested)


class _Imports:
    """Module-level imports of all members, one name a line, each name bound once."""

    def __init__(self):
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
                    raise CompositeError("a member imports *: its names cannot be merged")
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
                if name not in RESERVED and self.bound.get(name, binding) == binding:
                    self._keep(line, name, binding)
                    continue
                if name not in {n for _, n in _import_binds(one)}:
                    raise CompositeError(f"two members bind {name!r} to different modules")
                renames[name] = f"{name}{suffix}"
                alias = ast.alias(alias.name, renames[name])
                one.names = [alias]
                self._keep(ast.unparse(one), renames[name], ast.unparse(one))
        return renames

    def require(self, module: str) -> None:
        line = f"import {module}"
        if self.bound.get(module, line) != line:
            raise CompositeError(f"a member binds {module!r} to something else than the module")
        self._keep(line, module, line)

    def lines(self) -> list[str]:
        future = [line for line in self.order if line.startswith("from __future__")]
        return future + [line for line in self.order if line not in future]


def _function_scope(fn, outer: set[str]) -> set[str]:
    """The names a function's body sees as its own (shadowing the module's), given the names
    the enclosing scopes shadow."""
    a = fn.args
    params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    params |= {p.arg for p in (a.vararg, a.kwarg) if p}
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    globals_ = [node for s in body for node in _same_scope(s) if isinstance(node, ast.Global)]
    declared = {name for node in globals_ for name in node.names}
    return (outer | params | _bound(body)) - declared


class _Renamer:
    """Renames a member's module-level names wherever they mean the module-level binding."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def module(self, body) -> None:
        for stmt in body:
            for node in _same_scope(stmt):  # definitions and handlers bound at module level
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    node.name = self.mapping.get(node.name, node.name)
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    node.name = self.mapping.get(node.name, node.name)
                elif isinstance(node, ast.Import | ast.ImportFrom):
                    for alias, name in _import_binds(node):
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
            inside = shadow | _bound(node.body)
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
        inner = _function_scope(fn, set(enclosing))
        for stmt in fn.body if isinstance(fn.body, list) else [fn.body]:
            self.visit(stmt, inner)


def _method_args(cls: ast.ClassDef, name: str) -> ast.arguments:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return stmt.args
    if name == "__init__":
        return ast.arguments([], [ast.arg("self")], None, [], [], None, [])
    raise CompositeError(f"{cls.name} has no {name} method")


def _call(outer: ast.arguments, inner: ast.arguments) -> str:
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


def _positional(args: ast.arguments) -> str:
    """The tuple of a method's positional arguments (without `self`), as source."""
    items = [p.arg for p in [*args.posonlyargs, *args.args][1:]]
    items += [f"*{args.vararg.arg}"] if args.vararg else []
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _dispatch(routes: list[Route], members: int) -> list[str]:
    table = {}
    lines = ["# Input shapes of each target size -> the member that measured best there."]
    lines.append("COMPOSITE_ROUTES = {")
    for r in routes:
        if not 0 <= r.member < members:
            raise CompositeError(f"route {r.label} names member {r.member} of {members}")
        if r.inputs in table:
            continue  # two sizes with the same inputs: the first one's winner serves both
        table[r.inputs] = r.member
        lines.append(f"    {r.inputs!r}: {r.member},  # {r.label}{': ' if r.note else ''}{r.note}")
    lines += ["}", "", "", *DISPATCH_FUNCTIONS]
    return lines


DISPATCH_FUNCTIONS = '''\
def composite_key(args):
    """The shape of each tensor argument (None for any other argument)."""
    return tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args)


def composite_distance(key, known):
    """Log-size distance between two keys of the same structure; None when they differ."""
    if len(key) != len(known):
        return None
    total = 0.0
    for mine, theirs in zip(key, known):
        if mine is None or theirs is None:
            if mine is not theirs:
                return None
            continue
        if len(mine) != len(theirs):
            return None
        for a, b in zip(mine, theirs):
            total += abs(math.log(max(a, 1)) - math.log(max(b, 1)))
    return total


def composite_member(key):
    """The member for a call: the exact shape's winner, else the nearest known shape's, else
    the default (member 0)."""
    member = COMPOSITE_ROUTES.get(key)
    if member is not None:
        return member
    best, nearest = 0, None
    for known, candidate in COMPOSITE_ROUTES.items():
        distance = composite_distance(key, known)
        if distance is not None and (nearest is None or distance < nearest):
            best, nearest = candidate, distance
    return best'''.splitlines()


def _model_new(signatures) -> list[str]:
    (base, init, forward), others = signatures[0], signatures[1:]
    members = ", ".join(f"{name}({_call(init, i)})" for name, i, _ in others)
    own = ast.unparse(init)
    fwd = ast.unparse(forward)
    calls = []
    for k, (_, _, f) in enumerate(others, start=1):
        call = f"self.composite_members[{k - 1}]({_call(forward, f)})"
        calls += [f"        if member == {k}:", f"            return {call}"]
    return [
        f"class ModelNew({base}):",
        '    """Member 0 with its parameters registered (its state_dict is this module\'s); the',
        '    others are held outside the module tree and share the weights a load gives."""',
        "",
        f"    def __init__({own}):",
        f"        super().__init__({_call(init, init)})",
        f"        self.composite_members = ({members},)",
        "",
        f"    def forward({fwd}):",
        f"        member = composite_member(composite_key({_positional(forward)}))",
        *calls,
        f"        return super().forward({_call(forward, forward)})",
        "",
        "    def load_state_dict(self, state_dict, *args, **kwargs):",
        "        loaded = super().load_state_dict(state_dict, *args, **kwargs)",
        "        for other in self.composite_members:",
        "            mine = other.state_dict()",
        "            if mine.keys() == state_dict.keys() and all(",
        "                mine[k].shape == state_dict[k].shape for k in mine",
        "            ):",
        "                other.load_state_dict(state_dict, *args, **kwargs)",
        "        return loaded",
        "",
        "    def _apply(self, fn, *args, **kwargs):",
        "        for other in getattr(self, 'composite_members', ()):",
        "            other._apply(fn, *args, **kwargs)",
        "        return super()._apply(fn, *args, **kwargs)",
        "",
        "    def train(self, mode=True):",
        "        for other in getattr(self, 'composite_members', ()):",
        "            other.train(mode)",
        "        return super().train(mode)",
    ]


def routed_members(source: str) -> tuple[str, dict[str, str]] | None:
    """(the default member's sha256, {size label: its winner's sha256}) read back from a
    composite's source (the sim backend times a composite as its members); None for a source
    that is not a composite."""
    if not source.startswith(HEADER):
        return None
    shas = {int(i): sha for i, sha in MEMBER_LINE.findall(source)}
    routes = {label: shas[int(i)] for i, label in ROUTE_LINE.findall(source)}
    return shas[0], routes
