"""The cheap half of the gate, on the engine side: reads the candidate's AST, never runs it.

Run-time tricks that a syntax tree cannot see (`x / y` on tensors, `getattr` chains, operators
reached through modules, native code reached through values) are caught again in the worker and
its runner (engine.gate.correctness, engine.runner.native_guard).
"""

from __future__ import annotations

import ast
import functools

from engine.gate.reasons import Rejection
from engine.problems.trace import canonical_op, expand_equivalents

# Top-level modules a candidate may import: enough for Triton kernels, nothing that reaches
# processes, the network, raw memory or other kernel languages.
ALLOWED_IMPORTS = frozenset(
    "__future__ torch triton math typing functools itertools dataclasses collections enum "
    "operator numbers abc warnings contextlib os sys".split()
)
# `os` and `sys` are allowed for these harmless members only.
ALLOWED_MEMBERS = {
    "os": frozenset("environ getenv path cpu_count sep pathsep linesep name".split()),
    "sys": frozenset("version_info version platform maxsize float_info byteorder".split()),
}
# torch members that bypass the operator check, load native code, touch files or the network,
# or change the reference's precision behind its back.
FORBIDDEN_TORCH = frozenset(
    "ops library classes utils hub compile jit load save multiprocessing distributed backends "
    "set_float32_matmul_precision cuda.nccl cuda.jiterator".split()
)
# `torch.utils` is mostly harmless; only these submodules are.
ALLOWED_TORCH_UTILS = frozenset("data checkpoint".split())
FORBIDDEN_BUILTINS = frozenset(
    "eval exec compile __import__ globals vars open breakpoint input memoryview".split()
)
# Attributes that walk from an object to frames, globals or builtins (sandbox escapes).
ESCAPE_ATTRIBUTES = frozenset(
    "__subclasses__ __globals__ __builtins__ __code__ __closure__ __dict__ __getattribute__ "
    "__loader__ __spec__ __import__ __bases__ __mro__ f_globals f_locals f_back f_builtins "
    "gi_frame tb_frame cr_frame".split()
)
ATTRIBUTE_BUILTINS = frozenset("getattr setattr delattr hasattr".split())
# Method names of Python's own containers and strings: `s.add(x)` may not be a tensor op, so
# these are left to the run-time check.
BUILTIN_METHOD_NAMES = frozenset(
    name for t in (set, list, dict, str, tuple, int, float) for name in dir(t)
)
# Modules that load native code or reach raw memory, wherever a path or an attribute names them
# (`torch.ctypes` is ctypes: torch imported it).
NATIVE_CODE_MODULES = frozenset("ctypes _ctypes cffi _cffi_backend mmap importlib _imp imp".split())
# Triton's members that build, load or launch native code, redirect its compilers or write its
# cache: a candidate's kernels are compiled and launched by Triton itself.
FORBIDDEN_TRITON = frozenset(
    "runtime.build runtime.driver runtime.cache backends compiler tools knobs profiler "
    "instrumentation plugins".split()
)
# Triton's native build, load and launch entry points, by name, whatever they are reached from.
TRITON_NATIVE_ENTRY_POINTS = frozenset(
    "compile_module_from_src compile_module_from_file compile_so_from_src compile_so_from_file "
    "load_binary launcher_cls make_launcher".split()
)
# What of those reads the device's properties or names exceptions, as Triton's tutorials do.
TRITON_QUERIES = frozenset(
    "runtime.driver.active.utils.get_device_properties runtime.driver.active.get_current_device "
    "runtime.driver.active.get_current_target runtime.driver.active.get_active_torch_device "
    "compiler.errors".split()
)
# `operator` members that look attributes up by strings the syntax tree cannot follow.
HIDDEN_LOOKUPS = frozenset("attrgetter methodcaller".split())
TRITON_DECORATORS = frozenset(
    "triton.jit triton.autotune triton.heuristics triton.runtime.jit.jit".split()
)


