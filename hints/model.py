"""The whole-model family (issue 31), a fallback: a problem that no other family recognises is
rewritten whole (hints.model_source), its nn modules built as the kernel library's Kb modules and
its forward's torch computations launched by the library's kernels (hints.model_kernels,
embedded by hints.model_library). It recognises a problem when the library has a launcher for
every operator the problem's own code computes with and a Kb module for every torch module it
builds; otherwise `refusal` names each one missing and where."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from engine.problems.loader import import_module_from
from engine.problems.trace import canonical_op
from engine.runner.calls import MODULE_GLOBALS, call_with_size, module_globals
from hints import model_library
from hints.base import Family, Match, Param, Strategy
from hints.core.merge import call_arguments, method_args
from hints.model_loops import roll_recurrences
from hints.model_source import (
    Fusion,
    computes,
    fusable_pairs,
    launcher,
    rewrite,
)

NAME = "model"
# torch modules that only hold others: their forward (Sequential's) or none runs no torch math.
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})
TORCH_DIR = str(Path(torch.__file__).parent)
TORCH_MODULES_DIR = str(Path(torch.nn.modules.__file__).parent)


class ProblemCodeRecorder(TorchFunctionMode):
    """Compute operators that the problem's own code calls (not torch's modules on its behalf):
    launcher name -> where it is first called."""

    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename
        self.found: dict[str, str] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        op = canonical_op(func)
        method = func is getattr(torch.Tensor, getattr(func, "__name__", ""), None)
        if computes(op, method):
            where = self.caller()
            if where is not None:
                self.found.setdefault(launcher(op), where)
        return func(*args, **(kwargs or {}))

    def caller(self) -> str | None:
        """`Model.forward, line 12` where the problem's code made the call; None where torch's
        modules did."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(TORCH_DIR):
            if frame.f_code.co_filename.startswith(TORCH_MODULES_DIR):
                return None
            frame = frame.f_back
        if frame is None or frame.f_code.co_filename != self.filename:
            return None
        return f"{frame.f_code.co_qualname}, line {frame.f_lineno}"


@dataclass(frozen=True)
class Traced:
    """What running the problem's Model showed: the operators its own code computes with, the
    torch module classes it builds (class name -> where), and the attributes of its own classes
    that hold modules (class name -> attribute -> module class name)."""

    ops: dict
    modules: dict
    submodules: dict
    fusable_sequential: bool  # an nn.Sequential holds a run of modules that fuses


def trace_model(problem) -> Traced:
    """Run Model at the problem's smallest size, on the meta device (on the cpu where meta
    cannot run it), recording what its own code computes with."""
    module = import_module_from(problem.path, "model")
    params = problem.smallest.params
    failure = None
    for device in ("meta", "cpu"):
        recorder = ProblemCodeRecorder(str(problem.path))
        try:
            globals_ = module_globals(module.get_inputs, params.get(MODULE_GLOBALS, {}))
            with globals_, torch.device(device), torch.no_grad():  # Model may read constants
                torch.manual_seed(0)
                model = module.Model(*call_with_size(module.get_init_inputs, params)).eval()
                inputs = call_with_size(module.get_inputs, params)
                with recorder:
                    model(*inputs)
        except Exception as exc:  # meta cannot run data-dependent code: the cpu can
            failure = exc
            continue
        sequentials = [m for m in model.modules() if type(m) is torch.nn.Sequential]
        fusable = any(fusable_pairs([type(c).__name__ for c in s]) for s in sequentials)
        return Traced(recorder.found, torch_modules(model), submodule_types(model), fusable)
    raise failure


def torch_modules(model) -> dict:
    """torch.nn module class name -> where the model holds one (`network.1`): the modules of
    the problem's own classes and of containers, not those a torch module holds itself (its Kb
    class runs them)."""
    found, todo = {}, [("", model)]
    while todo:
        name, m = todo.pop(0)
        cls = type(m)
        own = not cls.__module__.startswith("torch.")
        if not own and cls.__name__ not in CONTAINERS:
            found.setdefault(cls.__name__, name or "the model itself")
            continue
        todo += [(f"{name}.{k}" if name else k, child) for k, child in m.named_children()]
    return found


def submodule_types(model) -> dict:
    """For each of the problem's own module classes, attribute -> the class of the module it
    holds (None where two instances disagree)."""
    found: dict[str, dict] = {}
    for m in model.modules():
        if type(m).__module__.startswith("torch."):
            continue
        attrs = found.setdefault(type(m).__name__, {})
        for attr, child in m.named_children():
            kind = type(child).__name__
            attrs[attr] = kind if attrs.get(attr, kind) == kind else None
    return found


