"""The deterministic parser/repair step: find the candidate module in an LLM reply and fix what
is safe to fix (missing imports, a ModelNew signature that differs from Model's), with ast only:
nothing here runs the code."""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from dataclasses import dataclass

from engine.problems import Problem

# Stable reason codes of a rejected reply (logged with a message saying what could not be fixed).
REASONS = ("no_code", "syntax_error", "no_modelnew", "unrepairable_signature")

PYTHON_FENCE_TAGS = frozenset({"", "python", "py", "python3"})

# Names a kernel module uses without importing them, and the import that binds each one.
STANDARD_IMPORTS = {
    "math": "import math",
    "torch": "import torch",
    "nn": "import torch.nn as nn",
    "F": "import torch.nn.functional as F",
    "triton": "import triton",
    "tl": "import triton.language as tl",
}

# Roots of annotations that are safe to copy from Model's signature into the candidate.
PORTABLE_ANNOTATION_ROOTS = frozenset(
    {"torch", "nn", "int", "float", "bool", "str", "list", "tuple", "dict", "None"}
)

BARE_CODE_STARTS = ("import ", "from ", "@", "class ", "def ")


class Rejection(Exception):
    """A reply that cannot become a candidate; `reason` is one of REASONS."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message

    def as_dict(self) -> dict:
        return {"reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class CodeBlock:
    code: str
    closed: bool  # False for a fence the reply never closed (a truncated reply)


def extract_candidate(
    reply_text: str, problem: Problem
) -> tuple[str | None, list[str], dict | None]:
    """The candidate source in `reply_text`, repaired to fit `problem`.

    Returns (source, repairs, None) or (None, repairs so far, {"reason", "message"}).
    """
    repairs: list[str] = []
    try:
        source, tree = pick_block(reply_text, repairs)
        source = adapt_signatures(source, tree, problem.source, repairs)
        source = add_missing_imports(source, repairs)
    except Rejection as rejection:
        return None, repairs, rejection.as_dict()
    return source, repairs, None


# ---------------------------------------------------------------- finding the code


def fenced_blocks(text: str) -> list[CodeBlock]:
    """Python code of each ``` fence (tagged python, py or untagged), in order."""
    blocks, tag, lines = [], None, []
    for line in text.splitlines():
        fence = line.strip().startswith("```")
        if tag is None and fence:
            tag, lines = line.strip()[3:].strip().lower(), []
        elif tag is not None and fence:
            if tag in PYTHON_FENCE_TAGS:
                blocks.append(CodeBlock(fence_code(lines), closed=True))
            tag = None
        elif tag is not None:
            lines.append(line)
    if tag in PYTHON_FENCE_TAGS and lines:
        blocks.append(CodeBlock(fence_code(lines), closed=False))
    return blocks


def fence_code(lines: list[str]) -> str:
    """A fence's lines as a module (dedented: fences inside list items are indented)."""
    return textwrap.dedent("\n".join(lines) + "\n")


def bare_code(text: str, repairs: list[str]) -> CodeBlock | None:
    """An unfenced reply: the code from its first code-looking line, trailing prose dropped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(BARE_CODE_STARTS)), None)
    if start is None:
        return None
    code_lines = lines[start:]
    for end in range(len(code_lines), 0, -1):
        code = "\n".join(code_lines[:end]) + "\n"
        if "class ModelNew" not in code:
            break
        if parse_or_none(code) is not None:
            if start > 0 or end < len(code_lines):
                repairs.append("dropped the prose around the unfenced code")
            return CodeBlock(code, closed=True)
    return CodeBlock("\n".join(code_lines) + "\n", closed=True)


def pick_block(text: str, repairs: list[str]) -> tuple[str, ast.Module]:
    """The block defining ModelNew: the last that parses, preferably with a @triton.jit kernel."""
    blocks = fenced_blocks(text)
    if not blocks:
        bare = bare_code(text, repairs)
        blocks = [bare] if bare is not None else []
    if not blocks:
        raise Rejection(
            "no_code",
            "the reply holds no Python code: expected one ```python block defining ModelNew",
        )
    ranked = []
    for index, block in enumerate(blocks):
        tree = parse_or_none(block.code)
        defines = defines_modelnew(tree) if tree else "class ModelNew" in block.code
        if defines:
            jit = tree is not None and has_triton_kernel(tree)
            ranked.append(((tree is not None, jit, block.closed, index), block, tree))
    if not ranked:
        raise Rejection(
            "no_modelnew",
            f"none of the reply's {len(blocks)} code block(s) defines `class ModelNew`: "
            "the candidate must define ModelNew(nn.Module)",
        )
    _, block, tree = max(ranked, key=lambda r: r[0])
    if tree is None:
        raise Rejection(
            "syntax_error", f"the code defining ModelNew does not parse: {syntax_error(block.code)}"
        )
    if len(blocks) > 1:
        position = blocks.index(block) + 1
        repairs.append(f"took code block {position} of {len(blocks)} (the one defining ModelNew)")
    if not block.closed:
        repairs.append("took the code of an unclosed fence (the reply was cut short)")
    return block.code, tree


def parse_or_none(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def syntax_error(code: str) -> str:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return "no error"


def defines_modelnew(tree: ast.Module) -> bool:
    return find_class(tree, "ModelNew") is not None


def find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return found[-1] if found else None


def find_method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    found = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[-1] if found else None


def has_triton_kernel(tree: ast.Module) -> bool:
    """Some function is decorated with triton.jit (possibly under autotune/heuristics)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if getattr(target, "attr", getattr(target, "id", None)) == "jit":
                    return True
    return False


