"""The reference's forward as a chain of stages: its statements (nested calls hoisted into
statements of their own, so that one statement is about one operator call), cut into runs that
each read earlier values and leave one value for later ones, and each run posed as a problem of
its own (the reference file with that run as Model.forward) that the other families can match."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.problems.loader import load_problem
from engine.problems.trace import LAYOUT_OPS, OperatorRecorder
from hints.core.binding import method_source, on_meta
from hints.core.dataflow import ARITHMETIC, COMPARE, IDENTITY_OPS
from hints.core.expressions import UNARY

TEMP = "_kb_t"  # hoisted values: _kb_t0, _kb_t1, ...
# Calls whose values are sizes, never tensors: left where they are.
SIZE_CALLS = frozenset("size dim numel item stride".split())
# Calls that compute nothing (views, copies for layout): a run of them is a stage of its own that
# ModelNew.forward runs as it is.
VIEW_CALLS = frozenset(
    "view reshape flatten unflatten unsqueeze squeeze clone detach contiguous size dim".split()
)
# Syntax that computes where it reads a tensor: arithmetic, a comparison, `x += y`.
COMPUTING_NODES = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign)
# Operators that families fuse as elementwise neighbours of a main operator: a stage holds at
# most one statement calling anything else.
ELEMENTWISE_OPS = frozenset(
    {*UNARY, *ARITHMETIC, *COMPARE, *IDENTITY_OPS}
    | set(
        """rsub rdiv pow clamp clamp_min clamp_max hardtanh leaky_relu threshold elu celu selu
        softplus gelu where maximum minimum fmax fmin dropout""".split()
    )
)


@dataclass(frozen=True)
class Statement:
    node: ast.stmt
    reads: tuple[str, ...]  # names loaded, in order
    writes: tuple[str, ...]  # names bound


@dataclass(frozen=True)
class Segment:
    """Statements [start, stop) of the forward: the names they read from earlier statements or
    forward's arguments, and the one name later statements read from them (None when the
    segment ends with the return)."""

    start: int
    stop: int
    inputs: tuple[str, ...]
    output: str | None


class Hoister:
    """Rewrites a statement so that each nested operator call is a statement of its own."""

    def __init__(self, taken: set[str]):
        self.taken, self.count, self.hoisted = taken, 0, []

    def fresh(self) -> str:
        while f"{TEMP}{self.count}" in self.taken:
            self.count += 1
        name = f"{TEMP}{self.count}"
        self.taken.add(name)
        return name

    def hoist(self, expr: ast.expr) -> ast.expr:
        """`expr` as an operand: computed into a hoisted statement when it is a tensor call."""
        expr = self.inner(expr)
        if not isinstance(expr, ast.Call | ast.BinOp | ast.UnaryOp | ast.Subscript):
            return expr
        if not (self.computes(expr) or self.views_a_parameter(expr)):
            return expr
        name = self.fresh()
        self.hoisted.append(ast.Assign([ast.Name(name, ast.Store())], expr, lineno=0))
        return ast.Name(name, ast.Load())

    def inner(self, expr: ast.expr) -> ast.expr:
        """`expr` with its own operands hoisted (the value itself stays)."""
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in SIZE_CALLS:
                return expr
            if isinstance(expr.func, ast.Attribute):
                expr.func.value = self.hoist(expr.func.value)
            expr.args = [a if isinstance(a, ast.Starred) else self.hoist(a) for a in expr.args]
            for keyword in expr.keywords:
                keyword.value = self.hoist(keyword.value)
        elif isinstance(expr, ast.BinOp):
            expr.left, expr.right = self.hoist(expr.left), self.hoist(expr.right)
        elif isinstance(expr, ast.UnaryOp):
            expr.operand = self.hoist(expr.operand)
        elif isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Call):
            expr.value = self.inner(expr.value)  # `torch.max(x, 1)[0]`: one value
        return expr

    @staticmethod
    def views_a_parameter(expr: ast.expr) -> bool:
        """`self.bias.view(1, -1, 1, 1)`: a value of its own, which a run of views computes for
        the stage that reads it (families read parameters, not views of them)."""
        return (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in VIEW_CALLS - SIZE_CALLS
            and not Hoister.computes(expr)
        )

    @staticmethod
    def computes(expr: ast.expr) -> bool:
        """Whether `expr` may compute a tensor: it reads a name outside size calls."""
        if isinstance(expr, ast.Name):
            return expr.id != "self"
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if expr.func.attr in SIZE_CALLS:
                return False
        return any(Hoister.computes(child) for child in ast.iter_child_nodes(expr))


def flatten(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """Straight-line statements with nested calls hoisted; None for control flow."""
    taken = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name)}
    out = []
    for stmt in body:
        stmt = copy.deepcopy(stmt)
        hoister = Hoister(taken)
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Return):
            if stmt.value is not None:
                stmt.value = hoister.inner(stmt.value)
        elif not isinstance(stmt, ast.Expr):
            return None
        out += [*hoister.hoisted, stmt]
    if not out or not isinstance(out[-1], ast.Return) or out[-1].value is None:
        return None
    return out


def describe(stmt: ast.stmt) -> Statement:
    reads, writes = [], []
    value = stmt.value if hasattr(stmt, "value") else None
    targets = [] if isinstance(stmt, ast.Return | ast.Expr) else getattr(stmt, "targets", None)
    targets = targets if targets is not None else [stmt.target]
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        reads.append(stmt.target.id)
    for node in ast.walk(value) if value is not None else ():
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.append(node.id)
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                writes.append(node.id)
            elif isinstance(node, ast.Name):
                reads.append(node.id)
    return Statement(stmt, tuple(dict.fromkeys(reads)), tuple(writes))


def forward_statements(source: str) -> tuple[ast.arguments, list[Statement]] | None:
    """Model.forward's arguments and flattened statements; None when it is not straight-line
    code ending in a return."""
    forward = method_source(source, "Model", "forward")
    if forward is None or forward.args.vararg or forward.args.kwarg or forward.args.kwonlyargs:
        return None
    body = list(forward.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    flat = flatten(body)
    return None if flat is None else (forward.args, [describe(s) for s in flat])


def segment(statements: list[Statement], params: tuple, start: int, stop: int) -> Segment | None:
    """Statements [start, stop) as a segment; None when later statements read more than one
    of its values (or none of them), or when it ends before the return but holds it."""
    before = set(params) | {w for s in statements[:start] for w in s.writes}
    inputs, inside = [], set()
    for s in statements[start:stop]:
        inputs += [r for r in s.reads if r in before and r not in inside and r not in inputs]
        inside |= set(s.writes)
    inputs = [name for name in inputs if name != "self"]
    if stop == len(statements):
        return Segment(start, stop, tuple(inputs), None)
    live, shadowed = [], set()
    for s in statements[stop:]:
        live += [r for r in s.reads if r in inside and r not in shadowed and r not in live]
        shadowed |= set(s.writes)
    return Segment(start, stop, tuple(inputs), live[0]) if len(live) == 1 else None


def cut(count: int, recognise: Callable[[int, int], object]) -> list[tuple] | None:
    """The chain of stages over statements [0, count): from each start, the longest run that
    `recognise(start, stop)` answers (not None) for, as (start, stop, answer); None when some
    start has no run."""
    chain, start = [], 0
    while start < count:
        for stop in range(count, start, -1):
            answer = recognise(start, stop)
            if answer is not None:
                chain.append((start, stop, answer))
                start = stop
                break
        else:
            return None
    return chain


def is_view_only(statements: list[Statement]) -> bool:
    """Statements that only view or copy their operands (ModelNew.forward may run them): no
    call but a view's, and no arithmetic, comparison (`x[x < 0] = 0`) or `x += y` on tensors."""
    for s in statements:
        for node in ast.walk(s.node):
            if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Attribute) and node.func.attr in VIEW_CALLS
            ):
                return False
            if isinstance(node, COMPUTING_NODES) and Hoister.computes(node):
                return False
    return True


