"""The work happens in Triton: which torch operators `ModelNew.forward` may reach (allocation,
views and layout, reading metadata), and the rejection that names any other."""

from __future__ import annotations

from engine.gate.correctness import CandidateRejected
from engine.problems.trace import RANDOM_OPS

# aten operators that allocate, fill with a constant, view, reshape or permute, or copy for
# layout (`.contiguous()`); none of them computes values from tensor data. (aten's `unfold` is
# Tensor.unfold's view; F.unfold is `im2col`.)
LAYOUT_ATEN_OPS = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros
    ones ones_like new_ones full full_like new_full fill fill_ zero zero_ arange scalar_tensor
    lift_fresh lift_fresh_copy view _unsafe_view view_as reshape _reshape_alias permute
    transpose transpose_ t t_ expand expand_as unsqueeze unsqueeze_ squeeze squeeze_ flatten
    unflatten unfold movedim as_strided select slice narrow unbind split split_with_sizes chunk
    detach alias clone copy_ contiguous
    """.split()
)

# aten operators that draw random numbers into a new tensor (they share torch's names): a
# candidate may call them where the Model draws too (every call of either starts from one seed;
# engine.runner.calls.DRAW_SEED).
RANDOM_ATEN_OPS = RANDOM_OPS


def canonical_aten(name: str) -> str:
    """`_softmax` -> `softmax`, `add_` -> `add`: the name a person knows the operator by."""
    name = name.lstrip("_")
    return name[:-1] if name.endswith("_") else name


# What the runner reports, beside operator names, when forward started a thread or took the
# runner's recording modes off torch's mode stacks (engine.runner.guards).
EVASIONS = {
    "start_new_thread": "started a thread (work on other threads escapes the checks)",
    "torch_mode_stack_changed": "removed the runner's recording modes from torch's mode stacks",
}


# `allowed` holding this admits every operator (the acceptance run's harness judging the
# reference itself; no command line accepts it).
ANY_OP = "*"


def check_torch_use(ops: list[str], replaced: frozenset[str], allowed: frozenset[str]) -> None:
    """Raise for an evasion, then for the first operator outside the layout set that the user
    did not allow."""
    for op in ops:
        if op in EVASIONS:
            raise CandidateRejected(
                "torch_compute",
                f"ModelNew.forward {EVASIONS[op]}; forward launches Triton "
                "kernels on the calling thread and leaves torch's modes alone",
            )
    if ANY_OP in allowed:
        return
    for op in ops:
        name = canonical_aten(op)
        if op in LAYOUT_ATEN_OPS or name in allowed or op in allowed:
            continue
        if name in replaced:
            raise CandidateRejected(
                "calls_replaced_operator",
                f"at run time ModelNew.forward called torch `{op}`, which this problem replaces "
                "(operators such as `/` and `@` on tensors count); compute it in a @triton.jit "
                "kernel",
            )
        raise CandidateRejected(
            "torch_compute",
            f"at run time ModelNew.forward computed with torch `{op}`; forward may only allocate, "
            "view, reshape or permute tensors and read their shapes: do the math in @triton.jit "
            f"kernels (or allow it for the session with --allow-torch-ops {name})",
        )
