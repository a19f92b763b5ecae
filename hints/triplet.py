"""Triplet margin loss of (N, D) anchors, positives and negatives (`nn.TripletMarginLoss`,
`F.triplet_margin_loss`): per row, max(margin + d(a, p) - d(a, n), 0) with d the p-norm of
`x1 - x2 + eps` (PyTorch's pairwise_distance; with swap, d(a, n) is min(d(a, n), d(p, n))),
then the mean, the sum or the rows themselves. Each row of the three inputs is read once."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.core import dataflow
from hints.core.binding import bind
from hints.core.calls import argument
from hints.core.dataflow import Ref

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
REDUCTIONS = ("mean", "sum", "none")
# p-norm -> (the map of one difference, the finish of its row sum)
NORMS = {2.0: ("d * d", "tl.sqrt(s)"), 1.0: ("tl.abs(d)", "s")}


def loss_call(graph):
    """(the three leaf values, node) when the output is the triplet margin loss of leaves."""
    node = graph.node(graph.output) if graph.output is not None else None
    if node is None or node.op != "triplet_margin_loss" or len(node.args) < 3:
        return None
    refs = node.args[:3]
    if not all(isinstance(r, Ref) and r.index < len(graph.leaves) for r in refs):
        return None
    if argument(node, 7, "size_average") is not None or argument(node, 8, "reduce") is not None:
        return None  # the deprecated spellings of `reduction`
    return [graph.leaves[r.index] for r in refs], node


def match(problem) -> Match | None:
    facts = None
    for size in problem.sizes:
        graph = dataflow.trace_graph(problem, size)
        found = loss_call(graph) if graph is not None else None
        if found is None:
            return None
        leaves, node = found
        shapes = {tuple(shape) for _, shape, _ in leaves}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            return None
        if any(dtype not in FLOAT_DTYPES for _, _, dtype in leaves):
            return None
        margin, p = argument(node, 3, "margin", 1.0), argument(node, 4, "p", 2.0)
        eps, swap = argument(node, 5, "eps", 1e-6), argument(node, 6, "swap", False)
        reduction = argument(node, 9, "reduction", "mean")
        if not all(isinstance(v, (int, float)) for v in (margin, p, eps)):
            return None
        if float(p) not in NORMS or reduction not in REDUCTIONS or not isinstance(swap, bool):
            return None
        anchor, positive, negative = (expr for expr, _, _ in leaves)
        found = dict(anchor=anchor, positive=positive, negative=negative, margin=float(margin),
                     p=float(p), eps=float(eps), swap=swap, reduction=reduction)  # fmt: skip
        if facts is not None and found != facts:
            return None
        facts = found
    binding = bind(problem)
    if binding is None:
        return None
    return Match(
        "triplet",
        {**facts, "init_source": binding.init_source, "forward_params": binding.forward_params},
    )


def substitutions(match: Match) -> dict:
    """The norm's map and finish, and the forward's ending: the rows, or their sum or mean."""
    term, norm = NORMS[match.facts["p"]]
    if match.facts["reduction"] == "none":
        finish = "        return losses.to(a.dtype)"
    else:
        mean = match.facts["reduction"] == "mean"
        finish = f"""        out = torch.empty((), device=a.device, dtype=a.dtype)
        total_kernel[(1,)](losses, out, N, MEAN={mean}, BLOCK=1024)
        return out"""
    return {"term": term, "norm": norm, "finish": finish}


TEMPLATE = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_loss_kernel(a_ptr, p_ptr, n_ptr, loss_ptr, N, D, margin, eps,
                    SWAP: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    # ROWS rows per program, the three inputs read once in BLOCK_D chunks; the distances' sums
    # in fp64 (one value per row is compared against a float64 reference), then the hinge.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    in_rows = rows < N
    offsets = tl.cast(rows, tl.int64)[:, None] * D
    cols = tl.arange(0, BLOCK_D)[None, :]
    s_ap = tl.zeros([ROWS], tl.float64)
    s_an = tl.zeros([ROWS], tl.float64)
    s_pn = tl.zeros([ROWS], tl.float64)
    for start in range(0, D, BLOCK_D):
        c = start + cols
        mask = in_rows[:, None] & (c < D)
        a = tl.load(a_ptr + offsets + c, mask=mask, other=0.0).to(tl.float64)
        p = tl.load(p_ptr + offsets + c, mask=mask, other=0.0).to(tl.float64)
        n = tl.load(n_ptr + offsets + c, mask=mask, other=0.0).to(tl.float64)
        d = a - p + eps
        s_ap += tl.sum(tl.where(mask, $term, 0.0), axis=1)
        d = a - n + eps
        s_an += tl.sum(tl.where(mask, $term, 0.0), axis=1)
        if SWAP:
            d = p - n + eps
            s_pn += tl.sum(tl.where(mask, $term, 0.0), axis=1)
    s = s_ap
    d_ap = $norm
    s = s_an
    d_an = $norm
    if SWAP:
        s = s_pn
        d_an = tl.minimum(d_an, $norm)
    loss = tl.maximum(margin + d_ap - d_an, 0.0)
    tl.store(loss_ptr + rows, loss.to(tl.float32), mask=in_rows)


@triton.jit
def total_kernel(loss_ptr, out_ptr, N, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    # One program sums the row losses in a fixed order (fp64: deterministic, no atomics).
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float64)
    for start in range(0, N, BLOCK):
        i = start + lanes
        acc += tl.load(loss_ptr + i, mask=i < N, other=0.0).to(tl.float64)
    total = tl.sum(acc, axis=0)
    if MEAN:
        total = total / N
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        a = $anchor.contiguous()
        p = $positive.contiguous()
        n = $negative.contiguous()
        N, D = a.shape
        losses = torch.empty(N, device=a.device, dtype=torch.float32)
        block_d = min($BLOCK_D, triton.next_power_of_2(max(D, 1)))
        rows = max(1, min($ROWS, $ELEMENTS_PER_PROGRAM // block_d))
        row_loss_kernel[(triton.cdiv(N, rows),)](a, p, n, losses, N, D, $margin, $eps,
                                                 SWAP=$swap, ROWS=rows, BLOCK_D=block_d,
                                                 num_warps=$num_warps)
$finish
"""

FAMILY = Family(
    name="triplet",
    description="Triplet margin loss of (N, D) anchors, positives and negatives, p-norm 1 or 2, "
    "with or without swap, reduction mean, sum or none.",
    match=match,
    strategies=(
        Strategy(
            name="triplet.rows",
            family="triplet",
            applies="any triplet margin loss over (N, D) inputs",
            addresses=("memory-bound", "multi-pass", "few-waves"),
            explanation=(
                "ROWS rows per program; the anchor, positive and negative rows are each read "
                "once in BLOCK_D chunks while both distances accumulate, so no difference "
                "tensor is written. Each row's hinge is stored, and a one-program kernel sums "
                "the N row losses in a fixed order. Long rows want a larger BLOCK_D; few rows "
                "(fewer programs than SMs) want smaller ROWS."
            ),
            template=TEMPLATE,
            params=(
                Param("BLOCK_D", (128, 256, 512, 1024, 2048, 4096), 1024, tile=True),
                Param("ROWS", (1, 2, 4, 8, 16), 2, tile=True),
                Param("ELEMENTS_PER_PROGRAM", (1024, 2048, 4096, 8192), 2048, tile=True),
                Param("num_warps", (1, 2, 4, 8, 16), 4),
            ),
            substitutions=substitutions,
        ),
    ),
)
