"""What a candidate leaves behind in a runner that serves the next one: the process-wide state
the next candidate would inherit (torch's numeric settings, the environment, the import
machinery, hooks and threads, and the functions of torch, Triton and the runner themselves),
recorded before the first candidate loads and compared after each one.

The record lives in the audited interpreter, so it holds against mistakes, not against code that
sets out to defeat it: the judge lends a runner to another candidate only where every candidate
is the project's own code (engine.worker.runner_pool).
"""

from __future__ import annotations

import builtins
import os
import signal
import sys
import threading
import types

import torch
import triton
import triton.language

# Namespaces whose members' identities are recorded: a candidate that replaces one of them
# changes what every later candidate calls.
WATCHED = (builtins, os, sys, torch, torch.nn.functional, torch.cuda, triton, triton.language)
WATCHED_CLASSES = (torch.Tensor, torch.nn.Module)
_PACKAGE = __name__.rpartition(".")[0]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGSEGV)


def _settings() -> dict:
    """Torch's process-wide numeric and execution settings, the interpreter's hooks."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return {
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
        "torch.backends.cudnn.deterministic": torch.backends.cudnn.deterministic,
        "torch float32 matmul precision": torch.get_float32_matmul_precision(),
        "torch default dtype": torch.get_default_dtype(),
        "torch deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "torch grad mode": torch.is_grad_enabled(),
        "torch threads": torch.get_num_threads(),
        "torch dispatch modes": len(_get_current_dispatch_mode_stack()),
        "the environment": dict(os.environ),
        "sys.path": list(sys.path),
        "sys.meta_path": [id(f) for f in sys.meta_path],
        "sys.path_hooks": [id(h) for h in sys.path_hooks],
        "the trace function": id(sys.gettrace()),
        "the profile function": id(sys.getprofile()),
        "the recursion limit": sys.getrecursionlimit(),
        "threads": threading.active_count(),
        "signal handlers": [id(signal.getsignal(s)) for s in SIGNALS],
    }


def _members(namespace) -> dict[str, int]:
    """Identities of the members: a class's all (its operators are dunders), a module's public
    ones, and the runner's own modules' private functions too (lazily filled private state, as
    torch.cuda's, is left out)."""
    if isinstance(namespace, type):
        return {k: id(v) for k, v in vars(namespace).items()}
    own = namespace.__name__.startswith(_PACKAGE + ".")
    return {
        k: id(v)
        for k, v in vars(namespace).items()
        if not k.startswith("_") or own and not k.startswith("__") and callable(v)
    }


def _runner_modules() -> list[types.ModuleType]:
    return [m for n, m in list(sys.modules.items()) if n.startswith(_PACKAGE + ".") and m]


class StateRecord:
    """The state taken once, before the first candidate loads; `changes()` names what differs."""

    def __init__(self):
        self.settings = _settings()
        self.objects = {n.__name__: n for n in (*WATCHED, *WATCHED_CLASSES, *_runner_modules())}
        self.namespaces = {name: _members(n) for name, n in self.objects.items()}

    def changes(self) -> list[str]:
        """What differs from the record: settings by name, members as `namespace.member`.
        Modules that appear as members (torch's lazily imported submodules) are not changes."""
        now = _settings()
        found = [name for name, value in self.settings.items() if now[name] != value]
        for name, members in self.namespaces.items():
            current = _members(self.objects[name])
            found += [f"{name}.{m}" for m, was in members.items() if current.get(m) != was]
            namespace = self.objects[name]
            added = [m for m in current.keys() - members.keys()
                     if not isinstance(getattr(namespace, m), types.ModuleType)]  # fmt: skip
            found += [f"{name}.{m} (added)" for m in sorted(added)]
        return found
