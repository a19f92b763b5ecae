"""The reference's dataflow: every operator call with the values it reads (forward arguments,
parameters, earlier results), so that families can recognise DAGs such as `0.5 * x * (1 +
tanh(...x...))` or `mean((a - b) ** 2)`, and turn their elementwise parts into Triton code."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from engine.problems.trace import canonical_op, describe_arg, is_reflected, writes_in_place
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
    writes: tuple = ()  # the leaves of the Model's state that forward writes in place

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
    """Records each call with its tensor operands tied to the values they came from, from the
    forward's `arguments` and the Model's `state` (parameters and buffers) on. A call that writes
    a tensor in place gives that tensor a new value; every other value in its storage (a view of
    it, or the tensor it views) goes stale. A write into the state (nn.BatchNorm counting its
    batches) is the Model's side effect, not a value of the forward: the state goes stale. A
    trace that reads a stale value, or writes by `x[i] = v`, is `unusable`: its graph would not
    say what the Model computes."""

    def __init__(self, arguments: list[torch.Tensor], state: list[torch.Tensor]):
        super().__init__()
        leaves = [*arguments, *state]
        self.known = {id(t): i for i, t in enumerate(leaves)}
        self.count = len(leaves)
        self.state = set(range(len(arguments), len(leaves)))
        self.writes: list[int] = []  # state written in place, in order
        self.nodes: list[Node] = []
        self.values = leaves  # every value's tensor, which also keeps ids from reuse
        self.stale: set[int] = set()
        self.unusable = False

    def describe(self, value):
        if isinstance(value, torch.Tensor):
            index = self.known.get(id(value))
            if index in self.stale:
                self.unusable = True
            return Ref(index) if index is not None else describe_arg(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.describe(v) for v in value)
        return describe_arg(value)

    def written(self, target: torch.Tensor, keep_own: bool) -> None:
        """`target` changed in place: the values sharing its storage are stale (its own too,
        unless the write records its new value)."""
        storage = target.untyped_storage()._cdata
        for index, value in enumerate(self.values):
            if value.untyped_storage()._cdata == storage and not (keep_own and value is target):
                self.stale.add(index)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        in_place = writes_in_place(func, args, kwargs, out)
        if in_place and out is None and args and isinstance(args[0], torch.Tensor):
            self.written(args[0], keep_own=False)  # `x[i] = v`: no value to record
            return out
        if id(out) in self.known and not in_place:  # `torch.max(x, 1)[0]`, `x.contiguous()`
            return out
        if in_place and self.known.get(id(out)) in self.state:
            self.writes.append(self.known[id(out)])
            self.written(out, keep_own=False)
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
            if in_place:
                self.written(result, keep_own=True)
            self.nodes.append(node)
            self.known[id(result)] = self.count + len(self.nodes) - 1
            self.values.append(result)
        return out


def trace_graph(problem, size=None) -> Graph | None:
    """The dataflow of Model.forward at `size` (default: the smallest), for a candidate that
    computes forward's output: None where `traced` finds none, or forward also writes into the
    Model's state (a side effect such a candidate would leave out)."""
    graph = traced(problem, size)
    return None if graph is None or graph.writes else graph


@memoized(at_size)
def traced(problem, size=None) -> Graph | None:
    """The dataflow of Model.forward at `size` (default: the smallest), on the meta device, with
    the state it writes; None where the Model does not run there, or writes in place what the
    graph cannot follow."""
    with on_meta(problem, size) as (_, model, inputs):
        names = list(inspect.signature(model.forward).parameters)
        if len(names) != len(inputs):
            return None
        arguments = [(n, t) for n, t in zip(names, inputs, strict=True)]
        arguments = [(n, t) for n, t in arguments if isinstance(t, torch.Tensor)]
        state = [(f"self.{n}", t) for n, t in [*model.named_parameters(), *model.named_buffers()]]
        leaves = arguments + state
        try:
            with DataflowRecorder([t for _, t in arguments], [t for _, t in state]) as recorder:
                out = model(*inputs)
        except RuntimeError:  # the Model cannot run at this size (a state sized for another)
            return None
    output = recorder.known.get(id(out)) if isinstance(out, torch.Tensor) else None
    if recorder.unusable or output in recorder.stale:
        return None
    return Graph(
        tuple((n, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for n, t in leaves),
        tuple(recorder.nodes),
        None if output is None else Ref(output),
        tuple(dict.fromkeys(leaves[i][0] for i in recorder.writes)),
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
