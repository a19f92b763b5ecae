"""The whole-model family's rewrite of a problem file's own code (hints.model): its classes,
constants and helpers kept; every nn module the kernel library has as `Kb<Name>` built as that;
in the code that forward reaches, every torch computation a call of the library's `kb_<op>`
(operators and comparisons too, `x[i] = v` through kb_setitem, `x[idx]` through kb_getitem),
layout calls left as they are; then conv, batch norm, residual and activation chains fused
(hints/model_kernels/fusion.py)."""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from engine.gate.static import ALLOWED_IMPORTS
from engine.problems.trace import LAYOUT_OPS, canonical_op
from hints.model_kernels.common import KB_FUSED_ACTIVATIONS, KB_FUSED_LINEAR

# What the candidate's header binds: a problem's imports of these resolve to them.
HEADER_NAMES = {"torch": "torch", "nn": "torch.nn", "math": "math"}
# Entries of the trace's layout list that copy in aten: their launchers compute.
COPYING_LAYOUT_OPS = frozenset({"cat", "stack"})
# Views, allocations and casts that the trace's list leaves out.
MORE_LAYOUT_OPS = frozenset(
    "view_as reshape_as movedim moveaxis swapaxes swapdims split_with_sizes new_empty "
    "new_tensor type_as squeeze_ unsqueeze_".split()
)
# Tensor methods that view (the functions of the same name compute: F.unfold is im2col).
VIEW_METHODS = frozenset({"unfold"})
# Canonical names of Python's operators whose launcher takes torch's name.
LAUNCHER_NAMES = {
    "mod": "remainder",
    "rmod": "remainder",
    "rfloordiv": "floordiv",
    "and": "bitwise_and",
    "rand": "bitwise_and",
    "or": "bitwise_or",
    "ror": "bitwise_or",
    "xor": "bitwise_xor",
    "rxor": "bitwise_xor",
    "invert": "bitwise_not",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
    "clip": "clamp",
}
BINARY = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "remainder", ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "bitwise_and",
    ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor", ast.LShift: "bitwise_left_shift",
    ast.RShift: "bitwise_right_shift",
}  # fmt: skip
OPERATOR_SIGNS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.LShift: "<<", ast.RShift: ">>",
}  # fmt: skip
UNARY = {ast.USub: "neg", ast.Invert: "bitwise_not"}
COMPARE = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
# Calls whose value is a Python number whatever their arguments: operators on them stay Python's.
SCALAR_FUNCTIONS = frozenset({"int", "float", "len", "round"})
SCALAR_METHODS = frozenset({"size", "dim", "numel", "stride", "element_size", "ndimension"})
SCALAR_ATTRIBUTES = frozenset({"ndim", "shape"})
# The third-party function a launcher stands in for (einops is no candidate's import).
THIRD_PARTY_LAUNCHERS = {"einops.rearrange": "kb_rearrange"}


def computes(op: str, method: bool = False) -> bool:
    """Whether torch operator `op` computes values (a launcher stands in for it) rather than
    viewing, allocating or describing; `method`: called as a Tensor method."""
    if op in COPYING_LAYOUT_OPS:
        return True
    if op in LAYOUT_OPS or op in MORE_LAYOUT_OPS:
        return False
    return not (method and op in VIEW_METHODS)


def launcher(op: str) -> str:
    """The library name standing in for canonical torch operator `op`."""
    return "kb_" + LAUNCHER_NAMES.get(op, op)


@functools.cache
def torch_object(path: str):
    """The object a dotted path from `torch` names, or None."""
    found = torch
    for part in path.split(".")[1:]:
        found = getattr(found, part, None)
        if found is None:
            return None
    return found


def is_function(obj) -> bool:
    return callable(obj) and not isinstance(obj, type)


def torch_function_op(path: str | None) -> str | None:
    """The canonical op of the torch function a resolved path names (`torch.tanh`, `F.relu`),
    or None."""
    obj = torch_object(path) if path and path.startswith("torch.") else None
    return canonical_op(obj) if is_function(obj) else None