# ---------------------------------------------------------------- signatures


def model_methods(problem_source: str) -> dict[str, ast.FunctionDef | None]:
    """Model's __init__ and forward from the reference source (None where Model has none)."""
    cls = find_class(ast.parse(problem_source), "Model")
    if cls is None:
        raise ValueError("the problem source defines no class Model")
    return {name: find_method(cls, name) for name in ("__init__", "forward")}


def signature_text(method: str, func: ast.FunctionDef | None) -> str:
    """`def forward(self, x: torch.Tensor) -> torch.Tensor`, as prompts show it."""
    if func is None:
        return f"def {method}(self)"
    returns = f" -> {ast.unparse(func.returns)}" if func.returns is not None else ""
    return f"def {method}({ast.unparse(func.args)}){returns}"


def parameter_names(args: ast.arguments) -> list[str]:
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]


def parameters_with_defaults(args: ast.arguments) -> list[tuple[ast.arg, ast.expr | None]]:
    positional = [*args.posonlyargs, *args.args]
    padded = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    return [
        *zip(positional, padded, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]


def portable_arguments(args: ast.arguments) -> str:
    """Model's parameter list, dropping annotations that name things a candidate may not import."""
    copy = ast.parse(f"def f({ast.unparse(args)}): pass").body[0].args
    for arg in [*copy.posonlyargs, *copy.args, *copy.kwonlyargs, copy.vararg, copy.kwarg]:
        if arg is not None and arg.annotation is not None:
            roots = {n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name)}
            if not roots <= PORTABLE_ANNOTATION_ROOTS:
                arg.annotation = None
    return ast.unparse(copy)


def adapt_signatures(source: str, tree: ast.Module, problem_source: str, repairs: list[str]) -> str:
    """Give ModelNew.__init__ and .forward Model's parameters, binding the candidate's own names
    at the top of each body, or reject what would change the meaning of the code."""
    reference = model_methods(problem_source)
    cls = find_class(tree, "ModelNew")
    edits: list[tuple[int, int, str]] = []  # (start, end, text) as character offsets
    offsets = LineOffsets(source)
    for method, ref in reference.items():
        ref_args = ref.args if ref is not None else ast.parse("def f(self): pass").body[0].args
        func = find_method(cls, method)
        if func is None:
            if method == "forward":
                raise Rejection("no_modelnew", "ModelNew has no forward method")
            if parameter_names(ref_args)[1:]:
                edits.append(added_init(cls, offsets, ref_args))
                repairs.append(f"added ModelNew.__init__({portable_arguments(ref_args)})")
            continue
        edits.extend(adapted_method(source, func, method, offsets, ref_args, repairs))
    if not edits:
        return source
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    if parse_or_none(source) is None:
        raise Rejection("unrepairable_signature", "adapting ModelNew's signature broke the code")
    return source


def adapted_method(source, func, method, offsets, ref_args, repairs) -> list[tuple[int, int, str]]:
    """Edits that give `func` Model's parameters, binding the candidate's own parameter names at
    the top of its body to what a call with Model's arguments would have given them."""
    where = f"ModelNew.{method}"
    if ref_args.vararg is not None or ref_args.kwarg is not None:
        return []  # Model itself takes *args/**kwargs: too unusual to adapt safely
    ref_names = parameter_names(ref_args)
    cand = parameters_with_defaults(func.args)
    star = func.args.vararg is not None or func.args.kwarg is not None
    if [a.arg for a, _ in cand] == ref_names and not star:
        return []
    positional_ref = [a.arg for a in [*ref_args.posonlyargs, *ref_args.args]]
    positional_count = len(func.args.posonlyargs) + len(func.args.args)
    cand_names = {a.arg for a, _ in cand}
    prologue, notes = [], []
    for index, (arg, default) in enumerate(cand):
        name = arg.arg
        if name in ref_names:
            continue
        same_place = (
            positional_ref[index] if index < min(positional_count, len(positional_ref)) else None
        )
        if same_place is not None and same_place not in cand_names:
            prologue.append(f"{name} = {same_place}")
            notes.append(f"`{name}` is now Model's `{same_place}`")
        elif default is not None:
            prologue.append(f"{name} = {ast.unparse(default)}")
            notes.append(f"`{name}` fixed to its default {ast.unparse(default)}")
        else:
            raise Rejection(
                "unrepairable_signature",
                f"{where} requires `{name}`, which Model.{method} does not take and which has no "
                f"default; ModelNew must take exactly Model's parameters ({', '.join(ref_names)})",
            )
    if func.args.vararg is not None:
        rest = positional_ref[positional_count:]
        packed = f"({', '.join(rest)}{',' if len(rest) == 1 else ''})"
        prologue.append(f"{func.args.vararg.arg} = {packed}")
        notes.append(f"`*{func.args.vararg.arg}` is now {packed}")
    if func.args.kwarg is not None:
        prologue.append(f"{func.args.kwarg.arg} = {{}}")
        notes.append(f"`**{func.args.kwarg.arg}` is now empty")
    new_args = portable_arguments(ref_args)
    edits = [(*parameter_span(source, func, offsets), new_args)]
    if prologue:
        edits.append(prologue_edit(func, offsets, prologue, where))
    repairs.append(
        f"{where}: took Model's parameters ({new_args})" + "".join(f"; {n}" for n in notes)
    )
    return edits


