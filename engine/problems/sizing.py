"""Tiny sizes for a KernelBench file without SIZES, so that Triton's interpreter can run it.

Such a file reads its sizes from module constants (`batch_size = 16`, `dim = 16384`, and tuples
or lists of them such as `input_shape = (32768,)` and `hidden_layer_sizes = [32768, 32768]`)
when `get_inputs` and `get_init_inputs` run. The tiny size divides every constant of at least
`SCALABLE_MIN` by one power of two (small ones, which tend to be kernel sizes, strides or
dimension indices, stay), the most that leaves the inputs at least `MIN_ELEMENTS` elements and
the reference running for real on the cpu with a non-empty output. Where no cut of the
constants does, sizes written inline in get_inputs (engine.problems.literal_sizes) are cut too.
Where nothing fits (a classifier sized for 224x224 images runs at no smaller image), the file's
own sizes with a batch of SMALLEST_BATCH are the tiny size, however many elements they hold.
"""

from __future__ import annotations

from types import ModuleType

import torch

from engine.problems.literal_sizes import PREFIX
from engine.problems.problem import Size
from engine.problems.trace import module_model_on_meta, on_meta_device
from engine.runner.calls import MODULE_GLOBALS, call_with_size

SCALABLE_MIN = 16  # smaller constants are left alone
SMALLEST_CONSTANT = 4  # a scaled constant never goes below this
MIN_ELEMENTS, MAX_ELEMENTS = 1024, 1 << 16  # input elements of a tiny size
FACTORS = tuple(2**k for k in range(14, 0, -1))  # tried from the biggest cut down
SMALLEST_BATCH = 2


def scalable(value) -> bool:
    if type(value) in (tuple, list):
        return all(type(v) is int for v in value) and any(v >= SCALABLE_MIN for v in value)
    return type(value) is int and value >= SCALABLE_MIN


def scaled(value, factor: int):
    """An int constant divided by `factor` (not below SMALLEST_CONSTANT); a tuple's or a list's
    big ones."""
    if type(value) in (tuple, list):
        return type(value)(scaled(v, factor) if v >= SCALABLE_MIN else v for v in value)
    return max(SMALLEST_CONSTANT, value // factor)


def scalable_constants(module: ModuleType, literal_sizes: bool) -> dict:
    """The module's own constants, with or without get_inputs' literal sizes."""
    return {
        name: value
        for name, value in vars(module).items()
        if scalable(value) and not name.startswith("_") and literal_sizes == name.startswith(PREFIX)
    }


def describe(name: str) -> str:
    return f"get_inputs' literal #{name.removeprefix(PREFIX)}" if name.startswith(PREFIX) else name


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


def runs_on_meta(module: ModuleType, params: dict) -> bool:
    """Whether the reference's shapes work out at `params` (nothing computed or allocated)."""
    try:
        model = module_model_on_meta(module, params)
        with on_meta_device():
            model(*call_with_size(module.get_inputs, params))
    except Exception:
        return False
    return True


def derive_tiny(module: ModuleType) -> tuple[Size, str] | None:
    """The tiny size and what it changed ("batch_size 16 -> 2, dim 16384 -> 256"), or None when
    the file has no constants to scale or no scaled version runs. When no cut of every constant
    runs, one constant may keep its value (a channel count that a small group count divides);
    when none of those runs either (a pooling chain wants spatial sizes that the batch's cut
    would take), the largest constant is halved, one at a time, while the shapes work out."""
    constants = scalable_constants(module, literal_sizes=False)
    values = uniform_cut(module, constants) if constants else None
    if values is None:  # sizes written into get_inputs too: scale them with the constants
        both = constants | scalable_constants(module, literal_sizes=True)
        values = (uniform_cut(module, both) or halving_cut(module, both)) if both else None
    if values is None:
        values = batch_cut(module, constants)
    if values is None:
        return None
    changes = ", ".join(f"{describe(n)} {getattr(module, n)} -> {v}" for n, v in values.items())
    return Size("tiny", "tiny", {MODULE_GLOBALS: values}), changes


def fits(module: ModuleType, values: dict) -> bool:
    try:
        elements = input_elements(module, {MODULE_GLOBALS: values})
    except Exception:
        return False
    params = {MODULE_GLOBALS: values}  # the shapes first, on meta: a full init costs seconds
    return (
        MIN_ELEMENTS <= elements <= MAX_ELEMENTS
        and runs_on_meta(module, params)
        and runs_for_real(module, params)
    )


def uniform_cut(module: ModuleType, constants: dict) -> dict | None:
    """The biggest cut by one factor of `constants` (all, or all but one) that fits and runs."""
    for kept in [None, *constants]:
        for factor in FACTORS:
            values = {n: scaled(v, factor) for n, v in constants.items() if n != kept}
            if fits(module, values):
                return values
    return None


def largest(value) -> int:
    return max(value) if type(value) in (tuple, list) else value


def halved(module: ModuleType, values: dict) -> dict | None:
    """`values` with the largest constant halved (the next largest where the shapes do not work
    out or the inputs would drop below MIN_ELEMENTS); None when none can be."""
    for name in sorted(values, key=lambda n: -largest(values[n])):
        trial = {**values, name: scaled(values[name], 2)}
        if trial[name] == values[name] or not runs_on_meta(module, {MODULE_GLOBALS: trial}):
            continue
        if input_elements(module, {MODULE_GLOBALS: trial}) >= MIN_ELEMENTS:
            return trial
    return None


def halving_cut(module: ModuleType, constants: dict) -> dict | None:
    """`constants` halved one at a time as far as they go; None when that does not fit and
    run."""
    values = dict(constants)
    while (smaller := halved(module, values)) is not None:
        values = smaller
    changed = {n: v for n, v in values.items() if v != constants[n]}
    return changed if fits(module, values) else None


def batch_cut(module: ModuleType, constants: dict) -> dict | None:
    """The file's own sizes at a batch of SMALLEST_BATCH, with `constants` cut by the biggest
    factor that still runs (or whole); None where the file has no larger batch_size or that does
    not run either."""
    batch = getattr(module, "batch_size", None)
    if type(batch) is not int or batch <= SMALLEST_BATCH:
        return None
    for factor in (*FACTORS, 1):
        values = {n: scaled(v, factor) for n, v in constants.items() if factor > 1}
        params = {MODULE_GLOBALS: {**values, "batch_size": SMALLEST_BATCH}}
        if runs_on_meta(module, params) and runs_for_real(module, params):
            return params[MODULE_GLOBALS]
    return None
