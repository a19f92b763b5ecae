"""The reference's dataflow: every operator call with the values it reads (forward arguments,
parameters, earlier results), so that families can recognise DAGs such as `0.5 * x * (1 +
tanh(...x...))` or `mean((a - b) ** 2)`, and turn their elementwise parts into Triton code."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from engine.problems.trace import canonical_op, describe_arg, is_reflected
from hints.core.binding import on_meta
from hints.core.expressions import Expr, binary, call, scalar, step
from hints.core.memo import at_size, memoized

# Calls that return their operand's values unchanged (same shape, fp32 math downstream).
IDENTITY_OPS = frozenset("contiguous clone detach float to".split())
# Dropout: the identity in eval mode, the mode the gate judges in (a random mask has no reference).
DROPOUT_OPS = frozenset("dropout dropout1d dropout2d dropout3d alpha_dropout".split())


@dataclass(frozen=True)
class Ref:
    """A traced value: a leaf (forward argument or parameter) or an earlier call's result."""

    index: int


@dataclass(frozen=True)
class Node:
    op: str
    args: tuple  # Ref for traced tensors, described values (trace.describe_arg) otherwise
    kwargs: dict
    shape: tuple
    dtype: str


@dataclass(frozen=True)
class Graph:
    leaves: tuple  # (expression in ModelNew.forward, shape, dtype); value i < len(leaves)
    nodes: tuple  # Node; value len(leaves) + i
    output: Ref | None  # the returned tensor, None when forward returns anything else

    def value(self, ref: Ref):
        """A leaf's (expression, shape, dtype), or a Node."""
        n = len(self.leaves)
        return self.leaves[ref.index] if ref.index < n else self.nodes[ref.index - n]

    def shape(self, ref: Ref) -> tuple:
        value = self.value(ref)
        return value.shape if isinstance(value, Node) else value[1]

    def dtype(self, ref: Ref) -> str:
        value = self.value(ref)
        return value.dtype if isinstance(value, Node) else value[2]

    def node(self, ref: Ref) -> Node | None:
        value = self.value(ref)
        return value if isinstance(value, Node) else None


class DataflowRecorder(TorchFunctionMode):
    """Records each call with its tensor operands tied to the values they came from."""

    def __init__(self, known: dict[int, int], count: int):
        super().__init__()
        self.known, self.count = known, count
        self.nodes: list[Node] = []
        self.alive: list = []  # keeps results alive so that ids are never reused

    def describe(self, value):
        if isinstance(value, torch.Tensor):
            index = self.known.get(id(value))
            return Ref(index) if index is not None else describe_arg(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.describe(v) for v in value)
        return describe_arg(value)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if id(out) in self.known:  # `torch.max(x, 1)[0]`: the values, already recorded
            return out
        operands = (args[1], args[0], *args[2:]) if is_reflected(func) else tuple(args)
        result = out[0] if isinstance(out, tuple) and out else out  # (values, indices)
        if isinstance(result, torch.Tensor):
            node = Node(
                canonical_op(func),
                self.describe(operands),
                {k: self.describe(v) for k, v in kwargs.items()},
                tuple(result.shape),
                str(result.dtype).removeprefix("torch."),
            )
            self.nodes.append(node)
            self.known[id(result)] = self.count + len(self.nodes) - 1
            self.alive.append(out)
        return out


@memoized(at_size)
def trace_graph(problem, size=None) -> Graph | None:
    """The dataflow of Model.forward at `size` (default: the smallest), on the meta device; None
    where the Model does not run there."""
    with on_meta(problem, size) as (_, model, inputs):
        names = list(inspect.signature(model.forward).parameters)
        if len(names) != len(inputs):
            return None
        leaves = [(n, t) for n, t in zip(names, inputs, strict=True)]
        leaves += [(f"self.{n}", t) for n, t in [*model.named_parameters(), *model.named_buffers()]]
        leaves = [(n, t) for n, t in leaves if isinstance(t, torch.Tensor)]
        known = {id(t): i for i, (_, t) in enumerate(leaves)}
        try:
            with DataflowRecorder(known, len(leaves)) as recorder:
                out = model(*inputs)
        except RuntimeError:  # the Model cannot run at this size (a state sized for another)
            return None
    output = known.get(id(out)) if isinstance(out, torch.Tensor) else None
    return Graph(
        tuple((n, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for n, t in leaves),
        tuple(recorder.nodes),
        None if output is None else Ref(output),
    )


COMPARE = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}
ARITHMETIC = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def as_float(var: str, graph: Graph, ref: Ref, kinds: dict) -> str:
    """A value as an fp32 operand: booleans (comparisons, bool inputs) become 0.0 or 1.0."""
    return f"tl.where({var}, 1.0, 0.0)" if kinds.get(ref.index) == "bool" else var