def static_check(problem, source: str) -> Rejection | None:
    """The first rule the candidate breaks, or None when the syntax tree looks acceptable."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return Rejection(
            "syntax_error", f"line {exc.lineno}: {exc.msg}; fix the Python syntax and resubmit"
        )
    scan = _Scan(tree)
    return (
        scan.forbidden()
        or _check_model_new(tree, problem.source)
        or scan.kernel_launch()
        or scan.replaced_calls(
            expand_equivalents(problem.replaces) - set(problem.allowed_torch_ops)
        )
    )


def _dotted(node) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; `getattr(a, "b")` -> ["a", "b"]; None for anything else."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else [*base, node.attr]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        base = _dotted(node.args[0])
        return None if base is None else [*base, node.args[1].value]
    return None


class _Scan:
    """Import aliases and Triton kernels of one module, and the rule checks over them."""

    def __init__(self, tree: ast.Module):
        self.nodes = list(ast.walk(tree))
        self.aliases: dict[str, str] = {}  # local name -> dotted path it was imported as
        self.imports: list[tuple[ast.AST, str]] = []
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports.append((node, a.name))
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for a in node.names:
                    self.imports.append((node, f"{module}.{a.name}"))
                    self.aliases[a.asname or a.name] = f"{module}.{a.name}"
        self.kernels = {
            node.name: node
            for node in self.nodes
            if isinstance(node, ast.FunctionDef)
            and any(self.resolve(d) in TRITON_DECORATORS for d in node.decorator_list)
        }
        self.in_kernel = {
            id(inner) for k in self.kernels.values() for inner in ast.walk(k) if inner is not k
        }
        # setup code: a ModelNew may build its parameters with the replaced operator (Swin's
        # `torch.log` of its logit scale); what forward reaches is checked at run time
        self.in_init = {
            id(inner)
            for node in self.nodes
            if isinstance(node, ast.FunctionDef) and node.name == "__init__"
            for inner in ast.walk(node)
        }
        # nodes that a longer attribute chain goes on from, and nodes that are called
        self.inner = {id(n.value) for n in self.nodes if isinstance(n, ast.Attribute)}
        self.called = {id(n.func) for n in self.nodes if isinstance(n, ast.Call)}

    def resolve(self, node) -> str | None:
        """The dotted path an expression names through the imports (`F.softmax` ->
        `torch.nn.functional.softmax`), or None when it is not rooted at an import."""
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "getattr"
        ):
            node = node.func
        parts = _dotted(node)
        if not parts or parts[0] not in self.aliases:
            return None
        return ".".join([self.aliases[parts[0]], *parts[1:]])

    def forbidden(self) -> Rejection | None:
        for node, name in self.imports:
            native, reason = _native_path(name, inner=True), _forbidden_path(name)
            if native or reason:
                return _reject(node, "native_code" if native else "forbidden_import",
                               native or reason)  # fmt: skip
        for node in self.nodes:
            native, reason = self._native_node(node), self._forbidden_node(node)
            if native or reason:
                return _reject(node, "native_code" if native else "forbidden_import",
                               native or reason)  # fmt: skip
        return None

    def _native_node(self, node) -> str | None:
        """Native code an attribute reaches by its name (whatever it is reached from), or a path
        through the imports reaches."""
        name = node.attr if isinstance(node, ast.Attribute) else _constant_getattr(node)
        if name in NATIVE_CODE_MODULES or name in TRITON_NATIVE_ENTRY_POINTS:
            return f"`{name}` loads or launches native code"
        if isinstance(node, ast.Attribute | ast.Name) or name is not None:
            path = self.resolve(node)
            return _native_path(path, id(node) in self.inner) if path else None
        return None

    def _forbidden_node(self, node) -> str | None:
        if isinstance(node, ast.Attribute) and node.attr in ESCAPE_ATTRIBUTES:
            return f"`{node.attr}` reaches interpreter internals"
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            return "`__builtins__` reaches interpreter internals"
        if (isinstance(node, ast.Name) and node.id in ATTRIBUTE_BUILTINS
                and id(node) not in self.called and node.id not in self.aliases):  # fmt: skip
            return f"`{node.id}` passed on as a value hides what it reaches"
        if isinstance(node, ast.Attribute | ast.Name):
            path = self.resolve(node)
            return _forbidden_path(path) if path else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = node.func.id
            if fn in FORBIDDEN_BUILTINS and fn not in self.aliases:
                return f"the builtin `{fn}()` runs dynamic code or touches files"
            if fn in ATTRIBUTE_BUILTINS and not (
                len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                return f"`{fn}` with a computed attribute name hides what it reaches"
            if fn == "getattr":
                path = self.resolve(node)
                return _forbidden_path(path) if path else None
        return None

    def kernel_launch(self) -> Rejection | None:
        if not self.kernels:
            return Rejection(
                "no_triton_kernel",
                "no @triton.jit function found; write the computation as a @triton.jit kernel "
                "and launch it from ModelNew.forward with kernel[grid](...)",
            )
        for node in self.nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                target = node.func.value
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                if name in self.kernels:
                    return None
        names = ", ".join(sorted(self.kernels))
        return Rejection(
            "no_triton_kernel",
            f"the @triton.jit function(s) {names} are never launched; call "
            "kernel[grid](...) from ModelNew.forward",
        )

    def replaced_calls(self, replaced: frozenset[str]) -> Rejection | None:
        for node in self.nodes:
            if id(node) in self.in_kernel or id(node) in self.in_init:
                continue
            op = self._torch_op(node) or self._method_op(node)
            if op and canonical_op(op.split(".")[-1]) in replaced:
                return Rejection(
                    "calls_replaced_operator",
                    f"line {node.lineno}: uses `{op}`, which is the PyTorch operator this "
                    "problem replaces; compute it in a @triton.jit kernel instead",
                )
        return None

    def _torch_op(self, node) -> str | None:
        is_getattr = isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr"
        if not (is_getattr or isinstance(node, ast.Attribute | ast.Name)):
            return None
        path = self.resolve(node)
        return path if path and path.startswith("torch.") else None

    def _method_op(self, node) -> str | None:
        """`x.softmax(...)` on something that is not an imported module nor `self`."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return None
        name = node.func.attr
        root = _dotted(node.func.value)
        if name in BUILTIN_METHOD_NAMES or (root and root[0] in {"self", *self.aliases}):
            return None
        return name