def is_module_class(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, torch.nn.Module)


def dotted(node) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else [*base, node.attr]
    return None


def expression(path: str) -> ast.expr:
    """`torch.nn.functional.pad` as an expression through the header's names."""
    if path.startswith("torch.nn.") or path == "torch.nn":
        path = "nn" + path.removeprefix("torch.nn")
    parts = path.split(".")
    node: ast.expr = ast.Name(parts[0], ast.Load())
    for part in parts[1:]:
        node = ast.Attribute(node, part, ast.Load())
    return node


def call(name: str, args: list, keywords: list | None = None) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), list(args), keywords or [])


def index_expression(node) -> ast.expr:
    """A subscript's index as a value: `x[1:, ...]` -> `(slice(1, None, None), ...)`."""
    if isinstance(node, ast.Slice):
        parts = [p if p is not None else ast.Constant(None) for p in (node.lower, node.upper,
                                                                       node.step)]  # fmt: skip
        return call("slice", parts)
    if isinstance(node, ast.Tuple):
        return ast.Tuple([index_expression(e) for e in node.elts], ast.Load())
    return node


@dataclass
class Use:
    """A library name the rewrite calls, and where (for a refusal that names it)."""

    name: str
    what: str  # the torch code it stands in for: `torch.fft.fft`, `+`, `nn.GRU`
    line: int
    function: str


@dataclass
class Rewrite:
    text: str
    uses: list[Use] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)  # what no candidate can run, and where


class Imports:
    """The problem's imports: each bound name's dotted path, and the lines a candidate keeps
    (modules the gate allows beyond the header's)."""

    def __init__(self, tree: ast.Module):
        self.paths: dict[str, str] = {}
        self.kept: list[str] = []
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                for a in stmt.names:
                    self.bind(a.asname or a.name.split(".")[0], a.name if a.asname else
                              a.name.split(".")[0], ast.Import([a]))  # fmt: skip
            elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0:
                for a in stmt.names:
                    one = ast.ImportFrom(stmt.module, [a], 0)
                    self.bind(a.asname or a.name, f"{stmt.module}.{a.name}", one)

    def bind(self, name: str, path: str, node) -> None:
        self.paths[name] = path
        root = path.split(".")[0]
        header = HEADER_NAMES.get(name) == path
        if not header and root in ALLOWED_IMPORTS and root not in ("torch", "math"):
            self.kept.append(ast.unparse(node))

    def resolve(self, node) -> str | None:
        parts = dotted(node)
        if not parts or parts[0] not in self.paths:
            return None
        return ".".join([self.paths[parts[0]], *parts[1:]])


def called_names(fn) -> set[str]:
    """Names and attribute names a function's body mentions (what it may call)."""
    found = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found


def forward_reached(tree: ast.Module) -> list[tuple[ast.FunctionDef, str]]:
    """(function, qualified name) of the functions and methods that a `forward` may run (by
    name, over-approximated), never `__init__`: the code whose torch calls become launches. Code
    that only construction runs (weight initialisation) keeps torch."""
    functions: dict[str, list] = {}
    for stmt in tree.body:
        members = stmt.body if isinstance(stmt, ast.ClassDef) else [stmt]
        prefix = f"{stmt.name}." if isinstance(stmt, ast.ClassDef) else ""
        for fn in members:
            if isinstance(fn, ast.FunctionDef) and fn.name != "__init__":
                functions.setdefault(fn.name, []).append((fn, prefix + fn.name))
    todo = list(functions.get("forward", []))
    reached: dict[int, tuple] = {}
    while todo:
        fn, qualname = todo.pop()
        if id(fn) in reached:
            continue
        reached[id(fn)] = (fn, qualname)
        for name in called_names(fn) & functions.keys():
            todo += functions[name]
    return list(reached.values())


