"""Normalizations with batch statistics over (N, C, *spatial) tensors: BatchNorm in training mode
(per channel over batch and space, updating the running statistics), InstanceNorm (per sample
and channel) and GroupNorm (per sample and group of channels), each with its per-channel affine.

Every one is seen as (outer, S, inner): S statistics, each over outer x inner elements (BatchNorm:
N, C, H*W; InstanceNorm: 1, N*C, H*W; GroupNorm: 1, N*G, C/G*H*W). An element's channel, for the
affine, is (offset // H*W) % C in all three."""

from __future__ import annotations

import torch

from hints.base import Family, Match, Param, Strategy
from hints.core import dataflow
from hints.core.binding import bind, on_meta
from hints.core.calls import argument
from hints.core.dataflow import Ref

# op -> (position, name) of its tensor arguments (weight, bias, then the running statistics),
# of its batch-statistics flag, and of its momentum and eps; None where the op has none.
ARGUMENTS = {
    "batch_norm": dict(
        tensors=((3, "weight"), (4, "bias"), (1, "running_mean"), (2, "running_var")),
        stats=(5, "training"),
        momentum=(6, "momentum"),
        eps=(7, "eps"),
    ),
    "instance_norm": dict(
        tensors=((3, "weight"), (4, "bias"), (1, "running_mean"), (2, "running_var")),
        stats=(5, "use_input_stats"),
        momentum=(6, "momentum"),
        eps=(7, "eps"),
    ),
    "group_norm": dict(
        tensors=((2, "weight"), (3, "bias")), stats=None, momentum=None, eps=(4, "eps")
    ),
}
# forward's (outer, S, inner) from N, C and HW (elements per channel of a sample).
LAYOUTS = {
    "batch_norm": "N, C, HW",
    "instance_norm": "1, N * C, HW",
    "group_norm": "1, N * $groups, C // $groups * HW",
}


def leaf(graph, value) -> str | None:
    """The expression of a traced leaf (forward argument, parameter, buffer); None otherwise."""
    if isinstance(value, Ref) and value.index < len(graph.leaves):
        return graph.leaves[value.index][0]
    return None


def norm_facts(graph) -> dict | None:
    """The facts of a forward that returns one batch-statistics norm of a float32 input."""
    if graph is None or graph.output is None or len(graph.nodes) != 1:
        return None
    node = graph.node(graph.output)
    if node is None or node.op not in ARGUMENTS:
        return None
    at = ARGUMENTS[node.op]
    x = leaf(graph, node.args[0])
    if x is None or len(node.shape) < 2 or node.dtype != "float32":
        return None
    tensors = [argument(node, i, name) for i, name in at["tensors"]]
    names = [leaf(graph, t) for t in tensors] + [None, None]
    if any(t is not None and n is None for t, n in zip(tensors, names, strict=False)):
        return None
    if at["stats"] is not None and argument(node, *at["stats"]) is not True:
        return None  # running statistics (eval mode) instead of the batch's
    running = names[2:4]
    if running != [None, None] and (node.op == "instance_norm" or None in running):
        return None  # instance statistics averaged into running ones; half a pair: not handled
    groups = argument(node, 1, "num_groups") if node.op == "group_norm" else 1
    eps, momentum = argument(node, *at["eps"], 1e-5), 0.0
    if running[0] is not None:
        momentum = argument(node, *at["momentum"], 0.1)
    if not isinstance(groups, int) or not all(isinstance(v, float) for v in (eps, momentum)):
        return None
    return dict(op=node.op, x=x, weight=names[0], bias=names[1], running=running,
                groups=groups, eps=eps, momentum=momentum)  # fmt: skip


def groups_attribute(problem, weight: str | None) -> str | None:
    """`self.<norm>.num_groups` when the group norm whose weight is `weight` is an nn.GroupNorm
    (the group count may scale with the sizes, as a derived tiny size scales it), else None."""
    if weight is None or not weight.startswith("self.") or not weight.endswith(".weight"):
        return None
    path = weight.removeprefix("self.").removesuffix(".weight")
    with on_meta(problem) as (_, model, _):
        try:
            norm = model.get_submodule(path)
        except AttributeError:
            return None
    return f"self.{path}.num_groups" if isinstance(norm, torch.nn.GroupNorm) else None


