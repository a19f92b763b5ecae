"""A product (linear, matmul, mm of 2-D operands) followed by elementwise math, a softmax or
log_softmax over its rows, and elementwise math on the result (KernelBench level 2's
Matmul_GELU_Softmax). The bias and the first elementwise part are fused into the GEMM tile; the
row statistics come from the tiles themselves, so the product's result is read back once."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.core import dataflow
from hints.core.binding import bind
from hints.core.calls import argument
from hints.core.dataflow import Ref
from hints.core.gemm import DOT_DTYPES, HEADER, NO_EPILOGUE, PRECISION_NOTE, PRECISIONS

PRODUCTS = ("linear", "matmul", "mm")
ROW_OPS = ("softmax", "log_softmax")
# Rows this long or shorter: one program may own whole rows (a wave of row blocks is enough).
RESIDENT_MAX_N = 1024


def product_operands(graph, node) -> tuple | None:
    """(a, b or w, bias, transposed) leaf expressions of a 2-D product; None otherwise."""
    refs = [a for a in node.args if isinstance(a, Ref)]
    bias = argument(node, 2, "bias") if node.op == "linear" else None
    if any(isinstance(v, Ref) and k != "bias" for k, v in node.kwargs.items()):
        return None
    if isinstance(bias, Ref):
        refs = [r for r in refs if r != bias] + [bias]
    if any(r.index >= len(graph.leaves) for r in refs):
        return None
    exprs = [graph.leaves[r.index][0] for r in refs]
    shapes = [graph.leaves[r.index][1] for r in refs]
    dtypes = {graph.leaves[r.index][2] for r in refs}
    if len(dtypes) != 1 or not dtypes <= set(DOT_DTYPES) or len(shapes) < 2:
        return None
    if len(shapes[0]) != 2 or len(shapes[1]) != 2:
        return None
    if node.op == "linear":
        if len(refs) != (3 if isinstance(bias, Ref) else 2) or len(node.args) > 3:
            return None
        if isinstance(bias, Ref) and len(shapes[2]) != 1:
            return None
        return exprs[0], exprs[1], exprs[2] if isinstance(bias, Ref) else "None", True
    if len(refs) != 2 or node.kwargs:
        return None
    return exprs[0], exprs[1], "None", False


def find(graph) -> dict | None:
    """The product, the row op and the elementwise code around them, as plain facts."""
    if graph is None or graph.output is None:
        return None
    rows = [i for i, n in enumerate(graph.nodes) if n.op in ROW_OPS]
    products = [i for i, n in enumerate(graph.nodes) if n.op in PRODUCTS]
    if len(rows) != 1 or len(products) != 1:
        return None
    n_leaves = len(graph.leaves)
    row_node, product = graph.nodes[rows[0]], graph.nodes[products[0]]
    operands = product_operands(graph, product)
    if operands is None or len(product.shape) != 2 or not isinstance(row_node.args[0], Ref):
        return None
    dim = argument(row_node, 1, "dim")
    if not isinstance(dim, int) or dim % 2 != 1 or row_node.kwargs.get("dtype") is not None:
        return None
    before = dataflow.elementwise_code(
        graph, row_node.args[0], {products[0] + n_leaves: "acc"}, indent="    "
    )
    after = dataflow.elementwise_code(graph, graph.output, {rows[0] + n_leaves: "r"}, indent="    ")
    if before is None or after is None or tuple(graph.shape(graph.output)) != product.shape:
        return None
    a, b, bias, transposed = operands
    return dict(op=row_node.op, a=a, b=b, bias=bias, transposed=transposed, map=before, after=after)


def match(problem) -> Match | None:
    facts, widths = None, []
    for size in problem.sizes:
        graph = dataflow.trace_graph(problem, size)
        found = find(graph)
        if found is None or (facts is not None and found != facts):
            return None
        facts = found
        widths.append(graph.shape(graph.output)[1])
    binding = bind(problem)
    if binding is None:
        return None
    b, transposed = facts["b"], facts["transposed"]
    return Match(
        "product_softmax",
        {
            **facts,
            "widths": widths,
            # B as [K, N] strides: a linear's weight is [N, K], read transposed.
            "b_strides": f"{b}.stride(1), {b}.stride(0)"
            if transposed
            else f"{b}.stride(0), {b}.stride(1)",
            "n_expr": f"{b}.shape[0]" if transposed else f"{b}.shape[1]",
            "normalize": "tl.exp(h - mx[:, None]) / total[:, None]"
            if facts["op"] == "softmax"
            else "h - mx[:, None] - tl.log(total)[:, None]",
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            **NO_EPILOGUE,  # the GEMM HEADER's epilogue helper and finish_tile, unused here
        },
    )


TILE = """
@triton.jit
def bias_and_map(acc, bias_ptr, cols, N, HAS_BIAS: tl.constexpr):
    # The product tile plus the bias, through the elementwise math before the row op.
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
$map
    return y


