"""How a candidate's ModelNew mirrors the reference's Model: the same constructor (so the same
parameters, loadable by state_dict), the same forward signature, and for each traced operator
call, the Python expression (a forward argument or `self.<parameter>`) behind each tensor."""

from __future__ import annotations

import ast
import inspect
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass

from torch.overrides import TorchFunctionMode

from engine.problems.loader import import_module_from
from engine.problems.trace import LAYOUT_OPS, canonical_op, module_model_on_meta, on_meta_device
from engine.runner.calls import call_with_size
from hints.core.memo import at_size, memoized


@dataclass(frozen=True)
class Binding:
    init_source: str  # ModelNew.__init__, indented for a class body
    forward_params: str  # "self, x: torch.Tensor": Model.forward's parameter list
    operands: tuple  # per traced call (in order): per positional argument, an expression or None
    reads: frozenset = frozenset()  # the expressions that any traced call reads, keywords too


def method_source(source: str, class_name: str, method: str) -> ast.FunctionDef | None:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    return None


def constructor_source(source: str) -> str:
    """Model.__init__ verbatim (with `super(Model, self)` made `super()`), at class indentation."""
    node = method_source(source, "Model", "__init__")
    if node is None:
        return "    def __init__(self):\n        super().__init__()\n"
    start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    lines = source.splitlines()[start - 1 : node.end_lineno]
    text = textwrap.dedent("\n".join(lines)).replace("super(Model, self)", "super()")
    return textwrap.indent(text, "    ") + "\n"


# Views whose arguments name no sizes, so one expression serves every size of the ladder.
SIZE_FREE_VIEWS = frozenset(
    "t transpose permute unsqueeze squeeze flatten movedim contiguous".split()
)
SIZE_FREE_PROPERTIES = ("T", "mT")


def view_expression(func, args, kwargs, known: dict[int, str]) -> str | None:
    """`A.T`, `x.unsqueeze(1)`: a size-free view of a known tensor as forward's expression."""
    if not args or id(args[0]) not in known or kwargs:
        return None
    base, op = known[id(args[0])], canonical_op(func)
    if op == "get":  # a property: Tensor.T and Tensor.mT come as their descriptor's __get__
        name = getattr(getattr(func, "__self__", None), "__name__", None)
        return f"{base}.{name}" if name in SIZE_FREE_PROPERTIES else None
    if op not in SIZE_FREE_VIEWS or not all(isinstance(a, (int, tuple)) for a in args[1:]):
        return None
    if op == "squeeze" and len(args) == 1:
        return None  # squeeze(): which dims go depends on the size
    return f"{base}.{op}({', '.join(repr(a) for a in args[1:])})"


class OperandRecorder(TorchFunctionMode):
    """Records, per compute call, which known tensor (input, parameter, or a size-free view of
    one) each argument is."""

    def __init__(self, known: dict[int, str]):
        super().__init__()
        self.known = known
        self.operands: list[tuple] = []
        self.reads: set[str] = set()
        self.alive: list = []  # keeps views alive so that ids are never reused

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if canonical_op(func) not in LAYOUT_OPS:
            self.operands.append(tuple(self.known.get(id(a)) for a in args))
            values = [*args, *(kwargs or {}).values()]
            self.reads |= {self.known[id(a)] for a in values if id(a) in self.known}
        elif (expr := view_expression(func, args, kwargs, self.known)) is not None:
            self.known[id(out)] = expr
            self.alive.append(out)
        return out


@contextmanager
def on_meta(problem, size=None):
    """(the problem's module, its Model, its inputs) built on the meta device at `size` (default:
    the smallest), with the block run on the meta device too: no memory, shapes only."""
    module = import_module_from(problem.path, "problem")
    params = (size or problem.smallest).params
    model = module_model_on_meta(module, params)
    with on_meta_device():
        yield module, model, call_with_size(module.get_inputs, params)


@memoized(at_size)
def bind(problem) -> Binding | None:
    """Run the reference once on the meta device (smallest size) to tie traced tensors to names.

    None when the reference cannot be mirrored (no Model.forward source, or *args inputs)."""
    forward = method_source(problem.source, "Model", "forward")
    if forward is None or forward.args.vararg is not None:
        return None
    with on_meta(problem) as (_, model, inputs):
        names = list(inspect.signature(model.forward).parameters)
        known = {id(t): name for name, t in zip(names, inputs, strict=False)}
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            known[id(tensor)] = f"self.{name}"
        with OperandRecorder(known) as recorder:
            model(*inputs)
    return Binding(
        init_source=constructor_source(problem.source),
        forward_params=ast.unparse(forward.args),
        operands=tuple(recorder.operands),
        reads=frozenset(recorder.reads),
    )
