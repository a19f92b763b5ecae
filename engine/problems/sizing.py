"""Tiny sizes for a KernelBench file without SIZES, so that Triton's interpreter can run it.

Such a file reads its sizes from module constants (`batch_size = 16`, `dim = 16384`, and tuples
of them such as `input_shape = (32768,)`) when
`get_inputs` and `get_init_inputs` run. The tiny size divides every constant of at least
`SCALABLE_MIN` by one power of two (small ones, which tend to be kernel sizes, strides or
dimension indices, stay), the most that leaves the inputs at least `MIN_ELEMENTS` elements and
the reference running for real on the cpu with a non-empty output.
"""

from __future__ import annotations

from types import ModuleType

import torch

from engine.problems.problem import Size
from engine.runner.calls import MODULE_GLOBALS, call_with_size

SCALABLE_MIN = 16  # smaller constants are left alone
SMALLEST_CONSTANT = 4  # a scaled constant never goes below this
MIN_ELEMENTS, MAX_ELEMENTS = 1024, 1 << 16  # input elements of a tiny size
FACTORS = tuple(2**k for k in range(14, 0, -1))  # tried from the biggest cut down


def scalable(value) -> bool:
    if type(value) is tuple:
        return all(type(v) is int for v in value) and any(v >= SCALABLE_MIN for v in value)
    return type(value) is int and value >= SCALABLE_MIN


def scaled(value, factor: int):
    """An int constant divided by `factor` (not below SMALLEST_CONSTANT); a tuple's big ones."""
    if type(value) is tuple:
        return tuple(scaled(v, factor) if v >= SCALABLE_MIN else v for v in value)
    return max(SMALLEST_CONSTANT, value // factor)


def scalable_constants(module: ModuleType) -> dict:
    return {
        name: value
        for name, value in vars(module).items()
        if scalable(value) and not name.startswith("_")
    }


def input_elements(module: ModuleType, params: dict) -> int:
    """Elements of the inputs `params` gives, counted on the meta device (nothing allocated)."""
    with torch.device("meta"):
        inputs = call_with_size(module.get_inputs, params)
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))


def runs_for_real(module: ModuleType, params: dict) -> bool:
    """Whether the reference runs on the cpu at `params` and gives a non-empty output."""
    try:
        torch.manual_seed(0)
        model = module.Model(*call_with_size(module.get_init_inputs, params))
        with torch.no_grad():
            out = model(*call_with_size(module.get_inputs, params))
    except Exception:
        return False
    outputs = out if isinstance(out, (tuple, list)) else [out]
    return all(isinstance(o, torch.Tensor) and o.numel() > 0 for o in outputs)


def derive_tiny(module: ModuleType) -> tuple[Size, str] | None:
    """The tiny size and what it changed ("batch_size 16 -> 2, dim 16384 -> 256"), or None when
    the file has no constants to scale or no scaled version runs. When no cut of every constant
    runs, one constant may keep its value (a channel count that a small group count divides)."""
    constants = scalable_constants(module)
    if not constants:
        return None
    for kept in [None, *constants]:
        for factor in FACTORS:
            values = {n: scaled(v, factor) for n, v in constants.items() if n != kept}
            params = {MODULE_GLOBALS: values}
            try:
                elements = input_elements(module, params)
            except Exception:
                continue
            if not MIN_ELEMENTS <= elements <= MAX_ELEMENTS or not runs_for_real(module, params):
                continue
            changes = ", ".join(f"{n} {constants[n]} -> {v}" for n, v in values.items())
            return Size("tiny", "tiny", params), changes
    return None