def translate(node: Node, graph: Graph, names: dict, kinds: dict) -> tuple[str, str] | None:
    """(Triton expression, kind) of one elementwise call on named values; None otherwise."""
    if node.op == "tensor" and len(node.args) == 1 and scalar(node.args[0]) is not None:
        return scalar(node.args[0]), "float"  # `torch.tensor(0.5)`: a constant
    refs = [a for a in node.args if isinstance(a, Ref)]
    if any(isinstance(v, Ref) for v in node.kwargs.values()) or not refs:
        return None
    if any(r.index not in names for r in refs):
        return None
    operand = {r.index: Expr(as_float(names[r.index], graph, r, kinds), atom=True) for r in refs}
    if node.op in IDENTITY_OPS and len(node.args) == 1:
        return names[refs[0].index], kinds.get(refs[0].index, "float")
    if node.op in DROPOUT_OPS and node.args[0] == refs[0] and len(refs) == 1:
        return names[refs[0].index], kinds.get(refs[0].index, "float")
    if node.op == "where" and len(node.args) == 3 and isinstance(node.args[0], Ref):
        branches = [operand[a.index] if isinstance(a, Ref) else scalar(a) for a in node.args[1:]]
        if None in branches:
            return None
        return call("tl.where", names[node.args[0].index], *branches).text, "float"
    if len(refs) == 1:
        position = node.args.index(refs[0])
        others = tuple(a for i, a in enumerate(node.args) if i != position)
        if node.op in COMPARE and len(others) == 1 and scalar(others[0]) is not None:
            left, right = operand[refs[0].index], scalar(others[0])
            left, right = (left, right) if position == 0 else (right, left)
            return f"{left} {COMPARE[node.op]} {right}", "bool"
        expr = step(node.op, operand[refs[0].index], others, dict(node.kwargs), position == 0)
        return (expr.text, "float") if expr is not None else None
    if len(node.args) != 2 or len(refs) != 2:
        return None
    left, right = operand[node.args[0].index], operand[node.args[1].index]
    if node.op in COMPARE:
        return f"{left} {COMPARE[node.op]} {right}", "bool"
    if node.op in ("maximum", "minimum", "fmax", "fmin", "max", "min"):
        name = "tl.maximum" if "max" in node.op else "tl.minimum"
        return call(name, left, right).text, "float"
    if node.op not in ARITHMETIC or node.kwargs.get("rounding_mode") is not None:
        return None
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        if node.op not in ("add", "sub") or scalar(alpha) is None:
            return None
        right = binary(right, "*", scalar(alpha))
    return binary(left, ARITHMETIC[node.op], right).text, "float"


def elementwise_statements(
    graph: Graph, targets: list, names: dict, kinds: dict | None = None, indent: str = "    "
) -> tuple[str, list[str], dict] | None:
    """Statements that compute `targets` from the named values (value index -> variable;
    `kinds` marks boolean ones) with elementwise calls only: (code, a variable per target,
    kinds); None when another kind of call is needed."""
    names, kinds, lines, needed = dict(names), dict(kinds or {}), [], set()
    for target in targets:
        found = reachable(graph, target, set(names))
        if found is None:
            return None
        needed |= found
    for index in sorted(needed):
        node = graph.value(Ref(index))
        translated = translate(node, graph, names, kinds)
        if translated is None:
            return None
        names[index], kinds[index] = f"v{index}", translated[1]
        lines.append(f"{indent}v{index} = {translated[0]}")
    return "\n".join(lines), [names[t.index] for t in targets], kinds


def elementwise_code(
    graph: Graph, target: Ref, names: dict, kinds: dict | None = None, indent: str = "    "
) -> str | None:
    """elementwise_statements for one float target, ending in `y = ...`."""
    found = elementwise_statements(graph, [target], names, kinds, indent)
    if found is None or found[2].get(target.index) == "bool":
        return None  # a boolean result: not a float output
    code, (var,), _ = found
    return "\n".join(line for line in (code, f"{indent}y = {var}") if line)


def reachable(graph: Graph, target: Ref, stop: set) -> set | None:
    """Node values between `stop` and `target`; None when a path reaches an unnamed leaf."""
    seen, todo = set(), [target.index]
    while todo:
        index = todo.pop()
        if index in stop or index in seen:
            continue
        node = graph.node(Ref(index))
        if node is None:
            return None
        seen.add(index)
        refs = [a for a in node.args if isinstance(a, Ref)]
        todo += [r.index for r in refs]
    return seen


def leaves_of(graph: Graph, target: Ref) -> list[int] | None:
    """The leaf values `target` depends on, in order; None when a leaf is not a tensor."""
    needed = reachable(graph, target, set(range(len(graph.leaves))))
    if needed is None:
        return None
    found = {
        a.index
        for i in needed
        for a in graph.value(Ref(i)).args
        if isinstance(a, Ref) and a.index < len(graph.leaves)
    }
    if target.index < len(graph.leaves):
        found.add(target.index)
    return sorted(found)
