"""Which PyTorch operators a reference computes with, found by running it on the meta device."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
from torch.overrides import TorchFunctionMode

from engine.runner.calls import built_on_meta, call_with_size

# Operators that only describe, view or allocate tensors: never "the operator being replaced".
LAYOUT_OPS = frozenset(
    """
    view reshape contiguous permute transpose t unsqueeze squeeze expand expand_as flatten
    unflatten size dim numel stride is_contiguous data_ptr element_size to cpu cuda float half
    double type device dtype shape empty empty_like empty_strided new_empty zeros zeros_like
    ones ones_like full full_like new_zeros new_ones new_full tensor as_tensor clone copy
    detach requires_grad get set item tolist is_floating_point narrow select getitem setitem
    len iter bool int chunk split unbind cat stack arange randn rand manual_seed as_strided
    fill zero storage_offset untyped_storage layout is_cuda ndim nbytes itemsize
    """.split()
)

# Functions that draw random numbers: a Model that calls one (an LSTM's initial state from
# torch.randn in forward) gives another output on every call unless each call starts from one seed
# (engine.runner.calls.DRAW_SEED).
RANDOM_OPS = frozenset("rand randn randint randperm rand_like randn_like randint_like".split())

# Tensor methods that view; the functions of the same name compute (F.unfold is im2col).
VIEW_METHODS = frozenset({torch.Tensor.unfold})

# Names that compute the same thing: calling any member replaces the whole class.
EQUIVALENT_OPS = (
    frozenset("matmul mm bmm mv addmm addmv baddbmm linear einsum tensordot dot inner".split()),
    frozenset("softmax log_softmax softmin".split()),
    frozenset(
        """conv1d conv2d conv3d convolution conv_transpose1d conv_transpose2d
        conv_transpose3d""".split()
    ),
    frozenset("scaled_dot_product_attention multi_head_attention_forward".split()),
    frozenset("relu threshold clamp_min hardtanh".split()),
    frozenset("rms_norm layer_norm group_norm batch_norm instance_norm norm".split()),
)

DUNDER_OPS = {
    "add": "add",
    "radd": "add",
    "sub": "sub",
    "rsub": "sub",
    "mul": "mul",
    "rmul": "mul",
    "truediv": "div",
    "rtruediv": "div",
    "div": "div",
    "rdiv": "div",
    "pow": "pow",
    "rpow": "pow",
    "matmul": "matmul",
    "rmatmul": "matmul",
    "neg": "neg",
}
# torch's other names for one operator (`torch.multiply` is `torch.mul`).
ALIASES = {
    "multiply": "mul",
    "subtract": "sub",
    "divide": "div",
    "true_divide": "div",
    "clip": "clamp",
    "negative": "neg",
    "absolute": "abs",
}


def canonical_op(func) -> str:
    """`torch.softmax`, `Tensor.softmax`, `F.softmax`, `Tensor.__truediv__`, `torch.multiply` -> a
    bare op name."""
    name = getattr(func, "__name__", None) or str(func)
    if name.startswith("__") and name.endswith("__"):
        inner = name.strip("_")
        if inner.startswith("i") and inner[1:] in DUNDER_OPS:
            inner = inner[1:]
        return DUNDER_OPS.get(inner, inner)
    name = name.lstrip("_")
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return ALIASES.get(name, name)


def writes_in_place(func, args: tuple, kwargs: dict, out) -> bool:
    """Whether a call changed a tensor it was given: by its name (`x.relu_()`, `x += y`,
    `x[i] = v`), by `inplace=True` or `out=`, or by returning a tensor argument that it computed
    on (`F.hardtanh(x, -1.0, 1.0, True)`, nn.Hardtanh's in-place call) rather than viewed."""
    name = getattr(func, "__name__", None) or ""
    if name.startswith("__") and name.endswith("__"):
        inner = name.strip("_")
        return inner == "setitem" or inner.startswith("i") and inner[1:] in DUNDER_OPS
    if name.endswith("_") or kwargs.get("inplace") is True or kwargs.get("out") is not None:
        return True
    op = canonical_op(func)
    returned_argument = any(out is a for a in args)
    return returned_argument and op not in LAYOUT_OPS and "dropout" not in op  # eval: unchanged


def is_reflected(func) -> bool:
    """`Tensor.__rsub__(x, 2.0)` computes `2.0 - x`: its operands come in swapped order."""
    name = getattr(func, "__name__", "")
    return name.startswith("__r") and name.endswith("__") and name[3:-2] in DUNDER_OPS


def expand_equivalents(ops) -> frozenset[str]:
    """Add every operator that computes the same thing as one in `ops`."""
    out = set(ops)
    for group in EQUIVALENT_OPS:
        if out & group:
            out |= group
    return frozenset(out)


@dataclass(frozen=True)
class OpCall:
    """One compute operator call: tensors as ("tensor", shape, dtype), other arguments as is."""

    op: str
    args: tuple
    kwargs: dict


def describe_arg(value):
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype).removeprefix("torch."))
    if isinstance(value, (list, tuple)):
        return type(value)(describe_arg(v) for v in value)
    if isinstance(value, (int, float, bool, str, type(None))):
        return value
    return repr(value)