@dataclass(frozen=True)
class Examined:
    """A problem as this family sees it: its rewritten code and the library names it uses, or
    why it cannot be (each missing launcher or module, and where)."""

    text: str
    names: tuple[str, ...]
    missing: tuple[str, ...]


_EXAMINED: dict = {}  # (file, source, size, library state) -> Examined: match, render, refusal


def examine(problem) -> Examined:
    """The problem examined once per state of its file and of the library."""
    key = (str(problem.path), problem.source, repr(problem.smallest), model_library.state())
    if key not in _EXAMINED:
        _EXAMINED.clear()
        _EXAMINED[key] = _examine(problem)
    return _EXAMINED[key]


def _examine(problem) -> Examined:
    library = model_library.providers()
    try:
        traced = trace_model(problem)
    except Exception as exc:
        return Examined("", (), (f"running Model failed: {type(exc).__name__}: {exc}",))
    missing = {}
    for name, where in traced.ops.items():
        if name not in library:
            missing.setdefault(name, f"{name} ({where})")
    for cls, where in traced.modules.items():
        if f"Kb{cls}" not in library:
            missing.setdefault(f"Kb{cls}", f"Kb{cls} for nn.{cls} (model.{where})")
    attrs = frozenset(a for held in traced.submodules.values() for a in held)
    fusion = Fusion(traced.submodules, frozenset(library))
    # A Sequential is built as KbSequential only where a run of its modules fuses.
    known = frozenset(library) - (set() if traced.fusable_sequential else {"KbSequential"})

    def fuse(fn, qualname: str, imports) -> None:
        """Loops over time rolled up into recurrences first, then chains fused."""
        fusion.launchers.update(roll_recurrences(fn, fusion.attributes(qualname), imports))
        fusion.fuse(fn, qualname, imports)

    result = rewrite(problem.source, known, attrs, fuse)
    for use in result.uses:
        if use.name not in known:
            where = f"{use.function}, line {use.line}" if use.function else f"line {use.line}"
            missing.setdefault(use.name, f"{use.name} for {use.what} ({where})")
    reasons = [*missing.values(), *result.unsupported]
    names = {u.name for u in result.uses} | fusion.launchers
    reasons += clashes(result.text, names)
    return Examined(result.text, tuple(sorted(names)), tuple(reasons))


def clashes(text: str, names) -> list[str]:
    """The problem's top-level names that the embedded library defines too."""
    try:
        chosen = model_library.groups_for(names)
    except model_library.LibraryError:
        return []
    defined = set().union(*(g.defines for g in chosen))
    tree = ast.parse(text)
    own = {getattr(s, "name", None) for s in tree.body} | {
        t.id for s in tree.body if isinstance(s, ast.Assign) for t in s.targets
        if isinstance(t, ast.Name)
    }  # fmt: skip
    return [f"the problem defines {n}, a name of the kernel library" for n in sorted(own & defined)]


def refusal(problem) -> str | None:
    """Why this family does not recognise `problem` (None when it does)."""
    found = examine(problem)
    if not found.missing:
        return None
    return "the whole-model family lacks " + "; ".join(found.missing)


def match(problem) -> Match | None:
    try:
        ast.parse(problem.source)
    except SyntaxError:
        return None
    found = examine(problem)
    if found.missing:
        return None
    return Match(NAME, {"model_source": found.text, "kernels": found.names})