class Launches(ast.NodeTransformer):
    """Torch computations of forward's code as launcher calls."""

    def __init__(self, imports: Imports, rewrite: Rewrite, submodules: frozenset[str]):
        self.imports, self.rewrite, self.submodules = imports, rewrite, submodules
        self.function = ""

    def use(self, name: str, what: str, node) -> str:
        self.rewrite.uses.append(Use(name, what, getattr(node, "lineno", 0), self.function))
        return name

    def visit_Call(self, node):
        self.generic_visit(node)
        path = self.imports.resolve(node.func)
        if path is not None:
            return self.function_call(node, path)
        if isinstance(node.func, ast.Attribute) and self.is_tensor_receiver(node.func.value):
            return self.method_call(node)
        return node

    def function_call(self, node, path: str):
        if path in THIRD_PARTY_LAUNCHERS:
            name = self.use(THIRD_PARTY_LAUNCHERS[path], path, node)
            return ast.copy_location(call(name, node.args, node.keywords), node)
        op = torch_function_op(path)
        if op is None or not computes(op):
            return node
        name = self.use(launcher(op), path, node)
        launch = ast.copy_location(call(name, node.args, node.keywords), node)
        in_place = path.endswith("_") and node.args and "inplace" not in path
        return self.into(node.args[0], launch) if in_place else launch

    def method_call(self, node):
        method = node.func.attr
        obj = getattr(torch.Tensor, method, None)
        if not is_function(obj) or method.startswith("__"):
            return node
        op = canonical_op(obj)
        if not computes(op, method=True):
            return node
        receiver = node.func.value
        name = self.use(launcher(op), f".{method}()", node)
        launch = ast.copy_location(call(name, [receiver, *node.args], node.keywords), node)
        return self.into(receiver, launch) if method.endswith("_") else launch

    @staticmethod
    def into(target, value) -> ast.Call:
        """`target.copy_(value)`: an in-place operator's result written where it belongs."""
        return ast.Call(ast.Attribute(target, "copy_", ast.Load()), [value], [])

    def is_tensor_receiver(self, node) -> bool:
        """Whether `node.<method>(...)` may be a Tensor method: not an import, not the module
        itself, not one of its submodules, not `super()`."""
        if self.imports.resolve(node) is not None:
            return False
        if isinstance(node, ast.Name) and node.id == "self":
            return False
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "super":
            return False
        parts = dotted(node)
        return not (
            parts and len(parts) == 2 and parts[0] == "self" and parts[1] in self.submodules
        )

    def visit_BinOp(self, node):
        self.generic_visit(node)
        return self.binary(node)

    def visit_Subscript(self, node):
        """`x[index]` read with an index that may hold a tensor (`table[idx]`) as kb_getitem; ints,
        slices, None and Ellipsis stay views."""
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load) or is_basic_index(node.slice):
            return node
        name = self.use("kb_getitem", "x[index]", node)
        return ast.copy_location(call(name, [node.value, index_expression(node.slice)]), node)

    def binary(self, node):
        if is_scalar(node.left) and is_scalar(node.right):
            return node
        name = self.use("kb_" + BINARY[type(node.op)], OPERATOR_SIGNS[type(node.op)], node)
        return ast.copy_location(call(name, [node.left, node.right]), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if type(node.op) not in UNARY or is_scalar(node.operand):
            return node
        name = self.use("kb_" + UNARY[type(node.op)], "unary operator", node)
        return ast.copy_location(call(name, [node.operand]), node)

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) != 1 or type(node.ops[0]) not in COMPARE:
            return node
        if is_scalar(node.left) and is_scalar(node.comparators[0]):
            return node
        name = self.use("kb_" + COMPARE[type(node.ops[0])], "comparison", node)
        return ast.copy_location(call(name, [node.left, node.comparators[0]]), node)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        target = node.target
        read = ast.fix_missing_locations(ast.copy_location(_load(target), target))
        value = self.binary(ast.copy_location(ast.BinOp(read, node.op, node.value), node))
        return self.store(target, value, node)

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            return self.store(node.targets[0], node.value, node)
        return node

    def store(self, target, value, node):
        if isinstance(target, ast.Subscript):
            name = self.use("kb_setitem", "x[...] = v", node)
            index = index_expression(target.slice)
            launch = call(name, [_load(target.value), index, value])
            return ast.copy_location(ast.Expr(launch), node)
        return ast.copy_location(ast.Assign([target], value), node)

    def launch(self, fn, qualname: str) -> None:
        """Rewrite one function of the problem in place."""
        self.function = qualname
        fn.body = [self.visit(stmt) for stmt in fn.body]