def match(problem) -> Match | None:
    graphs = [dataflow.traced(problem, size) for size in problem.sizes]
    facts = [norm_facts(graph) for graph in graphs]
    if None in facts:
        return None
    groups = str(facts[0]["groups"])
    if any(f != facts[0] for f in facts):
        groups = groups_attribute(problem, facts[0]["weight"])
        same = [{**f, "groups": None} for f in facts]
        if groups is None or any(f != same[0] for f in same):
            return None
    facts = facts[0]
    running = facts.pop("running")
    counter = None
    if running[0] is not None:
        # nn.BatchNorm's counter of batches seen, kept beside its running statistics.
        sibling = running[0].removesuffix("running_mean") + "num_batches_tracked"
        counter = sibling if sibling in [name for name, _, _ in graphs[0].leaves] else None
    if set(graphs[0].writes) - {counter}:
        return None  # the template writes the running statistics and the counter, nothing else
    binding = bind(problem)
    if binding is None:
        return None
    return Match(
        "channel_norm",
        {
            **facts,
            "layout": LAYOUTS[facts["op"]].replace("$groups", groups),
            "weight": facts["weight"] or "None",
            "bias": facts["bias"] or "None",
            "running_mean": running[0] or "None",
            "running_var": running[1] or "None",
            "counter": counter or "None",
            "batch_stats": "True" if running[0] is None else "self.training",
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
        },
    )


