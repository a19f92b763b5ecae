"""Elementwise math (activations, arithmetic, clamps, comparisons; chains or DAGs over several
tensors that broadcast to the output): flat and persistent kernels."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.core import dataflow, operands
from hints.core.binding import bind
from hints.core.expressions import FLOAT_DTYPES
from hints.core.operands import HEADER


def match(problem) -> Match | None:
    """Elementwise math (a chain, or any DAG) over tensors that broadcast to the output's shape."""
    label = problem.smallest.label
    out_specs = problem.output_specs[label]
    if len(out_specs) != 1 or out_specs[0][1] not in FLOAT_DTYPES:
        return None
    graphs = [dataflow.trace_graph(problem, size) for size in problem.sizes]
    if any(g is None or g.output is None or not g.nodes for g in graphs):
        return None
    graph = graphs[0]
    leaves = dataflow.leaves_of(graph, graph.output)
    if not leaves or graph.output.index < len(graph.leaves):
        return None
    fulls = [tuple(problem.output_specs[s.label][0][0]) for s in problem.sizes]
    found = operands.operands_for(graphs, leaves, fulls)
    if found is None:
        return None
    names, kinds = operands.names(found, leaves)
    code = dataflow.elementwise_code(graph, graph.output, names, kinds)
    if code is None:
        return None
    binding = bind(problem)
    if binding is None:
        return None
    return Match(
        "elementwise",
        {
            "compute": code,
            "ops": [n.op for n in graph.nodes],
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            "out_dtype": out_specs[0][1],
            **operands.fields(found),
            "loads_even": operands.loads(found, "offsets", None, "        "),
            "loads_masked": operands.loads(found, "offsets", "offsets < n_elements", "        "),
            "loads_loop": operands.loads(found, "offsets", None, "        "),
            "compute_nested": dataflow.elementwise_code(graph, graph.output, names, kinds, " " * 8),
        },
    )


MODEL = """$python_helper


class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        shape = $shape_expr
$prologue
        out = torch.empty(shape, device=a0.device, dtype=torch.$out_dtype)
        n = out.numel()
"""

FLAT_TEMPLATE = (
    HEADER
    + """

@triton.jit
def elementwise_kernel($params, out_ptr, n_elements, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    # int64 offsets: tensors past 2**31 elements would overflow int32 index math.
    offsets = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
$loads_even
    else:
$loads_masked
$compute
    if EVEN:
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty))
    else:
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=offsets < n_elements)
"""
    + MODEL
    + """        grid = (triton.cdiv(n, $BLOCK),)
        elementwise_kernel[grid](
            $args, out, n, BLOCK=$BLOCK, EVEN=n % $BLOCK == 0, num_warps=$num_warps
        )
        return out
"""
)

PERSISTENT_TEMPLATE = (
    HEADER
    + """
SMS_ON_CPU = 2  # the interpreter: a couple of programs


@triton.jit
def elementwise_kernel($params, out_ptr, n_elements, BLOCK: tl.constexpr):
    # Grid-stride over full tiles without masks; program 0 finishes the ragged tail.
    num_full = n_elements // BLOCK
    for tile in range(tl.program_id(0), num_full, tl.num_programs(0)):
        offsets = tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK)
$loads_loop
$compute_nested
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty))
    if tl.program_id(0) == 0:
        offsets = tl.cast(num_full, tl.int64) * BLOCK + tl.arange(0, BLOCK)
$loads_masked
$compute_nested
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=offsets < n_elements)
"""
    + MODEL
    + """        sms = SMS_ON_CPU if not a0.is_cuda else (
            torch.cuda.get_device_properties(a0.device).multi_processor_count)
        grid = (max(1, min(triton.cdiv(n, $BLOCK), sms * $programs_per_sm)),)
        elementwise_kernel[grid]($args, out, n, BLOCK=$BLOCK, num_warps=$num_warps)
        return out
"""
)

BLOCKS = (512, 1024, 2048, 4096, 8192)
WARPS = (2, 4, 8, 16)

FAMILY = Family(
    name="elementwise",
    description="Elementwise math over broadcast tensors: activations, arithmetic, clamps, where.",
    match=match,
    strategies=(
        Strategy(
            name="elementwise.flat_blocked",
            family="elementwise",
            applies="any elementwise chain: one program per block of elements",
            addresses=("memory-bound", "multi-pass", "uncoalesced"),
            explanation=(
                "Fuse the whole chain into one kernel: one read and one write per element, "
                "computed in fp32 registers. Each program handles BLOCK contiguous elements "
                "(BLOCK / (32 * num_warps) per thread, so 16-byte vector loads); the mask is "
                "compiled out when the size is a multiple of BLOCK."
            ),
            template=FLAT_TEMPLATE,
            # 1024 x 8 warps, one 16-byte vector a thread: ReLU over 1.6G floats ran at the copy's
            # speed on the H200 (3.03 ms, the copy 3.04), and 4% slower from the old start, 4096.
            params=(Param("BLOCK", BLOCKS, 1024, tile=True), Param("num_warps", WARPS, 8)),
        ),
        Strategy(
            name="elementwise.persistent_grid_stride",
            family="elementwise",
            applies="large tensors, where launching millions of short programs costs tail effects",
            addresses=("memory-bound", "few-waves", "low-achieved-occupancy"),
            explanation=(
                "Launch a few programs per SM that stride over the tensor in BLOCK-sized tiles: "
                "unmasked loads for full tiles, one masked tile at the end. Fewer, longer "
                "programs keep memory requests in flight and remove scheduling overhead."
            ),
            template=PERSISTENT_TEMPLATE,
            params=(
                Param("BLOCK", BLOCKS, 4096, tile=True),
                Param("num_warps", WARPS, 8),
                Param("programs_per_sm", (1, 2, 4, 8), 4),
            ),
        ),
    ),
)
