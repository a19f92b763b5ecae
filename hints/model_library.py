"""The whole-model family's kernel library as embeddable source: each group of hints/model_kernels
(one module per group), the `kb_` launchers and `Kb` modules it defines (read from its top-level
definitions), and the text of the groups a candidate needs under one shared header, each group
after the groups it imports from."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import hints.model_kernels

KERNELS = Path(hints.model_kernels.__file__).parent
PACKAGE = "hints.model_kernels"
# What every candidate imports; a group's own imports of these are dropped.
HEADER_IMPORTS = (
    "import math",
    "import torch",
    "import torch.nn as nn",
    "import triton",
    "import triton.language as tl",
)
# common.py's settings that each candidate sets in its header: tl.dot's input precisions on fp32
# (convolutions apart) and the products' tile plan.
SETTINGS = {
    "KB_DOT_PRECISION": "tl.dot's input precision on fp32",
    "KB_CONV_PRECISION": "the convolutions' tl.dot input precision on fp32",
    "KB_TILES": "the products' tile plan on a GPU",
    "KB_RECURRENT": "how a recurrent layer's steps spread over programs on a GPU",
}


class LibraryError(ValueError):
    """A group module that breaks the library's contract (the message says how)."""


@dataclass(frozen=True)
class Group:
    """One group module: its top-level names, the groups it imports names from, and its source
    with imports, docstring and the settings' assignments taken out."""

    name: str
    defines: frozenset[str]
    requires: tuple[str, ...]
    other_imports: tuple[str, ...]  # imports beside the header's and the package's
    text: str

    @property
    def public(self) -> frozenset[str]:
        return frozenset(n for n in self.defines if is_public(n))


def is_public(name: str) -> bool:
    """A launcher (`kb_relu`) or a module (`KbConv2d`): what rewritten model code calls."""
    return name.startswith(("kb_", "Kb"))


def defined_names(tree: ast.Module) -> set[str]:
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def package_import(stmt, group: str) -> str | None:
    """The group a `from hints.model_kernels.<group> import ...` names (None for other imports)."""
    if not isinstance(stmt, ast.ImportFrom) or not (stmt.module or "").startswith(PACKAGE + "."):
        return None
    if any(alias.asname for alias in stmt.names):
        raise LibraryError(f"{group}.py renames an import from {stmt.module}: import names as is")
    return stmt.module.removeprefix(PACKAGE + ".")


def is_setting_assignment(stmt) -> bool:
    return isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id in SETTINGS for t in stmt.targets
    )


def read_group(path: Path) -> Group:
    source = path.read_text()
    tree = ast.parse(source, str(path))
    dropped, requires, others = set(), [], []
    for k, stmt in enumerate(tree.body):
        docstring = k == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        imported = isinstance(stmt, ast.Import | ast.ImportFrom)
        if docstring or imported or is_setting_assignment(stmt):
            dropped.update(range(stmt.lineno, stmt.end_lineno + 1))
        if not imported:
            continue
        required = package_import(stmt, path.stem)
        if required:
            requires.append(required)
        elif ast.unparse(stmt) not in HEADER_IMPORTS:
            others.append(ast.unparse(stmt))
    kept = [line for n, line in enumerate(source.splitlines(), 1) if n not in dropped]
    return Group(path.stem, frozenset(defined_names(tree)), tuple(requires), tuple(others),
                 squeeze_blank_lines(kept))  # fmt: skip


def squeeze_blank_lines(lines: list[str]) -> str:
    """The lines with leading and trailing blank lines gone and at most two in a row."""
    out: list[str] = []
    for line in lines:
        if line.strip() or (out and any(s.strip() for s in out[-2:])):
            out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


@functools.cache
def _cached_group(path: Path, mtime_ns: int) -> Group:
    return read_group(path)


def state(folder: Path = KERNELS) -> tuple:
    """What the library's files are now (names and modification times)."""
    return tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.py")))


def groups(folder: Path = KERNELS) -> dict[str, Group]:
    """Every group module of `folder`, by name (re-read when a file changes)."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        if path.stem != "__init__":
            found[path.stem] = _cached_group(path, path.stat().st_mtime_ns)
    return found


def providers(folder: Path = KERNELS) -> dict[str, str]:
    """Each public name (`kb_relu`, `KbConv2d`) -> the group that defines it."""
    found = {}
    for group in groups(folder).values():
        for name in group.public:
            if name in found:
                raise LibraryError(
                    f"{name} is defined by both {found[name]}.py and {group.name}.py"
                )
            found[name] = group.name
    return found


def groups_for(names, folder: Path = KERNELS) -> list[Group]:
    """The groups that define `names`, each after the groups it imports from."""
    library, where = groups(folder), providers(folder)
    missing = sorted(n for n in names if n not in where)
    if missing:
        raise LibraryError(f"the kernel library defines no {', '.join(missing)}")
    ordered: list[Group] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise LibraryError(f"groups import each other in a cycle: {' -> '.join(path)}")
        if name not in library:
            raise LibraryError(f"{path[-1]}.py imports from {name}.py, which does not exist")
        if library[name] in ordered:
            return
        for required in library[name].requires:
            visit(required, (*path, name))
        ordered.append(library[name])

    for name in sorted({where[n] for n in names}):
        visit(name, ())
    return ordered


def embed(names, precision: str, tiles: str = "base", conv_precision: str | None = None,
          recurrent: str = "single", folder: Path = KERNELS) -> str:  # fmt: skip
    """The header (imports and SETTINGS; the convolutions' precision is `precision` unless
    `conv_precision` is given) and the source of every group that `names` need: standalone
    candidate code."""
    chosen = groups_for(names, folder)
    extra = dict.fromkeys(line for g in chosen for line in g.other_imports)
    future = [line for line in extra if line.startswith("from __future__")]
    parts = [*future, *HEADER_IMPORTS, *(line for line in extra if line not in future)]
    values = (precision, conv_precision or precision, tiles, recurrent)
    parts.append("")
    parts += [f"{name} = {value!r}  # {what}"
              for (name, what), value in zip(SETTINGS.items(), values, strict=True)]  # fmt: skip
    for group in chosen:
        parts += ["", "", f"# hints/model_kernels/{group.name}.py", group.text]
    return "\n".join(parts) + "\n"