class OperatorRecorder(TorchFunctionMode):
    """Records every compute operator called while active, in call order, and the random
    draws."""

    def __init__(self):
        super().__init__()
        self.calls: list[OpCall] = []
        self.draws: list[str] = []

    @property
    def ops(self) -> list[str]:
        """Distinct operator names, in order of first call."""
        return list(dict.fromkeys(call.op for call in self.calls))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = canonical_op(func)
        if op in RANDOM_OPS:
            self.draws.append(op)
        if op not in LAYOUT_OPS and func not in VIEW_METHODS:
            # Operands in the order of the math they compute: `2.0 - x` is sub(2.0, x).
            operands = (args[1], args[0], *args[2:]) if is_reflected(func) else tuple(args)
            self.calls.append(
                OpCall(op, describe_arg(operands), {k: describe_arg(v) for k, v in kwargs.items()})
            )
        return func(*args, **kwargs)


def recurrence_outputs(kind: str, args: tuple, kwargs: dict) -> tuple | None:
    """torch.lstm's (output, h, c), torch.gru's and torch.rnn_*'s (output, h) as empty tensors
    of their shapes, for the padded-input form nn.LSTM, nn.GRU and nn.RNN call. None for a packed
    sequence's data, or an input whose width is not the first layer's."""
    lstm = kind == "lstm"
    padded = isinstance(args[1], (list, tuple)) if lstm else isinstance(args[2], (list, tuple))
    if not padded or len(args) != 9 or kwargs:
        return None
    input, state, params, bidirectional = args[0], args[1], args[2], args[7]
    if not params or input.shape[-1] != params[0].shape[-1]:
        return None
    states = tuple(state) if lstm else (state,)
    width = (2 if bidirectional else 1) * states[0].shape[-1]
    return (input.new_empty((*input.shape[:-1], width)), *(s.new_empty(s.shape) for s in states))


def batch_norm_output(args: tuple, kwargs: dict):
    """torch.batch_norm's and F.batch_norm's output as an empty tensor like the input. None where
    a statistic or an affine parameter does not match the input's channels, or where training
    sees one value per channel."""
    input = args[0]
    given = [a for a in (*args[1:5], *kwargs.values()) if isinstance(a, torch.Tensor)]
    training = kwargs.get("training", args[5] if len(args) > 5 else False)
    if input.dim() < 2 or any(t.shape != (input.shape[1],) for t in given):
        return None
    if training and input.numel() == input.shape[1]:
        return None
    return torch.empty_like(input)


# Operators whose meta run PyTorch decomposes in Python (a 6-layer LSTM over 512 steps: 15 s a
# call; a batch norm 17 ms, DenseNet121 calls it 120 times a forward): their outputs by shape.
# Where a shape rule returns None, PyTorch's own run goes ahead and says what does not fit.
BY_SHAPE = {
    torch.lstm: partial(recurrence_outputs, "lstm"),
    torch.gru: partial(recurrence_outputs, "gru"),
    torch.rnn_tanh: partial(recurrence_outputs, "rnn"),
    torch.rnn_relu: partial(recurrence_outputs, "rnn"),
    torch.batch_norm: batch_norm_output,
    torch.nn.functional.batch_norm: batch_norm_output,
}


class MetaShapes(TorchFunctionMode):
    """On meta tensors, the operators of BY_SHAPE return empty outputs of their shapes at once."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        outputs = BY_SHAPE.get(func)
        kwargs = kwargs or {}
        if outputs is not None and args and getattr(args[0], "is_meta", False):
            found = outputs(args, kwargs)
            if found is not None:
                return found
        return func(*args, **kwargs)


@contextmanager
def on_meta_device():
    """torch.device("meta") as the default device, with BY_SHAPE's operators run by shape."""
    with torch.device("meta"), MetaShapes():
        yield


def model_on_meta(model_cls, init_inputs):
    """The model built on the meta device (engine.runner.calls.built_on_meta)."""
    return built_on_meta(lambda: model_cls(*init_inputs()), on_meta_device)


def module_model_on_meta(module, params: dict):
    """A problem module's Model at size `params` (its get_init_inputs), by model_on_meta."""
    return model_on_meta(module.Model, lambda: call_with_size(module.get_init_inputs, params))


def trace_on_meta(model_cls, init_inputs_fn, inputs_fn, params: dict):
    """Run the reference on meta tensors: no memory, no compute. Returns (the recorder,
    outputs, inputs)."""
    model = model_on_meta(model_cls, lambda: init_inputs_fn(**params))
    with on_meta_device():
        inputs = inputs_fn(**params)
        with OperatorRecorder() as recorder:
            out = model(*inputs)
    return recorder, out, inputs