@triton.jit
def finish(h, mx, total):
    # The row op from the row's max and sum of exp(h - max), then the math after it.
    r = $normalize
$after
    return y
"""

FORWARD = """

class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        a = $a
        b = $b
        bias = $bias
        M, K = a.shape
        N = $n_expr
        out = torch.empty((M, N), device=a.device, dtype=a.dtype)
        # The rows before the row op, in fp32 (in `out` itself when it is fp32).
        h = out if out.dtype == torch.float32 else torch.empty((M, N), device=a.device,
                                                                dtype=torch.float32)
"""

STATS_TEMPLATE = (
    HEADER
    + TILE
    + """

@triton.jit
def product_kernel(a_ptr, b_ptr, bias_ptr, h_ptr, max_ptr, sum_ptr, M, N, K, TILES,
                   stride_am, stride_ak, stride_bk, stride_bn, HAS_BIAS: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr):
    # One output tile: the product, bias and map fused; the tile is stored with its per-row
    # max and sum of exp(h - max), the partial statistics of the row op.
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tile_product(a_ptr, b_ptr, M, N, K, 0, K, pid_m, pid_n, tl.program_id(1),
                       0, stride_am, stride_ak, 0, stride_bk, stride_bn,
                       BLOCK_M, BLOCK_N, BLOCK_K)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y = bias_and_map(acc, bias_ptr, cols, N, HAS_BIAS)
    in_rows = rows < M
    tl.store(h_ptr + tl.cast(rows, tl.int64)[:, None] * N + cols[None, :], y,
             mask=in_rows[:, None] & (cols < N)[None, :])
    y = tl.where((cols < N)[None, :], y, float("-inf"))
    m = tl.max(y, axis=1)
    s = tl.sum(tl.exp(y - m[:, None]), axis=1)
    tl.store(max_ptr + rows * TILES + pid_n, m, mask=in_rows)
    tl.store(sum_ptr + rows * TILES + pid_n, s, mask=in_rows)


