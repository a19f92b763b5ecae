"""Shared checks for the kernel library of the whole-model family (hints/model_kernels): a
launcher computes what torch computes, and reaches no torch operator but layout ones."""

from __future__ import annotations

import torch

from engine.gate.torch_use import LAYOUT_ATEN_OPS
from engine.runner.guards import OperatorLog


def layout_only(fn, *args, **kwargs):
    """fn(*args, **kwargs), asserting that it reached no aten operator that computes (the gate's
    rule for ModelNew.forward); returns what fn returned."""
    log = OperatorLog()
    with torch.no_grad(), log:
        out = fn(*args, **kwargs)
    computed = [name for name in log.names if name not in LAYOUT_ATEN_OPS]
    assert not computed, f"computed with torch: {computed}"
    return out


def assert_matches(ours, theirs, rtol=1e-4, atol=1e-5):
    """`ours` against torch's `theirs`: tensors (or nested tuples of them) of the same shape and
    dtype, close in value."""
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert_matches(a, b, rtol, atol)
        return
    assert isinstance(ours, torch.Tensor), f"expected a tensor, got {type(ours).__name__}"
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    torch.testing.assert_close(ours, theirs, rtol=rtol, atol=atol)
