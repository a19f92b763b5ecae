"""What a traced call holds (engine.problems.trace): its arguments, by position or keyword, and
the tensors among them, described as ("tensor", shape, dtype)."""

from __future__ import annotations


def is_tensor(arg) -> bool:
    return isinstance(arg, tuple) and len(arg) == 3 and arg[0] == "tensor"


def argument(call, index: int, name: str, default=None):
    """A traced call's (or dataflow node's) argument by keyword, else by position, else
    `default`."""
    if name in call.kwargs:
        return call.kwargs[name]
    return call.args[index] if index < len(call.args) else default
