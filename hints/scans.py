"""Scans: cumsum and cumprod over any dim, of elementwise math over broadcast tensors (a masked
cumsum is cumsum(x * mask)), forwards or reversed (flip, scan, flip), and the exclusive cumsum
(zeros, then the cumsum of all but the last). The running values are fp64: PyTorch's CPU scans
accumulate in double, and the gate allows twice PyTorch's error."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.core import dataflow, operands
from hints.core.axis import MODEL_OPENING, view
from hints.core.binding import bind
from hints.core.calls import argument
from hints.core.dataflow import Ref
from hints.core.operands import HEADER

SCANS = {"cumsum": ("tl.cumsum", "+", "0.0"), "cumprod": ("tl.cumprod", "*", "1.0")}


def flipped(graph, ref: Ref, dim: int) -> Ref | None:
    """The operand of `ref` when it is a flip along `dim` alone, else None."""
    node = graph.node(ref)
    if node is None or node.op != "flip" or not isinstance(node.args[0], Ref):
        return None
    dims = argument(node, 1, "dims")
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    return node.args[0] if [d % len(node.shape) for d in dims] == [dim] else None


ZEROS = ("zeros", "zeros_like", "new_zeros")


def exclusive_scan(graph) -> tuple | None:
    """(scan node's value, its map input, dim) when the output is `cat((zeros, cumsum(narrow(
    src, dim, 0, R - 1))), dim)`: an exclusive cumsum of `src` over `dim`."""
    node = graph.node(graph.output)
    if node is None or node.op != "cat" or not isinstance(node.args[0], (list, tuple)):
        return None
    parts = node.args[0]
    dim = argument(node, 1, "dim", 0) % len(node.shape)
    if len(parts) != 2 or not all(isinstance(p, Ref) for p in parts):
        return None
    zeros, scan = graph.node(parts[0]), graph.node(parts[1])
    if zeros is None or zeros.op not in ZEROS or zeros.shape[dim] != 1:
        return None
    if scan is None or scan.op != "cumsum" or argument(scan, 2, "dtype") is not None:
        return None
    if argument(scan, 1, "dim") % len(scan.shape) != dim or not isinstance(scan.args[0], Ref):
        return None
    cut = graph.node(scan.args[0])
    if cut is None or cut.op != "narrow" or not isinstance(cut.args[0], Ref):
        return None
    full = graph.shape(cut.args[0])
    if argument(cut, 1, "dim") % len(full) != dim or tuple(full) != tuple(node.shape):
        return None
    if argument(cut, 2, "start") != 0 or argument(cut, 3, "length") != full[dim] - 1:
        return None
    return parts[1], cut.args[0], dim


def find_scan(graph) -> tuple | None:
    """(scan node's value, its map input, dim, reversed, exclusive) when the output is a scan."""
    exclusive = exclusive_scan(graph)
    if exclusive is not None:
        return (*exclusive, False, True)
    out, reverse = graph.output, False
    node = graph.node(out)
    if node is not None and node.op == "flip":
        scanned = node.args[0]
        inner = graph.node(scanned) if isinstance(scanned, Ref) else None
        if inner is None or inner.op not in SCANS:
            return None
        out, node, reverse = scanned, inner, True
    if node is None or node.op not in SCANS or not isinstance(node.args[0], Ref):
        return None
    if argument(node, 2, "dtype") is not None:
        return None
    dim = argument(node, 1, "dim") % max(1, len(node.shape))
    source = node.args[0]
    if reverse:
        source = flipped(graph, source, dim)
        if source is None or flipped(graph, graph.output, dim) is None:
            return None
    return out, source, dim, reverse, False


def match(problem) -> Match | None:
    label = problem.smallest.label
    if len(problem.output_specs[label]) != 1 or problem.output_specs[label][0][1] != "float32":
        return None
    graphs = [dataflow.trace_graph(problem, size) for size in problem.sizes]
    if any(g is None or g.output is None for g in graphs):
        return None
    found = [find_scan(g) for g in graphs]
    if None in found:
        return None
    graph, (scan, source, dim, reverse, exclusive) = graphs[0], found[0]
    leaves = dataflow.leaves_of(graph, source)
    if not leaves:
        return None
    fulls = [g.shape(f[1]) for g, f in zip(graphs, found, strict=True)]
    loaded = operands.operands_for(graphs, leaves, fulls)
    if loaded is None:
        return None
    code = dataflow.elementwise_code(graph, source, *operands.names(loaded, leaves), " " * 8)
    binding = bind(problem)
    if code is None or binding is None:
        return None
    function, symbol, neutral = SCANS[graph.node(scan).op]
    return Match(
        "scan",
        {
            "op": graph.node(scan).op,
            "dim": dim,
            "reverse": reverse,
            "views": [view(full, [f[2]]) for full, f in zip(fulls, found, strict=True)],
            "map": code,
            "scan_fn": function,
            "combine": symbol,
            "neutral": neutral,
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            **operands.fields(loaded),
            "loads": operands.loads(loaded, "idx", "mask", " " * 8),
            "d0": dim,
            "d1": dim + 1,
            # Position along the scanned dim of step `k`: backwards for a reversed scan.
            "position": "R - 1 - k" if reverse else "k",
            "exclusive": exclusive,
            # An exclusive scan stores the running value before adding its own element.
            "row_value": "c - y" if exclusive else "c",
            "column_value": "carry" if exclusive else "new",
        },
    )


MODEL = MODEL_OPENING + "        out = torch.empty(shape, device=a0.device, dtype=torch.float32)\n"

ROW_TEMPLATE = (
    HEADER
    + """

@triton.jit
def scan_kernel($params, out_ptr, R, BLOCK: tl.constexpr):
    # One row per program, in BLOCK chunks: a scan within the chunk, plus the carry of the
    # chunks before it (the chunk's last scanned value).
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    carry = tl.full([1], $neutral, tl.float64)
    for start in range(0, R, BLOCK):
        k = start + lanes
        mask = k < R
        idx = tl.cast(row, tl.int64) * R + $position
$loads
$map
        y = tl.where(mask, y, $neutral).to(tl.float64)
        c = $scan_fn(y, axis=0) $combine carry
        tl.store(out_ptr + idx, ($row_value).to(out_ptr.dtype.element_ty), mask=mask)
        carry = tl.sum(tl.where(lanes == BLOCK - 1, c, 0.0), axis=0) + tl.zeros([1], tl.float64)
"""
    + MODEL
    + """        block = min($BLOCK, triton.next_power_of_2(max(R, 1)))
        scan_kernel[(outer,)]($args, out, R, BLOCK=block, num_warps=$num_warps)
        return out
"""
)

COLUMN_TEMPLATE = (
    HEADER
    + """

@triton.jit
def scan_kernel($params, out_ptr, R, inner, BLOCK_INNER: tl.constexpr):
    # BLOCK_INNER columns of one outer slice step down the scanned dim together: each step
    # loads a contiguous run of the inner axis and adds it to the running carry.
    # One program per (outer slice, block of inner columns), folded into grid axis 0: axis 1
    # takes at most 65535 programs on a GPU.
    blocks = tl.cdiv(inner, BLOCK_INNER)
    o = tl.program_id(0) // blocks
    i = (tl.program_id(0) % blocks) * BLOCK_INNER + tl.arange(0, BLOCK_INNER)
    mask = i < inner
    carry = tl.full([BLOCK_INNER], $neutral, tl.float64)
    for k in range(0, R):
        idx = (tl.cast(o, tl.int64) * R + $position) * inner + i
$loads
$map
        new = carry $combine y.to(tl.float64)
        tl.store(out_ptr + idx, $column_value.to(out_ptr.dtype.element_ty), mask=mask)
        carry = new
"""
    + MODEL
    + """        block = min($BLOCK_INNER, triton.next_power_of_2(inner))
        scan_kernel[(triton.cdiv(inner, block) * outer,)]($args, out, R, inner,
                                                          BLOCK_INNER=block, num_warps=$num_warps)
        return out
"""
)


def rows(match: Match) -> bool:
    return all(inner == 1 for _, _, inner in match.facts["views"])


WARPS = (1, 2, 4, 8, 16)

FAMILY = Family(
    name="scan",
    description="cumsum and cumprod over any dim (masked, reversed, exclusive) of "
    "elementwise math.",
    match=match,
    strategies=(
        Strategy(
            name="scan.row_chunks",
            family="scan",
            applies="a scan over the last dim (contiguous rows)",
            addresses=("memory-bound", "multi-pass"),
            explanation=(
                "One program per row walks it in BLOCK chunks: a parallel scan inside the chunk "
                "(tl.cumsum / tl.cumprod) combined with the carry of the chunks before. One read "
                "and one write per element; the map (a mask, a product) fused into the load."
            ),
            template=ROW_TEMPLATE,
            params=(
                Param("BLOCK", (256, 512, 1024, 2048, 4096, 8192), 2048, tile=True),
                Param("num_warps", WARPS, 4),
            ),  # fmt: skip
            applies_to=rows,
        ),
        Strategy(
            name="scan.column_steps",
            family="scan",
            applies="a scan over a dim with contiguous dims after it (inner > 1)",
            addresses=("uncoalesced", "memory-bound"),
            explanation=(
                "BLOCK_INNER columns step down the scanned dim together, each step a coalesced "
                "load of the inner axis added to a running carry in registers: no transpose."
            ),
            template=COLUMN_TEMPLATE,
            params=(
                Param("BLOCK_INNER", (32, 64, 128, 256, 512, 1024), 256, tile=True),
                Param("num_warps", WARPS, 4),
            ),  # fmt: skip
            applies_to=lambda match: not rows(match),
        ),
    ),
)
