"""Recurrences that a forward writes as a Python loop over time (hints.model_source's fusion pass,
before its chains). An Elman cell,

    for t in range(n):
        combined = torch.cat((x[t], h), dim=1)
        h = torch.tanh(self.i2h(combined))
        y = self.h2o(h)        # optional: modules that work row by row, on the state alone
        ys.append(y)

becomes one kb_elman_sequence (two launches for the whole sequence) and, where the steps append
to a list, one application of the row-wise modules to every step's state at once, whose steps
extend the list: a handful of launches where the loop made three or more a step."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch.nn as nn

from hints.model_source import assigned, call, torch_function_op

# The recurrences' activations: by module class, and by torch function (canonical op).
STATE_ACTIVATIONS = {"Tanh": "tanh", "ReLU": "relu"}
# Modules whose output row depends on its input row alone: a step's or every step's at once.
ROW_WISE = frozenset(
    cls.__name__ for cls in (nn.Linear, nn.ReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.SiLU, nn.Identity)
)
CONCATENATIONS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
LAUNCHER = "kb_elman_sequence"


@dataclass
class ElmanLoop:
    """What the loop computes, read from its statements."""

    steps: ast.expr  # n of range(n)
    inputs: str  # x, indexed by the loop's variable
    state: str  # h
    linear: ast.expr  # self.i2h
    act: str
    input_first: bool  # cat((x[t], h)) rather than cat((h, x[t]))
    row_wise: list[ast.expr]  # the modules each step applies to the state, in order
    outputs: str | None  # the list each step appends to
    temporaries: set[str]  # the names a step binds besides the state


def roll_recurrences(fn: ast.FunctionDef, attrs: dict, imports) -> set[str]:
    """Rewrite fn's Elman loops in place (attrs: attribute -> module class of its class); the
    library names the rewrite calls."""
    used = set()
    for node in ast.walk(fn):
        for field_name in ("body", "orelse"):
            block = getattr(node, field_name, None)
            if not isinstance(block, list):
                continue
            for k, stmt in reversed(list(enumerate(block))):
                loop = elman_loop(stmt, attrs, imports) if isinstance(stmt, ast.For) else None
                if loop is None or read_outside(fn, stmt, loop.temporaries):
                    continue
                block[k : k + 1] = [ast.copy_location(s, stmt) for s in rolled(loop, fn)]
                used.add(LAUNCHER)
    return used


def elman_loop(loop: ast.For, attrs: dict, imports) -> ElmanLoop | None:
    """The loop's recurrence, or None where it is not an Elman cell's."""
    steps = range_bound(loop)
    if steps is None or len(loop.body) < 2 or not isinstance(loop.target, ast.Name):
        return None
    t = loop.target.id
    first, update, *after = loop.body
    combined, cat = assigned(first)
    state, value = assigned(update)
    operands = concatenated(cat, imports)
    if combined is None or state is None or operands is None:
        return None
    stepped = [i for i, o in enumerate(operands) if is_step_of(o, t)]
    if len(stepped) != 1 or not is_name(operands[1 - stepped[0]], state):
        return None
    inputs = operands[stepped[0]].value.id
    cell = activation_of_linear(value, combined, attrs, imports)
    if cell is None or inputs in (state, t, combined):
        return None
    linear, act = cell
    row_wise, outputs, temporaries = [], None, {t, combined}
    if after:
        *chain, append = after
        outputs, last = appended(append)
        current = state
        for stmt in chain:
            name, value = assigned(stmt)
            module = row_wise_module(value, current, attrs)
            if module is None or name in {None, t, combined, state, inputs, *temporaries}:
                return None
            row_wise.append(module)
            temporaries.add(name)
            current = name
        if outputs is None or last != current:
            return None
    if outputs in {t, combined, state, inputs, *temporaries}:
        return None
    return ElmanLoop(steps, inputs, state, linear, act, stepped[0] == 0, row_wise, outputs,
                     temporaries)  # fmt: skip


def rolled(loop: ElmanLoop, fn: ast.FunctionDef) -> list[ast.stmt]:
    """The loop's statements: every state in one call, then the list extended by each step's
    output, computed over every step at once."""
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    states = next(f"elman_states{k or ''}" for k in range(len(taken) + 1)
                  if f"elman_states{k or ''}" not in taken)  # fmt: skip
    args = [name(loop.inputs), name(loop.state), loop.linear, ast.Constant(loop.act), loop.steps,
            ast.Constant(loop.input_first)]  # fmt: skip
    targets = ast.Tuple([name(states, ast.Store()), name(loop.state, ast.Store())], ast.Store())
    out = [ast.Assign([targets], call(LAUNCHER, args))]
    if loop.outputs is not None:
        value = name(states)
        for module in loop.row_wise:
            value = ast.Call(module, [value], [])
        steps = ast.Call(ast.Attribute(value, "unbind", ast.Load()), [ast.Constant(0)], [])
        extend = ast.Attribute(name(loop.outputs), "extend", ast.Load())
        out.append(ast.Expr(ast.Call(extend, [steps], [])))
    return out


def range_bound(loop: ast.For) -> ast.expr | None:
    """n of `for _ in range(n):` (no else)."""
    it = loop.iter
    if loop.orelse or not (isinstance(it, ast.Call) and is_name(it.func, "range")):
        return None
    return it.args[0] if len(it.args) == 1 and not it.keywords else None


def concatenated(value, imports) -> list[ast.expr] | None:
    """The two operands of `torch.cat((a, b), dim=1)` along the last dim of 2-D operands."""
    if not isinstance(value, ast.Call) or imports.resolve(value.func) not in CONCATENATIONS:
        return None
    dims = [k.value for k in value.keywords if k.arg == "dim"] + value.args[1:]
    if len(value.args) < 1 or len(dims) != 1 or len(value.keywords) > (not value.args[1:]):
        return None
    seq, dim = value.args[0], dims[0]
    if not (isinstance(seq, ast.Tuple | ast.List) and len(seq.elts) == 2):
        return None
    if not (isinstance(dim, ast.Constant) and dim.value == 1) and not is_minus_one(dim):
        return None
    return seq.elts


def activation_of_linear(value, combined: str, attrs: dict, imports):
    """(self.linear, act) of `act(self.linear(combined))`, act a module or torch function."""
    if not (isinstance(value, ast.Call) and len(value.args) == 1):
        return None
    act = None
    if is_self_attribute(value.func) and not value.keywords:
        act = STATE_ACTIVATIONS.get(attrs.get(value.func.attr))
    elif all(k.arg == "inplace" for k in value.keywords):
        op = torch_function_op(imports.resolve(value.func))
        act = op if op in STATE_ACTIVATIONS.values() else None
    inner = value.args[0]
    if act is None or not (isinstance(inner, ast.Call) and is_self_attribute(inner.func)):
        return None
    if attrs.get(inner.func.attr) != "Linear" or inner.keywords or len(inner.args) != 1:
        return None
    return (inner.func, act) if is_name(inner.args[0], combined) else None


def row_wise_module(value, current: str, attrs: dict) -> ast.expr | None:
    """self.m of `self.m(current)`, m a row-wise module."""
    if not (isinstance(value, ast.Call) and is_self_attribute(value.func)):
        return None
    if value.keywords or len(value.args) != 1 or not is_name(value.args[0], current):
        return None
    return value.func if attrs.get(value.func.attr) in ROW_WISE else None


def appended(stmt) -> tuple[str | None, str | None]:
    """(list, name) of `list.append(name)`."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None, None
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "append"):
        return None, None
    if not isinstance(func.value, ast.Name) or len(call.args) != 1 or call.keywords:
        return None, None
    item = call.args[0]
    return (func.value.id, item.id) if isinstance(item, ast.Name) else (None, None)


def read_outside(fn: ast.FunctionDef, loop: ast.For, names: set[str]) -> bool:
    """Whether fn reads any of `names` outside the loop."""
    inside = {id(n) for n in ast.walk(loop)}
    return any(isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
               and id(n) not in inside for n in ast.walk(fn))  # fmt: skip


def is_step_of(node, t: str) -> bool:
    """Whether node is `x[t]`, x a name."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and is_name(node.slice, t))  # fmt: skip


def is_self_attribute(node) -> bool:
    return isinstance(node, ast.Attribute) and is_name(node.value, "self")


def is_name(node, identifier: str) -> bool:
    return isinstance(node, ast.Name) and node.id == identifier


def is_minus_one(node) -> bool:
    return (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and node.operand.value == 1)  # fmt: skip


def name(identifier: str, ctx=None) -> ast.Name:
    return ast.Name(identifier, ctx or ast.Load())