def _load(target):
    """An assignment target as an expression that reads it."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(node, target)


def is_basic_index(node) -> bool:
    """Whether a subscript's index is surely ints, slices, None or Ellipsis (a view)."""
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return all(
        isinstance(item, ast.Slice | ast.Constant)
        or (isinstance(item, ast.UnaryOp) and isinstance(item.operand, ast.Constant))
        for item in items
    )


def is_scalar(node) -> bool:
    """Whether an expression is surely a Python number (constants, shapes, math of them)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return is_scalar(node.operand)
    if isinstance(node, ast.BinOp):
        return is_scalar(node.left) and is_scalar(node.right)
    if isinstance(node, ast.Subscript):
        return (
            isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape"
            or (isinstance(node.value, ast.Call) and is_scalar(node.value))
        )
    if isinstance(node, ast.Attribute):
        return node.attr in SCALAR_ATTRIBUTES - {"shape"}
    if isinstance(node, ast.Call):
        parts = dotted(node.func) or []
        if parts[:1] == ["math"] or (len(parts) == 1 and parts[0] in SCALAR_FUNCTIONS):
            return True
        return isinstance(node.func, ast.Attribute) and node.func.attr in SCALAR_METHODS
    return False


class References(ast.NodeTransformer):
    """Names through the problem's imports, anywhere: nn classes the library has become `Kb`
    classes, torch functions passed as values become launchers, other torch and math paths are
    spelled through the header's names; what no candidate can import is reported."""

    def __init__(self, imports: Imports, library: frozenset[str], rewrite: Rewrite):
        self.imports, self.library, self.rewrite = imports, library, rewrite
        self.called: set[int] = set()

    def visit_Call(self, node):
        self.called.add(id(node.func))
        return self.generic_visit(node)

    def visit_Name(self, node):
        return self.reference(node)

    def visit_Attribute(self, node):
        if self.imports.resolve(node) is None:
            return self.generic_visit(node)
        return self.reference(node)

    def reference(self, node):
        path = self.imports.resolve(node)
        if path is None:
            return node
        root = path.split(".")[0]
        if root == "torch":
            return ast.copy_location(self.torch_reference(node, path), node)
        if root == "math":
            return ast.copy_location(expression(path), node)
        if root == "numpy" and path.count(".") == 1 and hasattr(math, path.split(".")[1]):
            return ast.copy_location(expression(path.replace("numpy", "math", 1)), node)
        if root not in ALLOWED_IMPORTS:
            self.rewrite.unsupported.append(
                f"`{ast.unparse(node)}` at line {node.lineno}: a candidate cannot import {root}"
            )
        return node

    def torch_reference(self, node, path: str) -> ast.expr:
        obj = torch_object(path)
        if is_module_class(obj) and f"Kb{obj.__name__}" in self.library:
            name = f"Kb{obj.__name__}"
            self.rewrite.uses.append(Use(name, path, node.lineno, ""))
            return ast.Name(name, ast.Load())
        if id(node) not in self.called and is_function(obj) and computes(canonical_op(obj)):
            name = launcher(canonical_op(obj))
            self.rewrite.uses.append(Use(name, path, node.lineno, ""))
            return ast.Name(name, ast.Load())
        return expression(path)


DROPPED_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})


