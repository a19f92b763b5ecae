"""Cross-entropy over class logits (N, C) with integer targets (N,): `F.cross_entropy(x, t)` or
`F.nll_loss(F.log_softmax(x, dim=1), t)`, reduction mean, sum or none, with ignore_index. Each
row's loss is logsumexp(row) - row[target], from one read of the row (an online logsumexp over
chunks) and one gathered load of the target logit; a small kernel reduces the row losses."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.core import dataflow
from hints.core.binding import bind
from hints.core.calls import argument
from hints.core.dataflow import Ref

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
REDUCTIONS = ("mean", "sum", "none")


def loss_call(graph) -> tuple | None:
    """(logits value, targets value, node) when the output is the cross-entropy of leaves."""
    node = graph.node(graph.output) if graph.output is not None else None
    if node is None or len(node.args) < 2 or not all(isinstance(a, Ref) for a in node.args[:2]):
        return None
    logits, targets = node.args[:2]
    if node.op == "nll_loss":
        inner = graph.node(logits)
        if inner is None or inner.op != "log_softmax" or not isinstance(inner.args[0], Ref):
            return None
        dim = argument(inner, 1, "dim")
        if dim is None or dim % len(inner.shape) != 1 or argument(inner, 3, "dtype") is not None:
            return None
        logits = inner.args[0]
    elif node.op == "cross_entropy":
        if argument(node, 7, "label_smoothing", 0.0) not in (0, 0.0):
            return None
    else:
        return None
    if argument(node, 2, "weight") is not None:
        return None
    if argument(node, 3, "size_average") is not None or argument(node, 5, "reduce") is not None:
        return None  # the deprecated spellings of `reduction`
    if logits.index >= len(graph.leaves) or targets.index >= len(graph.leaves):
        return None
    return logits, targets, node


def match(problem) -> Match | None:
    facts = None
    for size in problem.sizes:
        graph = dataflow.trace_graph(problem, size)
        found = loss_call(graph) if graph is not None else None
        if found is None:
            return None
        logits, targets, node = found
        x, x_shape, x_dtype = graph.leaves[logits.index]
        t, t_shape, t_dtype = graph.leaves[targets.index]
        if len(x_shape) != 2 or tuple(t_shape) != tuple(x_shape[:1]) or x_dtype not in FLOAT_DTYPES:
            return None
        if t_dtype not in ("int64", "int32"):
            return None
        ignore = argument(node, 4, "ignore_index", -100)
        reduction = argument(node, 6, "reduction", "mean")
        if not isinstance(ignore, int) or reduction not in REDUCTIONS:
            return None
        found = dict(logits=x, targets=t, ignore_index=ignore, reduction=reduction)
        if facts is not None and found != facts:
            return None
        facts = found
    binding = bind(problem)
    if binding is None:
        return None
    return Match(
        "cross_entropy",
        {
            **facts,
            "mean": facts["reduction"] == "mean",
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
        },
    )


def finish(match: Match) -> dict:
    """The forward's ending: the row losses themselves, or their sum or mean by one program."""
    if match.facts["reduction"] == "none":
        return {"finish": "        return losses.to(x.dtype)"}
    return {
        "finish": f"""        out = torch.empty((), device=x.device, dtype=x.dtype)
        total_kernel[(1,)](losses, t, out, N, {match.facts["ignore_index"]},
                           MEAN={match.facts["mean"]}, BLOCK=1024)
        return out"""
    }


TEMPLATE = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_loss_kernel(x_ptr, t_ptr, loss_ptr, N, C, stride_row, ignore_index,
                    ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    # ROWS rows per program, each read once in BLOCK_C chunks: a running max and a running sum
    # of exp(x - max), rescaled when the max grows (online logsumexp); then the target logit.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    in_rows = rows < N
    base = x_ptr + tl.cast(rows, tl.int64)[:, None] * stride_row
    cols = tl.arange(0, BLOCK_C)[None, :]
    m = tl.full([ROWS], float("-inf"), tl.float32)
    s = tl.zeros([ROWS], tl.float32)
    for start in range(0, C, BLOCK_C):
        c = start + cols
        mask = in_rows[:, None] & (c < C)
        x = tl.load(base + c, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows past the end
        p = tl.where(mask, tl.exp(x - m_safe[:, None]), 0.0)
        s = s * tl.exp(m - m_safe) + tl.sum(p, axis=1)
        m = m_new
    t = tl.load(t_ptr + rows, mask=in_rows, other=ignore_index)
    valid = in_rows & (t != ignore_index)
    target = tl.load(x_ptr + tl.cast(rows, tl.int64) * stride_row + t, mask=valid, other=0.0)
    loss = m + tl.log(s) - target.to(tl.float32)
    tl.store(loss_ptr + rows, tl.where(valid, loss, 0.0), mask=in_rows)


@triton.jit
def total_kernel(loss_ptr, t_ptr, out_ptr, N, ignore_index, MEAN: tl.constexpr,
                 BLOCK: tl.constexpr):
    # One program sums the row losses in a fixed order (fp64: deterministic, no atomics) and
    # divides by the rows that count.
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float64)
    count = tl.zeros([BLOCK], tl.float64)
    for start in range(0, N, BLOCK):
        i = start + lanes
        mask = i < N
        acc += tl.load(loss_ptr + i, mask=mask, other=0.0).to(tl.float64)
        t = tl.load(t_ptr + i, mask=mask, other=ignore_index)
        count += tl.where(mask & (t != ignore_index), 1.0, 0.0)
    total = tl.sum(acc, axis=0)
    if MEAN:
        total = total / tl.sum(count, axis=0)
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        x = $logits
        if x.stride(1) != 1:
            x = x.contiguous()
        t = $targets.contiguous()
        N, C = x.shape
        losses = torch.empty(N, device=x.device, dtype=torch.float32)
        block_c = min($BLOCK_C, triton.next_power_of_2(max(C, 1)))
        rows = max(1, min($ROWS, $ELEMENTS_PER_PROGRAM // block_c))
        row_loss_kernel[(triton.cdiv(N, rows),)](x, t, losses, N, C, x.stride(0), $ignore_index,
                                                 ROWS=rows, BLOCK_C=block_c,
                                                 num_warps=$num_warps)
$finish
"""

FAMILY = Family(
    name="cross_entropy",
    description="Cross-entropy of class logits (N, C) against integer targets (F.cross_entropy, "
    "or nll_loss of log_softmax), reduction mean, sum or none.",
    match=match,
    strategies=(
        Strategy(
            name="cross_entropy.online_rows",
            family="cross_entropy",
            applies="any cross-entropy over (N, C) logits",
            addresses=("memory-bound", "multi-pass", "few-waves"),
            explanation=(
                "ROWS rows per program, each read once in BLOCK_C chunks with an online "
                "logsumexp (running max, running sum of exp rescaled when the max grows), the "
                "target logit gathered with one load per row, loss = logsumexp - x[target]. No "
                "log-probabilities are written; a one-program kernel sums the N row losses in a "
                "fixed order. Small C wants more ROWS; long rows want a larger BLOCK_C."
            ),
            template=TEMPLATE,
            params=(
                Param("BLOCK_C", (128, 256, 512, 1024, 2048, 4096, 8192), 2048, tile=True),
                Param("ROWS", (1, 2, 4, 8, 16), 4, tile=True),
                Param("ELEMENTS_PER_PROGRAM", (1024, 2048, 4096, 8192, 16384), 4096, tile=True),
                Param("num_warps", (1, 2, 4, 8, 16), 8),
            ),
            substitutions=finish,
        ),
    ),
)
