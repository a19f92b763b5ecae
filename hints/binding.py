"""How a candidate's ModelNew mirrors the reference's Model: the same constructor (so the same
parameters, loadable by state_dict), the same forward signature, and for each traced operator
call, the Python expression (a forward argument or `self.<parameter>`) behind each tensor."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from engine.problems.loader import import_module_from
from engine.problems.trace import LAYOUT_OPS, canonical_op
from engine.runner.calls import call_with_size


@dataclass(frozen=True)
class Binding:
    init_source: str  # ModelNew.__init__, indented for a class body
    forward_params: str  # "self, x: torch.Tensor": Model.forward's parameter list
    operands: tuple  # per traced call (in order): per positional argument, an expression or None


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


class OperandRecorder(TorchFunctionMode):
    """Records, per compute call, which known tensor (input or parameter) each argument is."""

    def __init__(self, known: dict[int, str]):
        super().__init__()
        self.known = known
        self.operands: list[tuple] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if canonical_op(func) not in LAYOUT_OPS:
            self.operands.append(tuple(self.known.get(id(a)) for a in args))
        return func(*args, **(kwargs or {}))


def bind(problem) -> Binding | None:
    """Run the reference once on the meta device (smallest size) to tie traced tensors to names.

    None when the reference cannot be mirrored (no Model.forward source, or *args inputs)."""
    forward = method_source(problem.source, "Model", "forward")
    if forward is None or forward.args.vararg is not None:
        return None
    module = import_module_from(problem.path, "binding")
    params = problem.smallest.params
    with torch.device("meta"):
        model = module.Model(*call_with_size(module.get_init_inputs, params))
        inputs = call_with_size(module.get_inputs, params)
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
    )