def kept_statements(tree: ast.Module) -> list:
    """The problem's classes, helpers and constants: no imports, inputs, docstrings or
    `if __name__ == "__main__"` blocks."""
    kept = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Expr | ast.If):
            continue
        if isinstance(stmt, ast.FunctionDef) and stmt.name in DROPPED_FUNCTIONS:
            continue
        kept.append(stmt)
    return kept


def rewrite(source: str, library: frozenset[str], submodules: frozenset[str] = frozenset(),
            fuse=None) -> Rewrite:  # fmt: skip
    """The problem's own code as candidate code calling the library (`library`: its public
    names); `submodules`: attribute names that hold modules (never tensors) on the problem's
    classes; `fuse`: a pass over forward's functions run before the launches (fusion)."""
    tree = ast.parse(source)
    imports = Imports(tree)
    result = Rewrite("")
    tree.body = kept_statements(tree)
    launches = Launches(imports, result, submodules)
    for fn, qualname in forward_reached(tree):
        if fuse is not None:
            fuse(fn, qualname, imports)
        launches.launch(fn, qualname)
    tree = References(imports, library, result).visit(tree)
    ast.fix_missing_locations(tree)
    lines = [*dict.fromkeys(imports.kept)]
    result.text = "\n".join([*lines, *(["", ""] if lines else []), ast.unparse(tree)]) + "\n"
    return result


# ----------------------------------------------------------------------------- fusion

# Module classes a fused chain is made of, by torch's class name.
CONV_MODULES = frozenset({"Conv1d", "Conv2d", "Conv3d"})
BATCH_NORM_MODULES = frozenset({"BatchNorm1d", "BatchNorm2d", "BatchNorm3d"})
# nn activation classes a fused epilogue applies -> the op it names them by.
CONV_ACTIVATIONS = {
    cls.__name__: op
    for cls in (nn.ReLU, nn.ReLU6, nn.Sigmoid, nn.SiLU, nn.GELU, nn.Tanh)
    if (op := cls.__name__.lower()) in KB_FUSED_ACTIVATIONS
}
LINEAR_ACTIVATIONS = frozenset(KB_FUSED_LINEAR)
# What the fusions call (hints/model_kernels/fusion.py): without them in the library, nothing is
# fused.
FUSION_NEEDS = frozenset({"kb_model_conv", "kb_model_linear", "KbSequential"})
# The order a fused convolution applies its steps in (kb_conv_fused's epilogue).
CONV_ORDER = ("conv", "bn", "add", "act")


def fusable_pairs(kinds: list[str]) -> bool:
    """Whether a Sequential of these module classes has a run that fuses."""
    for first, second in zip(kinds, kinds[1:], strict=False):
        if first in CONV_MODULES and (second in BATCH_NORM_MODULES or second in CONV_ACTIVATIONS):
            return True
        if first == "Linear" and CONV_ACTIVATIONS.get(second) in LINEAR_ACTIVATIONS:
            return True
    return False


@dataclass
class Step:
    """One step of a chain read from an expression: its kind, what it needs, and how to put
    the part of the expression around it back (`wrap(inner)`)."""

    kind: str  # conv, bn, add, act, linear
    value: ast.expr | None  # the module (conv, bn, linear, act module), the residual, the launcher
    wrap: object