@triton.jit
def normalize_kernel(h_ptr, max_ptr, sum_ptr, out_ptr, M, N, TILES, TILES_P2: tl.constexpr,
                     ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # Merge the rows' partial statistics, then one read of h and one write of the output.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    in_rows = rows < M
    t = tl.arange(0, TILES_P2)[None, :]
    at = rows[:, None] * TILES + t
    parts = in_rows[:, None] & (t < TILES)
    tm = tl.load(max_ptr + at, mask=parts, other=float("-inf"))
    ts = tl.load(sum_ptr + at, mask=parts, other=0.0)
    mx = tl.max(tm, axis=1)
    mx = tl.where(in_rows, mx, 0.0)
    total = tl.sum(ts * tl.exp(tm - mx[:, None]), axis=1)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = in_rows[:, None] & (cols < N)[None, :]
    offs = tl.cast(rows, tl.int64)[:, None] * N + cols[None, :]
    h = tl.load(h_ptr + offs, mask=mask, other=0.0)
    y = finish(h, mx, total)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
"""
    + FORWARD
    + """        tiles = triton.cdiv(N, $BLOCK_N)
        stats = torch.empty((2, M, tiles), device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(M, $BLOCK_M) * tiles, 1)
        product_kernel[grid](
            a, b, bias if bias is not None else h, h, stats[0], stats[1], M, N, K, tiles,
            a.stride(0), a.stride(1), $b_strides, HAS_BIAS=bias is not None,
            BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N, BLOCK_K=$BLOCK_K, GROUP_M=$GROUP_M,
            num_warps=$num_warps, num_stages=$num_stages,
        )
        block = min($NORM_BLOCK, triton.next_power_of_2(N))
        rows = max(1, min($NORM_ROWS, 4096 // block))
        normalize_kernel[(triton.cdiv(M, rows), triton.cdiv(N, block))](
            h, stats[0], stats[1], out, M, N, tiles, TILES_P2=triton.next_power_of_2(tiles),
            ROWS=rows, BLOCK=block, num_warps=4,
        )
        return out
"""
)

RESIDENT_TEMPLATE = (
    HEADER
    + TILE
    + """

@triton.jit
def resident_kernel(a_ptr, b_ptr, bias_ptr, h_ptr, out_ptr, M, N, K,
                    stride_am, stride_ak, stride_bk, stride_bn, HAS_BIAS: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One program owns BLOCK_M whole rows: their tiles left to right with an online max and
    # sum, then the tiles again (just written, still in cache) through the row op.
    pid_m = tl.program_id(0)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    in_rows = rows < M
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_M], tl.float32)
    for pid_n in range(0, tl.cdiv(N, BLOCK_N)):
        acc = tile_product(a_ptr, b_ptr, M, N, K, 0, K, pid_m, pid_n, tl.program_id(1),
                           0, stride_am, stride_ak, 0, stride_bk, stride_bn,
                           BLOCK_M, BLOCK_N, BLOCK_K)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        y = bias_and_map(acc, bias_ptr, cols, N, HAS_BIAS)
        tl.store(h_ptr + tl.cast(rows, tl.int64)[:, None] * N + cols[None, :], y,
                 mask=in_rows[:, None] & (cols < N)[None, :])
        y = tl.where((cols < N)[None, :], y, float("-inf"))
        m_new = tl.maximum(m, tl.max(y, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(y - m_new[:, None]), axis=1)
        m = m_new
    for pid_n in range(0, tl.cdiv(N, BLOCK_N)):
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = in_rows[:, None] & (cols < N)[None, :]
        offs = tl.cast(rows, tl.int64)[:, None] * N + cols[None, :]
        h = tl.load(h_ptr + offs, mask=mask, other=0.0)
        y = finish(h, m, s)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
"""
    + FORWARD
    + """        resident_kernel[(triton.cdiv(M, $BLOCK_M), 1)](
            a, b, bias if bias is not None else h, h, out, M, N, K,
            a.stride(0), a.stride(1), $b_strides, HAS_BIAS=bias is not None,
            BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N, BLOCK_K=$BLOCK_K,
            num_warps=$num_warps, num_stages=$num_stages,
        )
        return out
"""
)


def tile_params(block_m: int, block_n: int) -> tuple[Param, ...]:
    return (
        Param("BLOCK_M", (16, 32, 64, 128, 256), block_m, tile=True),
        Param("BLOCK_N", (32, 64, 128, 256), block_n, tile=True),
        Param("BLOCK_K", (16, 32, 64, 128), 32, tile=True),
        Param("num_warps", (2, 4, 8), 8 if block_m * block_n >= 128 * 128 else 4),
        Param("num_stages", (2, 3, 4, 5), 3),
        Param("precision", PRECISIONS, "ieee"),
    )


def short_rows(match: Match) -> bool:
    return max(match.facts["widths"]) <= RESIDENT_MAX_N


FAMILY = Family(
    name="product_softmax",
    description="A product (linear, matmul) with elementwise math, then a softmax or log_softmax "
    "over its rows and elementwise math after it.",
    match=match,
    strategies=(
        Strategy(
            name="product_softmax.tile_statistics",
            family="product_softmax",
            applies="any size: the product tiled over the whole output",
            addresses=("compute-bound", "multi-pass", "few-waves"),
            explanation=(
                "A grouped GEMM tile with the bias and the elementwise map fused stores its "
                "fp32 tile and, per row, the tile's max and sum of exp(x - max). A second "
                "kernel merges each row's partials (a few per row) and normalizes the tiles "
                "in one read and one write: the rows are never scanned twice." + PRECISION_NOTE
            ),
            template=STATS_TEMPLATE,
            params=(
                *tile_params(128, 128),
                Param("GROUP_M", (1, 4, 8, 16), 8),
                Param("NORM_BLOCK", (256, 512, 1024, 2048), 1024, tile=True),
                Param("NORM_ROWS", (1, 2, 4, 8), 4, tile=True),
            ),
        ),
        Strategy(
            name="product_softmax.row_resident",
            family="product_softmax",
            applies=f"rows of at most {RESIDENT_MAX_N}: one program owns whole rows",
            addresses=("multi-pass", "stall-memory"),
            explanation=(
                "One kernel: each program computes BLOCK_M whole rows tile by tile with an "
                "online max and sum, then re-reads its own freshly written tiles (cache "
                "resident) and applies the row op: one launch, no statistics workspace."
                + PRECISION_NOTE
            ),
            template=RESIDENT_TEMPLATE,
            params=tile_params(32, 128),
            applies_to=short_rows,
        ),
    ),
)