def _private(parts: list[str]) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def _reaches(parts: list[str], members: frozenset[str]) -> bool:
    """Whether a path below its root (`torch.cuda.nccl` -> cuda, cuda.nccl) is among `members`,
    or private."""
    return parts[1] in members or ".".join(parts[1:3]) in members or _private(parts[1:])


def _constant_getattr(node) -> str | None:
    """The attribute name of `getattr(x, "name")`, or None for anything else."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)):  # fmt: skip
        return node.args[1].value
    return None


def _forbidden_path(path: str) -> str | None:
    """Why an imported dotted path is off limits, or None."""
    parts = path.split(".")
    root = parts[0]
    if root == "" or root not in ALLOWED_IMPORTS:
        allowed = ", ".join(sorted(ALLOWED_IMPORTS - {"__future__"}))
        return f"imports `{path}`; a candidate may import only {allowed}"
    if root in ALLOWED_MEMBERS and len(parts) > 1 and parts[1] not in ALLOWED_MEMBERS[root]:
        return f"`{path}` reaches processes, files or the interpreter's internals"
    if root == "operator" and len(parts) > 1 and parts[1] in HIDDEN_LOOKUPS:
        return f"`{path}` looks attributes up by strings, which hides what it reaches"
    if root == "torch" and len(parts) > 1:
        member = parts[1]
        if member == "utils" and len(parts) > 2 and parts[2] in ALLOWED_TORCH_UTILS:
            return None
        if member == "utils" and len(parts) == 2:
            return None
        if _reaches(parts, FORBIDDEN_TORCH):
            return (
                f"`{path}` bypasses the operator check, loads native code, touches files or "
                "changes PyTorch's precision settings"
            )
    return None


def _native_path(path: str, inner: bool) -> str | None:
    """Why a dotted path reaches native code, or None. An `inner` path leads on to a longer one,
    judged in its turn: `triton.runtime.driver` is allowed on the way to a query."""
    parts = path.split(".")
    reached = next((p for p in parts if p in NATIVE_CODE_MODULES), None)
    if reached:
        through = "" if path == reached else f" (through `{reached}`)"
        return f"`{path}`{through} loads native code or reaches raw memory"
    if parts[0] != "triton" or len(parts) == 1:
        return None
    member = ".".join(parts[1:])
    if any(member == q or member.startswith(q + ".") for q in TRITON_QUERIES):
        return None
    if inner and any(q.startswith(member + ".") for q in TRITON_QUERIES):
        return None
    if _reaches(parts, FORBIDDEN_TRITON):
        return f"`{path}` reaches Triton's build, driver, loader or compiler internals"
    return None


def _reject(node, reason: str, why: str) -> Rejection:
    remedy = {
        "forbidden_import": "candidates compute with torch and triton only",
        "native_code": "candidates compute in @triton.jit kernels that Triton launches",
    }[reason]
    return Rejection(reason, f"line {node.lineno}: {why}; remove it ({remedy})")


def _params(fn: ast.FunctionDef | None) -> list[tuple[str, bool]]:
    """(name, has default) for each positional parameter after `self`."""
    if fn is None:
        return []
    args = [*fn.args.posonlyargs, *fn.args.args][1:]
    first_default = len(args) - len(fn.args.defaults)
    return [(a.arg, i >= first_default) for i, a in enumerate(args)]


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def _find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _describe(params: list[tuple[str, bool]]) -> str:
    return "(" + ", ".join(f"{n}=..." if d else n for n, d in params) + ")"


@functools.lru_cache(maxsize=64)
def _model_signature(problem_source: str) -> dict | None:
    """Parameters of the problem's Model.__init__ and Model.forward (None without a Model)."""
    model = _find_class(ast.parse(problem_source), "Model")
    if model is None:
        return None
    methods = _methods(model)
    return {m: _params(methods.get(m)) for m in ("__init__", "forward")}


def _check_model_new(tree: ast.Module, problem_source: str) -> Rejection | None:
    new = _find_class(tree, "ModelNew")
    if new is None:
        return Rejection(
            "missing_modelnew",
            "no top-level `class ModelNew(nn.Module)`; define it with the same constructor "
            "and forward parameters as the problem's Model",
        )
    wanted = _model_signature(problem_source)
    if wanted is None:
        return None
    mine = _methods(new)
    for method in ("__init__", "forward"):
        want, got = wanted[method], _params(mine.get(method))
        required = sum(1 for _, d in want if not d)
        shared = min(len(got), len(want))
        names_ok = [n for n, _ in got[:shared]] == [n for n, _ in want[:shared]]
        defaults_ok = all(g or not w for (_, w), (_, g) in zip(want, got, strict=False))
        extra_ok = all(d for _, d in got[len(want) :])
        if not (names_ok and defaults_ok and extra_ok and len(got) >= required):
            line = mine[method].lineno if method in mine else new.lineno
            return Rejection(
                "signature_mismatch",
                f"line {line}: ModelNew.{method}{_describe(got)} does not match "
                f"Model.{method}{_describe(want)}; take the same parameters in the same order "
                "(those with defaults may be left out)",
            )
    return None