class Fusion:
    """The fusing pass over forward's functions (hints.model_source.rewrite's `fuse`): chains of
    a convolution, its batch norm, a residual add and an activation (or a linear layer and an
    activation), within one expression or over consecutive statements, become one launch."""

    def __init__(self, submodules: dict, library: frozenset[str]):
        self.submodules = submodules  # the problem's class -> attribute -> module class
        self.enabled = FUSION_NEEDS <= library
        self.launchers: set[str] = set()  # library names the fused calls use or pass on

    def attributes(self, qualname: str) -> dict:
        """The module class of each attribute of the class whose method `qualname` is."""
        return self.submodules.get(qualname.split(".")[0], {}) if "." in qualname else {}

    def fuse(self, fn, qualname: str, imports: Imports) -> None:
        if not self.enabled:
            return
        attrs = self.attributes(qualname)
        for node in ast.walk(fn):
            for field_name in ("body", "orelse", "finalbody"):
                block = getattr(node, field_name, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    setattr(node, field_name, self.block(block, attrs, imports))
        Chains(self, attrs, imports).visit(fn)

    def step(self, node, attrs: dict, imports: Imports) -> tuple[Step, ast.expr] | None:
        """The outermost step of an expression and the expression it applies to."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return Step("add", node.right, lambda e: ast.BinOp(e, ast.Add(), node.right)), node.left
        if not (isinstance(node, ast.Call) and len(node.args) == 1):
            return None
        inner = node.args[0]
        parts = dotted(node.func) or []
        if len(parts) == 2 and parts[0] == "self" and not node.keywords:
            kind = attrs.get(parts[1])
            found = ("conv" if kind in CONV_MODULES else "bn" if kind in BATCH_NORM_MODULES
                     else "act" if kind in CONV_ACTIVATIONS else "linear" if kind == "Linear"
                     else None)  # fmt: skip
            if found is None:
                return None
            return Step(found, node.func, lambda e: ast.Call(node.func, [e], [])), inner
        op = torch_function_op(imports.resolve(node.func))
        if op in CONV_ACTIVATIONS.values() and all(k.arg == "inplace" for k in node.keywords):
            wrap = lambda e: ast.Call(node.func, [e], node.keywords)  # noqa: E731
            self.launchers.add(launcher(op))
            return Step("act", ast.Name(launcher(op), ast.Load()), wrap), inner
        return None

    def steps(self, expr, attrs, imports) -> tuple[ast.expr, list[Step]]:
        """(the chain's input, its steps innermost first)."""
        found = []
        while (peeled := self.step(expr, attrs, imports)) is not None:
            step, expr = peeled
            found.append(step)
        return expr, found[::-1]

    def launch(self, base, steps: list[Step]) -> ast.expr:
        """The chain as launches: each run of steps that fuses (a convolution and what follows
        it in kb_conv_fused's order, a linear layer and its activation) as one, the others as
        they were."""
        k = 0
        while k < len(steps):
            n = fused_length(steps[k:])
            if n < 2:
                base, k = steps[k].wrap(base), k + 1
                continue
            run, k = steps[k : k + n], k + n
            if run[0].kind == "linear":
                base = self.calling("kb_model_linear", [base, run[0].value, run[1].value])
                continue
            parts = {step.kind: step.value for step in run}
            base = self.calling("kb_model_conv", [base, *(parts.get(p, ast.Constant(None))
                                                         for p in CONV_ORDER)])  # fmt: skip
        return base

    def calling(self, name: str, args: list) -> ast.Call:
        self.launchers.add(name)
        return call(name, args)

    def block(self, stmts: list, attrs: dict, imports: Imports) -> list:
        """A statement list with its chains fused, within a statement and over consecutive ones
        (statements that a chain skips over, which neither read nor write what the chain does,
        run before it)."""
        out, k = [], 0
        while k < len(stmts):
            target, expr = assigned(stmts[k])
            if target is None:
                out.append(stmts[k])
                k += 1
                continue
            base, steps = self.steps(expr, attrs, imports)
            taken, skipped, last = [stmts[k]], [], k
            for j in range(k + 1, len(stmts)):
                following, value = assigned(stmts[j])
                extra = self.continues(value, target, attrs, imports) if following else None
                if extra and joins(steps, extra) and not read_later(stmts[j + 1 :], target,
                                                                     following):  # fmt: skip
                    steps, target, last = steps + extra, following, j
                    taken.append(stmts[j])
                elif movable(stmts[j], taken):
                    skipped.append(j)
                else:
                    break
            if last == k:  # a chain within one statement: the expression pass fuses it
                out.append(stmts[k])
                k += 1
                continue
            out += [stmts[j] for j in skipped if j < last]
            fused = self.launch(base, steps)
            out.append(ast.copy_location(ast.Assign([ast.Name(target, ast.Store())], fused),
                                         stmts[k]))  # fmt: skip
            k = last + 1
        return out

    def continues(self, value, name: str, attrs, imports) -> list[Step] | None:
        """The steps `value` applies to `name` (read once, as the chain's input), or None."""
        if value is None:
            return None
        base, steps = self.steps(value, attrs, imports)
        if not (steps and isinstance(base, ast.Name) and base.id == name):
            return None
        others = [n for s in steps if s.value is not None for n in ast.walk(s.value)]
        if any(isinstance(n, ast.Name) and n.id == name for n in others):
            return None
        return steps


class Chains(ast.NodeTransformer):
    """Chains within one expression (`F.relu(self.bn(self.conv(x)))`) fused, outermost first."""

    def __init__(self, fusion: Fusion, attrs: dict, imports: Imports):
        self.fusion, self.attrs, self.imports = fusion, attrs, imports

    def visit_Call(self, node):
        return self.chain(node)

    def visit_BinOp(self, node):
        return self.chain(node)

    def chain(self, node):
        base, steps = self.fusion.steps(node, self.attrs, self.imports)
        if not any(fused_length(steps[k:]) >= 2 for k in range(len(steps))):
            return self.generic_visit(node)
        return ast.copy_location(self.fusion.launch(self.visit(base), steps), node)


def fused_length(steps: list[Step]) -> int:
    """How many leading steps fuse into one launch (0 or 1: none)."""
    kinds = [s.kind for s in steps]
    if kinds[:2] == ["linear", "act"]:
        return 2
    if kinds[:1] != ["conv"]:
        return 0
    n, at = 1, 0
    while n < len(kinds) and kinds[n] in CONV_ORDER[at + 1 :]:
        at, n = CONV_ORDER.index(kinds[n]), n + 1
    return n


def joins(steps: list[Step], extra: list[Step]) -> bool:
    """Whether `extra` extends the chain's last fusing run (so merging statements pays)."""
    start = 0
    while start < len(steps):
        n = fused_length(steps[start:])
        if start + max(n, 1) >= len(steps):
            return n >= 1 and fused_length(steps[start:] + extra) == len(steps) - start + len(extra)
        start += max(n, 1)
    return False


def assigned(stmt) -> tuple[str | None, ast.expr | None]:
    """(name, value) of `name = value` or `name += value` (as `name + value`)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        if isinstance(stmt.targets[0], ast.Name):
            return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        if isinstance(stmt.op, ast.Add):
            return stmt.target.id, ast.BinOp(ast.Name(stmt.target.id, ast.Load()), ast.Add(),
                                             stmt.value)  # fmt: skip
    return None, None


def names_in(stmts) -> tuple[set[str], set[str]]:
    """(names read, names written) by statements."""
    read, written = set(), set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name):
                (written if isinstance(node.ctx, ast.Store) else read).add(node.id)
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            read.add(stmt.target.id)
    return read, written


def movable(stmt, chain: list) -> bool:
    """Whether `stmt` may run before the chain's statements: it neither reads nor writes what
    they write, nor writes what they read; plain statements only."""
    if isinstance(stmt, ast.Return | ast.FunctionDef | ast.ClassDef | ast.Break | ast.Continue):
        return False
    read, written = names_in([stmt])
    chain_read, chain_written = names_in(chain)
    return not ((read | written) & chain_written or written & chain_read)


def read_later(stmts, name: str, rebound: str) -> bool:
    """Whether `name`, an intermediate of the chain, is read after the chain (other than being
    rebound first, or being the chain's own result)."""
    if name == rebound:
        return False
    for stmt in stmts:
        read, written = names_in([stmt])
        if name in read:
            return True
        if name in written:
            return False
    return False
