"""Load a KernelBench-format problem file (or a built-in by name) with clear errors."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import sys
import traceback
import uuid
from pathlib import Path
from types import ModuleType

import torch

from engine.errors import KernelBrainError
from engine.problems.literal_sizes import name_literal_sizes
from engine.problems.problem import PRECISION_POLICIES, TIERS, Problem, Size
from engine.problems.sizing import SCALABLE_MIN, derive_tiny
from engine.problems.trace import trace_on_meta
from engine.runner.calls import call_with_size

BUILTIN_DIR = Path(__file__).parent / "builtin"


class ProblemError(KernelBrainError):
    """A problem file that cannot be used; the message says what is wrong and what to do."""


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.py") if not p.stem.startswith("_"))


def resolve_path(spec: str) -> Path:
    """A built-in name or a path to a .py file."""
    if spec in builtin_names():
        return BUILTIN_DIR / f"{spec}.py"
    path = Path(spec)
    if path.suffix == ".py" and path.is_file():
        return path.resolve()
    raise ProblemError(
        f"no problem {spec!r}: give a built-in name ({', '.join(builtin_names())}) "
        "or the path of a KernelBench-format .py file"
    )


def import_module_from(path: Path, what: str) -> ModuleType:
    """Import a Python file under a unique module name, its get_inputs' literal sizes named as
    module constants (engine.problems.literal_sizes); errors name the file and the cause."""
    name = f"_kb_{what}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        tree = name_literal_sizes(ast.parse(Path(path).read_bytes(), str(path)), SCALABLE_MIN)
        exec(compile(tree, str(path), "exec"), module.__dict__)
    except SyntaxError as exc:
        raise ProblemError(f"{path}: syntax error at line {exc.lineno}: {exc.msg}") from exc
    except Exception as exc:
        raise ProblemError(
            f"{path}: importing it raised {type(exc).__name__}: {exc}\n"
            f"{traceback.format_exc(limit=-3)}"
        ) from exc
    finally:
        sys.modules.pop(name, None)
    return module


def read_sizes(module: ModuleType, path: Path) -> tuple[tuple[Size, ...], str]:
    """The sizes SIZES declares; for a file without it, its own size as the full one and a
    derived tiny one for the interpreter, with what the derivation changed."""
    declared = getattr(module, "SIZES", None)
    if declared is None:
        tiny = derive_tiny(module)
        if tiny is None:
            return (Size("default", "full", {}),), ""
        return (tiny[0], Size("default", "full", {})), tiny[1]
    if not isinstance(declared, dict) or not set(declared) <= set(TIERS):
        raise ProblemError(f"{path}: SIZES must be a dict with keys among {TIERS}")
    sizes = []
    for tier in TIERS:
        for i, params in enumerate(declared.get(tier, [])):
            label = tier if len(declared[tier]) == 1 else f"{tier}{i}"
            sizes.append(Size(label, tier, dict(params)))
    if not sizes:
        raise ProblemError(f"{path}: SIZES declares no size")
    return tuple(sizes), ""


def check_symbols(module: ModuleType, path: Path) -> None:
    for symbol in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, symbol):
            raise ProblemError(
                f"{path}: missing `{symbol}`; a KernelBench problem defines `class Model`, "
                "`get_inputs()` and `get_init_inputs()`"
            )
    if not (inspect.isclass(module.Model) and issubclass(module.Model, torch.nn.Module)):
        raise ProblemError(f"{path}: `Model` must be a subclass of torch.nn.Module")


def inspect_size(module: ModuleType, path: Path, size: Size):
    """Trace the reference on one size (meta device); returns (calls, output spec, input spec:
    each argument's shape, None for one that is not a tensor, whether it draws random numbers)."""
    try:
        recorder, out, inputs = trace_on_meta(
            module.Model,
            lambda **p: call_with_size(module.get_init_inputs, p),
            lambda **p: call_with_size(module.get_inputs, p),
            size.params,
        )
    except Exception as exc:
        raise ProblemError(
            f"{path}: running the reference on size {size.label} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    outputs = out if isinstance(out, (tuple, list)) else [out]
    if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
        kinds = ", ".join(type(o).__name__ for o in outputs) or "nothing"
        raise ProblemError(
            f"{path}: Model.forward must return a tensor or a tuple of tensors, not {kinds}"
        )
    shapes = [list(a.shape) if isinstance(a, torch.Tensor) else None for a in inputs]
    specs = [(list(o.shape), str(o.dtype).removeprefix("torch.")) for o in outputs]
    return recorder.calls, specs, shapes, bool(recorder.draws)


def load_problem(spec: str, precision_policy: str = "strict") -> Problem:
    """The problem `spec` names, posed under the session's precision policy. Loaded once per
    process and file contents: a bench loads each of its files for its plan, its session and its
    search, and deriving a level 3 model's tiny size alone takes seconds."""
    if precision_policy not in PRECISION_POLICIES:
        raise ProblemError(
            f"unknown precision policy {precision_policy!r}: choose "
            f"{' or '.join(PRECISION_POLICIES)}"
        )
    path = resolve_path(spec)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return _load(path, digest, precision_policy)


@functools.lru_cache(maxsize=256)
def _load(path: Path, digest: str, precision_policy: str) -> Problem:
    """The problem in `path`, whose contents hash to `digest` (the cache's key)."""
    module = import_module_from(path, "problem")
    check_symbols(module, path)
    sizes, derived = read_sizes(module, path)
    output_specs, calls, input_specs, draws = {}, {}, {}, {}
    for size in sizes:
        label = size.label
        calls[label], output_specs[label], input_specs[label], draws[label] = inspect_size(
            module, path, size
        )
    traced = dict.fromkeys(c.op for size_calls in calls.values() for c in size_calls)
    replaces = list(getattr(module, "REPLACES", traced))
    tolerance = getattr(module, "TOLERANCE", None)
    return Problem(
        name=path.stem,
        path=path,
        source=path.read_text(),
        sizes=sizes,
        tolerance=tolerance,
        replaces=tuple(replaces),
        output_specs=output_specs,
        input_specs=input_specs,
        calls=calls,
        precision_policy=precision_policy,
        derived_tiny=derived,
        draws_random=any(draws.values()),
    )
