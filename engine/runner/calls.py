"""Calling a problem's `get_inputs`/`get_init_inputs` with the size parameters each accepts."""

from __future__ import annotations

import inspect


def call_with_size(fn, params: dict):
    """Call get_inputs/get_init_inputs with the size parameters that it accepts."""
    sig = inspect.signature(fn)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return fn(**params)
    return fn(**{k: v for k, v in params.items() if k in sig.parameters})
