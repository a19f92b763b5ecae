"""A fused epilogue from the reference's dataflow: the elementwise DAG after a family's main
operator (a convolution, a product), over its result and operands that vary only along the output
channel (a per-channel bias or scale) or are single values, as statements of a Triton helper."""

from __future__ import annotations

from hints.core.dataflow import Ref, elementwise_statements, reachable, trace_graph
from hints.core.expressions import FLOAT_DTYPES


def operand_kind(shape: tuple, full: tuple, channel_dim: int) -> str | None:
    """'scalar' for one value, 'channel' for a tensor that broadcasts to `full` along the channel
    dim only (its flat index is the channel), None otherwise."""
    if len(shape) > len(full):
        return None
    padded = (1,) * (len(full) - len(shape)) + tuple(shape)
    if all(n == 1 for n in padded):
        return "scalar"
    channel = channel_dim % len(full)
    others = all(n == 1 for i, n in enumerate(padded) if i != channel)
    return "channel" if others and padded[channel] == full[channel] else None


def tail_at(graph, main_ops, count: int, channel_dim: int, channel: str, channel_ok: str):
    """(statements, result variable, operand expressions) of the DAG from the last of `count`
    main calls to the output, at one size; None when it is not elementwise on that result."""
    n = len(graph.leaves)
    mains = [n + i for i, node in enumerate(graph.nodes) if node.op in main_ops]
    if graph.output is None or len(mains) != count:
        return None
    main, full = mains[-1], graph.shape(Ref(mains[-1]))
    if graph.shape(graph.output) != full:
        return None
    nodes = reachable(graph, graph.output, {main, *range(n)})
    if nodes is None:
        return None
    leaves = sorted({
        a.index for i in nodes for a in graph.nodes[i - n].args
        if isinstance(a, Ref) and a.index < n
    })  # fmt: skip
    names, loads, operands = {main: "acc"}, [], []
    for k, leaf in enumerate(leaves):
        expr, shape, dtype = graph.leaves[leaf]
        kind = operand_kind(shape, full, channel_dim)
        if kind is None or dtype not in FLOAT_DTYPES:
            return None
        at = f"e{k}_ptr"
        if kind == "channel":
            at += f" + {channel}, mask={channel_ok}, other=0.0"
        loads.append(f"    x{k} = tl.load({at}).to(tl.float32)")
        names[leaf] = f"x{k}"
        operands.append(expr)
    found = elementwise_statements(graph, [graph.output], names)
    if found is None or found[2].get(graph.output.index) == "bool":
        return None
    code, (result,), _ = found
    return "\n".join(line for line in (*loads, code) if line), result, tuple(operands)


def fused_tail(problem, main_ops, count: int, channel_dim: int, channel: str, channel_ok: str):
    """Facts for a family's epilogue helper: `epilogue` (its return expression, in `acc`),
    `epilogue_statements`, `epilogue_params` (", e0_ptr, ..." for its signature and calls) and
    `epilogue_operands` (forward's expressions behind them); None unless every size traces the same
    elementwise tail."""
    tails = set()
    for size in problem.sizes:
        graph = trace_graph(problem, size)
        tail = (
            None
            if graph is None
            else tail_at(graph, main_ops, count, channel_dim, channel, channel_ok)
        )
        if tail is None:
            return None
        tails.add(tail)
    if len(tails) != 1:
        return None
    statements, result, operands = tails.pop()
    return {
        "epilogue": result,
        "epilogue_statements": statements,
        "epilogue_params": "".join(f", e{k}_ptr" for k in range(len(operands))),
        "epilogue_operands": operands,
    }
