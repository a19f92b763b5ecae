"""Calling a problem's `get_inputs`/`get_init_inputs` with the size parameters each accepts, and
building a candidate's ModelNew the way Model is built."""

from __future__ import annotations

import contextlib
import inspect

import torch

# A size's parameter holding values for the problem module's own constants (a KernelBench file
# without SIZES reads its sizes from module globals such as `batch_size`; engine.problems.sizing).
MODULE_GLOBALS = "module_globals"


@contextlib.contextmanager
def module_globals(fn, values: dict):
    """`fn`'s module globals set to `values` for the duration, then restored."""
    namespace = fn.__globals__
    saved = {name: namespace[name] for name in values}
    namespace.update(values)
    try:
        yield
    finally:
        namespace.update(saved)


def call_with_size(fn, params: dict):
    """Call get_inputs/get_init_inputs with the size parameters that it accepts."""
    params = dict(params)
    with module_globals(fn, params.pop(MODULE_GLOBALS, {})):
        sig = inspect.signature(fn)
        if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return fn(**params)
        return fn(**{k: v for k, v in params.items() if k in sig.parameters})


# Every call of a Model that draws random numbers (engine.problems.trace.RANDOM_OPS), and of each
# candidate for it, starts from this seed: the same draws, so that their outputs compare.
DRAW_SEED = 0


def draw_alike(model: torch.nn.Module) -> None:
    """Have every call of `model` start from DRAW_SEED (copies of it too)."""
    model.register_forward_pre_hook(_reseed)


def _reseed(module, args) -> None:
    torch.manual_seed(DRAW_SEED)


def built_on_meta(build, meta=lambda: torch.device("meta")):
    """build() under `meta` (the context that puts tensors on the meta device); where the
    constructor needs values (a Swin transformer's `.item()` of its drop-path rates), built on
    the cpu and moved there."""
    try:
        with meta():
            return build()
    except (RuntimeError, NotImplementedError):
        return build().to("meta")


def build_model_new(module, init: list, seed: int, device: str, state: dict, draws=False):
    """ModelNew seeded like Model, with Model's weights (`state`) when their names and shapes
    match its own; with `draws`, each call from DRAW_SEED. On the meta device (the compile box)
    by built_on_meta, as the problem's Model is for its trace."""

    def build():
        torch.manual_seed(seed)
        return module.ModelNew(*init)

    if device == "meta":
        model = built_on_meta(build)
    else:
        with torch.device(device):
            model = build()
    if isinstance(model, torch.nn.Module):
        if draws:
            draw_alike(model)
        model.eval()
        mine = model.state_dict()
        if mine.keys() == state.keys() and all(mine[k].shape == state[k].shape for k in mine):
            model.load_state_dict(state)
    return model