def model_new(text: str, graphed: bool = False) -> str:
    """ModelNew: Model itself (whose modules are Kb modules and whose forward launches the
    library's kernels), with Model's constructor and forward parameters; `graphed`, its forward
    replayed as a CUDA graph where it may be (hints/model_kernels/graphs.py)."""
    tree = ast.parse(text)
    model = next(s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Model")
    init, forward = (method_args(model, method) for method in ("__init__", "forward"))
    passed = call_arguments(forward, forward)
    call = f"super().forward({passed})"
    if graphed:
        call = f"kb_graphed(self, super().forward, {passed})"
    return "\n".join([
        "class ModelNew(Model):",
        f"    def __init__({ast.unparse(init)}):",
        f"        super().__init__({call_arguments(init, init)})",
        "",
        f"    def forward({ast.unparse(forward)}):",
        f"        return {call}",
    ]) + "\n"  # fmt: skip


# Parameters that only one group of the library reads, by that group.
GROUP_PARAMS = {"conv_precision": "conv", "recurrent": "recurrent"}


@dataclass(frozen=True)
class ModelStrategy(Strategy):
    """Renders the library's groups, the rewritten problem and ModelNew; its template is unused."""

    def for_match(self, match: Match) -> Strategy:
        """Without the parameters of a library group that the model does not use (conv_precision
        without a convolution, recurrent without a recurrent layer), nor the first-round
        variants and GPU defaults that set them."""
        where = model_library.providers()
        used = {where[name] for name in match.facts["kernels"]}
        idle = {name for name, group in GROUP_PARAMS.items() if group not in used}
        if not idle:
            return self
        return replace(
            self,
            params=tuple(p for p in self.params if p.name not in idle),
            gpu_coarse_variants=tuple(v for v in self.gpu_coarse_variants if not idle & set(v)),
            gpu_defaults={k: v for k, v in self.gpu_defaults.items() if k not in idle},
        )

    def render(self, match: Match, params: dict | None = None) -> str:
        chosen = {**self.defaults(), **(params or {})}
        graphed = chosen["graphs"] == "on"
        library = model_library.embed(
            {*match.facts["kernels"], *(("kb_graphed",) if graphed else ())},
            chosen["precision"], chosen["tiles"], chosen.get("conv_precision"),
            chosen.get("recurrent", "single"),
        )  # fmt: skip
        source = "\n\n".join([
            library.rstrip(),
            "# The problem's own code, rewritten (hints.model): nn modules built as the library's"
            "\n# Kb modules, torch computations as calls of its kb_ launchers.\n"
            + match.facts["model_source"].rstrip(),
            model_new(match.facts["model_source"], graphed),
        ])  # fmt: skip
        ast.parse(source)  # what we wrote must parse: anything else is a bug here
        return source


REWRITE = ModelStrategy(
    name="model.rewrite",
    family=NAME,
    applies="a whole model (layers, blocks, recurrent cells, attention, hand-written math) whose "
    "operators and torch modules the kernel library covers",
    addresses=("under-utilised",),
    explanation=(
        "Keep the model's own code and launch a Triton kernel for each of its operators and "
        "modules: products and convolutions tiled on tl.dot, reductions one program per row "
        "block, elementwise math one pass; a convolution's batch norm (in eval mode), residual "
        "add and activation fused into its epilogue, a linear layer's activation into its own; "
        "a recurrent cell written as a Python loop over time run as one sequence kernel."
    ),
    template="",
    params=(
        Param("precision", ("ieee", "tf32x3", "tf32"), "ieee"),
        # PyTorch's convolutions are cuDNN's, TF32 at its defaults: under strict on a GPU the
        # library's may be too (rounded to nearest, as cuDNN's are)
        Param("conv_precision", ("ieee", "tf32x3", "tf32"), "ieee", torch_precision="tf32"),
        # the products' tiles on a GPU (hints/model_kernels/common.py, KB_TILES)
        Param("tiles", ("small", "base", "large"), "base", tile=True),
        # a recurrent layer's steps on a GPU: one program per block of rows walks every unit, or
        # programs that own a tile of units each meet after each step (KB_RECURRENT)
        Param("recurrent", ("single", "spread"), "single"),
        # forward replayed as one CUDA graph on a GPU: a launch's host work, paid once
        Param("graphs", ("off", "on"), "off"),
    ),
    # On an H100, Triton 3.6 compiled the conv kernel's padded 3x3 products wrong at the base
    # and large plans and right at the small one (docs/results/kernelbench_level3_gpu/,
    # session 50; unpipelined since session 51, all are right): so that a plan the compiler gets
    # wrong does not end a search at its first candidate, a model's first round holds the small
    # plan too. A recurrent model starts on a GPU with its steps spread over programs, and one
    # program walking every step beside: on an H100 the second was 0.15-0.59x eager (session
    # 51), and spread searched 37_LSTMCn, 40_GRUHidden and 42_GRUBidirectionalHidden to
    # 5.0-5.9x the first's speed, 34's Elman loop to 1.3x (session 54; a plan whose programs do
    # not all fit on the GPU at once walks in one program anyway). And on a GPU a model's forward
    # is replayed as a CUDA graph: at KernelBench's batches most models launch dozens of kernels of
    # microseconds each (28_VisionTransformer: 60 a call, 0.27x eager at rung 0 on an H100,
    # whatever the tiles), where the launches' host work decides the time. Replayed, 28 took
    # 1.49 ms a call against 8.49 as written and 4.30 eager, and 32 0.45 against 7.09 and 3.48
    # (session 54, graph_check.py), so a GPU starts there, with forward as written beside.
    gpu_coarse_variants=({"tiles": "small"}, {"recurrent": "single"}, {"graphs": "off"}),
    gpu_defaults={"graphs": "on", "recurrent": "spread"},
)

FAMILY = Family(
    name=NAME,
    description="a whole model rewritten onto the kernel library's launchers and modules",
    match=match,
    strategies=(REWRITE,),
    fallback=True,
)