def statement_ops(problem, args: ast.arguments, statements: list[Statement]) -> list[list[str]]:
    """The operators each statement calls, running the reference's statements one at a time on
    the meta device at the smallest size."""
    ops = []
    with on_meta(problem) as (module, model, inputs):
        names = [a.arg for a in [*args.posonlyargs, *args.args]]
        scope = {**vars(module), **dict(zip(names, [model, *inputs], strict=True))}
        for s in statements:
            node = s.node
            if isinstance(node, ast.Return):
                node = ast.Assign([ast.Name("_kb_return", ast.Store())], node.value, lineno=0)
            code = compile(ast.fix_missing_locations(ast.Module([node], [])), "<stage>", "exec")
            with OperatorRecorder() as recorder:
                exec(code, scope)  # the reference's own statement, on meta tensors
            ops.append([c.op for c in recorder.calls if c.op not in LAYOUT_OPS])
    return ops


def is_main(ops: list[str]) -> bool:
    """Whether a statement calls an operator that is not an elementwise neighbour."""
    return any(op not in ELEMENTWISE_OPS for op in ops)


def stage_source(source: str, args: ast.arguments, statements: list, seg: Segment, sizes) -> str:
    """The reference file with statements `seg` as Model.forward, get_inputs giving the values
    they read (the earlier statements run on get_inputs' tensors), and the reference's sizes."""
    tree = ast.parse(source)
    self_name = (args.posonlyargs + args.args)[0].arg
    forward_args = [ast.arg(self_name), *(ast.arg(name) for name in seg.inputs)]
    body = [s.node for s in statements[seg.start : seg.stop]]
    if seg.output is not None:
        body.append(ast.Return(ast.Name(seg.output, ast.Load())))
    earlier = [s.node for s in statements[: seg.start]]
    earlier.append(ast.parse(f"return ({''.join(f'{n}, ' for n in seg.inputs)})").body[0])
    forward = ast.FunctionDef("forward", ast.arguments([], forward_args, None, [], [], None, []),
                              body, [], None, lineno=0)  # fmt: skip
    prefix = ast.FunctionDef("_kb_stage_inputs", copy.deepcopy(args), earlier, [], None, lineno=0)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            node.body = [s for s in node.body if getattr(s, "name", None) != "forward"]
            node.body += [forward, prefix]
        elif isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            node.name = "_kb_get_inputs"
    declared = {t: [s.params for s in sizes if s.tier == t] for t in ("tiny", "small", "full")}
    text = ast.unparse(ast.fix_missing_locations(tree))
    return text + STAGE_INPUTS.format(sizes={t: p for t, p in declared.items() if p})


STAGE_INPUTS = '''


from engine.runner.calls import call_with_size as _kb_call_with_size


def get_inputs(**size):
    """The values this stage reads: the reference's earlier statements on its inputs."""
    model = Model(*_kb_call_with_size(get_init_inputs, size))
    return list(model._kb_stage_inputs(*_kb_call_with_size(_kb_get_inputs, size)))


SIZES = {sizes!r}
'''


def stage_problem(problem, folder: Path, text: str, index: int):
    """The stage's problem file written in `folder` and loaded under the reference's policy."""
    path = folder / f"{problem.name}__stage{index}.py"
    path.write_text(text)
    return load_problem(str(path), problem.precision_policy)
