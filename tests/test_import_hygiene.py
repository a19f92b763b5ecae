"""Layers that only point down, and modules that import on their own.

Every import in engine/, kbtui/ and hints/ (lazy ones inside functions included) must point to
its own floor or a lower one, so that no package loop can close; the sandboxed runner imports
nothing of ours; the TUI reads the session folder only; the TUI imports neither torch nor triton
and the engine no Textual; within hints/, a family imports only the core, its own helpers and
the registry, the core imports only the core, and no import cycle closes; and every module
imports in a fresh interpreter without errors.
"""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
from pathlib import Path

from hints import FAMILY_HELPERS, FAMILY_MODULES

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "kbtui", "hints")
# Bottom to top: a module may import from its own floor and the floors below it.
FLOORS = (
    # errors, KERNELBRAIN_* variables and the interpreter's workarounds: stdlib only
    ("engine.errors", "engine.settings", "engine.cpython_fixes"),
    ("engine.runner",),  # mounted alone in the sandbox: stdlib, torch and triton only
    ("engine.problems", "engine.jobs", "engine.records", "engine.session_files"),
    ("engine.gate", "engine.timing", "hints", "engine.session"),
    ("engine.worker", "engine.generate"),
    ("engine.profiler",),
    ("engine.backends",),
    ("engine.search",),
    ("engine.compose",),  # the composition root: builds engines from sessions
    ("engine.bench", "engine.benchmarks"),
    ("kbtui",),
    ("engine.cli",),
)
RUNNER_MAY_IMPORT = {"torch", "triton"}
TUI_MAY_IMPORT_FROM_ENGINE = {"engine.session_files"}  # the session folder, as clients see it


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(path): path
    for package in PACKAGES
    for path in sorted((REPO / package).rglob("*.py"))
    if module_name(path) != "engine"  # the bare namespace: it imports engine.cpython_fixes only
}


def floor_of(module: str) -> int:
    for index, floor in enumerate(FLOORS):
        if any(module == name or module.startswith(name + ".") for name in floor):
            return index
    raise AssertionError(f"{module} is on no floor: add its package to FLOORS")


def imports(module: str) -> list[tuple[int, str | None, int]]:
    """(line, absolute target (a module name, third-party ones included), relative level) of
    every import."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:  # `from engine.search import report` imports a module
                target = f"{base}.{alias.name}"
                found.append((node.lineno, target if target in MODULES else base, node.level))
    return found


def test_every_import_points_to_its_own_floor_or_below():
    upward = []
    for module in MODULES:
        floor = floor_of(module)
        for line, target, _ in imports(module):
            if target.split(".")[0] in PACKAGES and floor_of(target) > floor:
                upward.append(f"{MODULES[module].relative_to(REPO)}:{line} imports {target}")
    assert not upward, "upward imports (FLOORS lists the layers):\n" + "\n".join(sorted(upward))


def test_the_runner_imports_only_the_standard_library_torch_and_triton():
    """It is mounted alone in the sandbox: its own modules only by relative import."""
    foreign = [
        f"{MODULES[module].relative_to(REPO)}:{line} imports {target}"
        for module in MODULES
        if module == "engine.runner" or module.startswith("engine.runner.")
        for line, target, level in imports(module)
        if not level and target.split(".")[0] not in sys.stdlib_module_names | RUNNER_MAY_IMPORT
    ]
    assert not foreign


def test_the_tui_reads_the_session_folder_only():
    reaching = [
        f"{MODULES[module].relative_to(REPO)}:{line} imports {target}"
        for module in MODULES
        if module.startswith("kbtui")
        for line, target, _ in imports(module)
        if target.startswith("engine") and target not in TUI_MAY_IMPORT_FROM_ENGINE
    ]
    assert not reaching


def in_hints(module: str) -> bool:
    return module == "hints" or module.startswith("hints.")


def hints_part(module: str) -> str:
    """Which part of the hint library `module` is (hints/__init__.py describes them): "registry"
    (the package itself), "core" (hints.base and hints.core), or the family it belongs to."""
    if module == "hints":
        return "registry"
    name = module.split(".")[1]
    if name in ("base", "core"):
        return "core"
    assert name in FAMILY_MODULES or name in FAMILY_HELPERS, (
        f"{module} is no part of the hint library: name it in hints.FAMILY_MODULES, in "
        "hints.FAMILY_HELPERS, or move it into hints/core/"
    )
    return FAMILY_HELPERS.get(name, name)


def hints_imports(module: str) -> list[tuple[int, str]]:
    """(line, module of ours) of every import of `module` into hints/ (lazy ones included)."""
    return [(line, target) for line, target, _ in imports(module) if in_hints(target)]


def test_families_import_the_core_and_their_own_modules_only():
    """A family may not import another family or its helpers (a composition finds them through
    hints.families()), and the core imports neither a family nor the registry."""
    allowed = {"core": {"core"}, "registry": {"core"}}
    crossing = []
    for module in (m for m in MODULES if in_hints(m)):
        part = hints_part(module)
        may = allowed.get(part, {"core", "registry", part})
        crossing += [
            f"{MODULES[module].relative_to(REPO)}:{line} ({part}) imports {target} "
            f"({hints_part(target)})"
            for line, target in hints_imports(module)
            if hints_part(target) not in may
        ]
    assert not crossing, "imports across the hint library's parts:\n" + "\n".join(crossing)


def test_hints_imports_close_no_cycle():
    """Lazy imports count: a loop closed inside a function (to dodge the cycle at import time)
    still ties its modules into one."""
    graph = {m: {t for _, t in hints_imports(m)} for m in MODULES if in_hints(m)}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        raise AssertionError(f"an import cycle in hints: {' -> '.join(error.args[1])}") from None


# Imported in the parent before forking, so that each child pays only for our own modules:
# third-party packages cannot hide an import error of ours (none of ours is loaded there).
PRELOADED = ("torch", "triton", "numpy", "duckdb", "textual.app", "rich")
IMPORT_EACH = """
import importlib, json, os, sys, traceback
for name in {preloaded}:
    importlib.import_module(name)
failures = {{}}
for module in {modules}:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(module)
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc(limit=-3).encode())
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        error = pipe.read().decode()
    if os.waitpid(pid, 0)[1] != 0:
        failures[module] = error or "the import ended the process"
print(json.dumps(failures))
"""


def test_every_module_imports_on_its_own():
    """Each module in a fresh interpreter (forked before any module of ours was imported): an
    import loop or a missing import shows here even when the suite's import order hides it.
    `__main__` modules are programs, not modules to import."""
    modules = sorted(m for m in MODULES if not m.endswith("__main__"))
    code = IMPORT_EACH.format(preloaded=PRELOADED, modules=modules)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr
    failures = json.loads(out.stdout.splitlines()[-1])
    assert not failures, "\n".join(f"{m}:\n{e}" for m, e in failures.items())


def modules_after(imports: str) -> set[str]:
    code = f"import sys, {imports}; print('\\n'.join(sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


def test_tui_imports_neither_torch_nor_triton():
    loaded = modules_after("kbtui.app, engine.cli.attach")
    assert "kbtui.app" in loaded
    assert not {"torch", "triton", "duckdb"} & loaded


def test_engine_imports_no_textual():
    """Every engine module at once (attach and run load the TUI when they start it, not before)."""
    engine = [m for m in MODULES if m.startswith("engine") and not m.endswith("__main__")]
    loaded = modules_after(", ".join(engine))
    assert "engine.search.engine" in loaded
    assert not {m for m in loaded if m == "textual" or m.startswith("textual.")}