TEMPLATE = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_offsets(s, j, S, inner):
    # Where element j (flat over outer x inner) of statistic s lies in the (outer, S, inner) view.
    return (j // inner).to(tl.int64) * S * inner + s.to(tl.int64) * inner + j % inner


@triton.jit
def shift_of(x_ptr, s, S, inner, n, BLOCK: tl.constexpr):
    # The mean of the group's first BLOCK values, close to the group's mean, so that the sums of
    # shifted values cancel almost nothing. Every program of a group computes the same.
    j = tl.arange(0, BLOCK)
    first = j < n
    head = tl.load(x_ptr + group_offsets(s, j, S, inner), mask=first, other=0.0).to(tl.float32)
    return tl.sum(head, axis=0) / tl.sum(first.to(tl.float32), axis=0)


@triton.jit
def stats_kernel(x_ptr, ws_ptr, S, inner, n, CHUNK, SPLITS, BLOCK: tl.constexpr):
    # Program (s, split) sums its CHUNK of group s, shifted, and its squares: two partials.
    s = tl.program_id(0)
    split = tl.program_id(1)
    shift = shift_of(x_ptr, s, S, inner, n, BLOCK)
    p0 = tl.zeros([BLOCK], dtype=tl.float32)
    p1 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(split * CHUNK, split * CHUNK + CHUNK, BLOCK):  # whole BLOCKs
        j = start + tl.arange(0, BLOCK)
        mask = j < n
        x = tl.load(x_ptr + group_offsets(s, j, S, inner), mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - shift, 0.0)
        p0 += d
        p1 += d * d
    tl.store(ws_ptr + (s * SPLITS + split) * 2, tl.sum(p0, axis=0))
    tl.store(ws_ptr + (s * SPLITS + split) * 2 + 1, tl.sum(p1, axis=0))


@triton.jit
def normalize_kernel(x_ptr, out_ptr, w_ptr, b_ptr, ws_ptr, mean_ptr, var_ptr, count_ptr,
                     S, inner, n, HW, C, CHUNK, SPLITS, eps, momentum, BLOCK: tl.constexpr,
                     SPLITS_P2: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                     BATCH_STATS: tl.constexpr, UPDATE_RUNNING: tl.constexpr,
                     HAS_COUNTER: tl.constexpr):
    # Program (s, split) merges group s's partials in a fixed order (deterministic, no atomics),
    # or reads the running statistics (eval mode), then normalizes its CHUNK with the affine of
    # each element's channel.
    s = tl.program_id(0)
    split = tl.program_id(1)
    if BATCH_STATS:
        parts = tl.arange(0, SPLITS_P2)
        here = parts < SPLITS
        q0 = tl.sum(tl.load(ws_ptr + (s * SPLITS + parts) * 2, mask=here, other=0.0), axis=0)
        q1 = tl.sum(tl.load(ws_ptr + (s * SPLITS + parts) * 2 + 1, mask=here, other=0.0), axis=0)
        mean_shifted = q0 / n
        var = tl.maximum(q1 / n - mean_shifted * mean_shifted, 0.0)
        mean = shift_of(x_ptr, s, S, inner, n, BLOCK) + mean_shifted
        if UPDATE_RUNNING:
            if split == 0:  # the running variance is the unbiased one, as PyTorch keeps it
                old_mean = tl.load(mean_ptr + s)
                old_var = tl.load(var_ptr + s)
                tl.store(mean_ptr + s, (1.0 - momentum) * old_mean + momentum * mean)
                unbiased = var * n / tl.maximum(n - 1, 1)
                tl.store(var_ptr + s, (1.0 - momentum) * old_var + momentum * unbiased)
                if HAS_COUNTER:
                    if s == 0:
                        tl.store(count_ptr, tl.load(count_ptr) + 1)
    else:
        mean = tl.load(mean_ptr + s).to(tl.float32)
        var = tl.load(var_ptr + s).to(tl.float32)
    scale = tl.math.div_rn(1.0, tl.sqrt_rn(var + eps))
    for start in range(split * CHUNK, split * CHUNK + CHUNK, BLOCK):  # whole BLOCKs
        j = start + tl.arange(0, BLOCK)
        mask = j < n
        offs = group_offsets(s, j, S, inner)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * scale
        channel = (offs // HW) % C
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + channel, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + channel, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        x = $x.contiguous()
        weight, bias = $weight, $bias
        running_mean, running_var, counter = $running_mean, $running_var, $counter
        N, C = x.shape[0], x.shape[1]
        HW = x[0, 0].numel()
        outer, S, inner = $layout
        n = outer * inner
        out = torch.empty_like(x)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
        # Enough programs for $WAVES waves, each chunk a whole number of BLOCKs.
        block = min($BLOCK, triton.next_power_of_2(n))
        splits = max(1, min(triton.cdiv(sms * $WAVES, S), triton.cdiv(n, block), $MAX_SPLITS))
        chunk = triton.cdiv(triton.cdiv(n, splits), block) * block
        splits = triton.cdiv(n, chunk)
        # Batch statistics in training mode, or where there are no running ones (as PyTorch).
        batch_stats = $batch_stats
        ws = torch.empty((S, splits, 2), device=x.device, dtype=torch.float32)
        if batch_stats:
            stats_kernel[(S, splits)](x, ws, S, inner, n, chunk, splits, BLOCK=block,
                                      num_warps=$num_warps)
        normalize_kernel[(S, splits)](
            x, out, x if weight is None else weight, x if bias is None else bias, ws,
            x if running_mean is None else running_mean,
            x if running_var is None else running_var, x if counter is None else counter,
            S, inner, n, HW, C, chunk, splits, $eps, $momentum, BLOCK=block,
            SPLITS_P2=triton.next_power_of_2(splits), HAS_WEIGHT=weight is not None,
            HAS_BIAS=bias is not None, BATCH_STATS=batch_stats,
            UPDATE_RUNNING=batch_stats and running_mean is not None,
            HAS_COUNTER=counter is not None, num_warps=$num_warps,
        )
        return out
"""

FAMILY = Family(
    name="channel_norm",
    description="BatchNorm (training mode), InstanceNorm and GroupNorm with batch statistics "
    "and per-channel affine over (N, C, *spatial) tensors.",
    match=match,
    strategies=(
        Strategy(
            name="channel_norm.split_stats",
            family="channel_norm",
            applies="any batch-statistics norm: every group split over enough programs",
            addresses=("few-waves", "under-utilised", "memory-bound", "multi-pass"),
            explanation=(
                "Each statistic's group (a channel over batch and space, a sample's channel or "
                "group of channels) is split over SPLITS programs, enough for WAVES waves over "
                "the SMs even when there are few groups: each sums its chunk and its squares "
                "(shifted by a sample of the group's values, so the variance cancels nothing), "
                "then a second kernel merges a group's partials in a fixed order and normalizes "
                "its chunk with the channel's weight and bias. Two reads and one write."
            ),
            template=TEMPLATE,
            params=(
                Param("BLOCK", (256, 512, 1024, 2048, 4096), 1024, tile=True),
                Param("WAVES", (1, 2, 4, 8), 4),
                Param("MAX_SPLITS", (16, 64, 256, 1024), 256),
                Param("num_warps", (1, 2, 4, 8, 16), 4),
            ),
        ),
    ),
)