class LineOffsets:
    """Character offsets of ast positions (whose columns count UTF-8 bytes)."""

    def __init__(self, source: str):
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def line_start(self, lineno: int) -> int:
        return self.starts[lineno - 1]

    def at(self, lineno: int, byte_col: int) -> int:
        text = self.lines[lineno - 1].encode()[:byte_col].decode(errors="ignore")
        return self.starts[lineno - 1] + len(text)

    def indent(self, lineno: int) -> str:
        line = self.lines[lineno - 1]
        return line[: len(line) - len(line.lstrip())]


def parameter_span(source: str, func: ast.FunctionDef, offsets: LineOffsets) -> tuple[int, int]:
    """Character offsets just inside the parentheses of `def name(...)`."""
    header_start = offsets.at(func.lineno, func.col_offset)
    tokens = tokenize.generate_tokens(io.StringIO(source[header_start:]).readline)
    depth, opened = 0, None
    base = LineOffsets(source[header_start:])
    for token in tokens:
        if token.type == tokenize.OP and token.string == "(":
            depth += 1
            if opened is None:
                opened = header_start + base.starts[token.end[0] - 1] + token.end[1]
        elif token.type == tokenize.OP and token.string == ")":
            depth -= 1
            if depth == 0:
                return opened, header_start + base.starts[token.start[0] - 1] + token.start[1]
    raise Rejection("unrepairable_signature", f"cannot find the parameters of {func.name}")


def body_start(node: ast.FunctionDef | ast.ClassDef, offsets: LineOffsets, where: str):
    """Where new first statements of a body go (after a docstring), and their indentation."""
    first = node.body[0]
    indent = offsets.indent(first.lineno)
    if offsets.at(first.lineno, first.col_offset) != offsets.line_start(first.lineno) + len(indent):
        raise Rejection(
            "unrepairable_signature", f"{where} is written on one line; cannot adapt it"
        )
    is_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return offsets.line_start((first.end_lineno + 1) if is_docstring else first.lineno), indent


def prologue_edit(func: ast.FunctionDef, offsets: LineOffsets, lines: list[str], where: str):
    """Insert `lines` as the first statements of `func`."""
    at, indent = body_start(func, offsets, where)
    return at, at, "".join(f"{indent}{line}\n" for line in lines)


def added_init(cls: ast.ClassDef, offsets: LineOffsets, ref_args: ast.arguments):
    """A `def __init__` with Model's parameters, inserted as ModelNew's first method."""
    at, indent = body_start(cls, offsets, "ModelNew")
    text = (
        f"{indent}def __init__({portable_arguments(ref_args)}):\n{indent}    super().__init__()\n\n"
    )
    return at, at, text


# ---------------------------------------------------------------- imports


def bound_names(tree: ast.Module) -> set[str]:
    """Every name the module binds anywhere (imports, assignments, defs, parameters)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def add_missing_imports(source: str, repairs: list[str]) -> str:
    """Import torch, nn, F, triton, tl and math where the code uses them without an import."""
    tree = ast.parse(source)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    missing = [name for name in STANDARD_IMPORTS if name in used - bound_names(tree)]
    if not missing:
        return source
    lines = [STANDARD_IMPORTS[name] for name in missing]
    after = 0  # insert after a module docstring and `from __future__` imports
    for node in tree.body:
        is_docstring = (
            node is tree.body[0]
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
        )
        if is_docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno
        else:
            break
    at = LineOffsets(source).line_start(after + 1)
    repairs.append("added " + ", ".join(f"`{line}`" for line in lines))
    rest = source[at:]
    separator = "" if rest.startswith(("\n", "import ", "from ")) else "\n\n"
    return source[:at] + "".join(f"{line}\n" for line in lines) + separator + rest
