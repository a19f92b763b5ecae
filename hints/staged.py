"""Staged composition: a reference that no family recognises whole, cut into a chain of stages
that each one recognises (hints.stages: from each statement, the longest run of statements with
at most one main operator and its elementwise neighbours that some family matches, posed as a
problem of its own), rendered as one module (hints.core.merge) whose ModelNew runs the stages'
kernels one after another, each stage allocating its result for the next."""

from __future__ import annotations

import ast
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hints import stages
from hints.base import Family, Match, Param, Strategy
from hints.core.binding import constructor_source
from hints.core.gemm import PRECISIONS
from hints.core.merge import body_lines, merge_modules

NAME = "staged"


def stage_families() -> list[Family]:
    """Every family but the compositions, in the library's order (the first that matches a stage
    renders it)."""
    import hints  # the package lists the families; importing it at the top would be a cycle

    return [f for f in hints.families() if not f.fallback]


def first_strategy(family: Family, match: Match) -> Strategy | None:
    return next((s for s in family.strategies if s.applies_to(match)), None)


def recognise_stage(problem, args, statements, ops, folder: Path, start: int, stop: int):
    """The stage over statements [start, stop) as a plain dict, or None: a run of views that
    ModelNew runs as it is (leaving any number of values, `b, c, h, w = x.shape` too), or a
    family's match of the run posed as a problem."""
    if stages.is_view_only(statements[start:stop]):
        code = "\n".join(ast.unparse(s.node) for s in statements[start:stop])
        return {"kind": "views", "code": code, "statements": (start, stop)}
    if sum(stages.is_main(o) for o in ops[start:stop]) > 1:
        return None
    params = tuple(a.arg for a in [*args.posonlyargs, *args.args])
    seg = stages.segment(statements, params, start, stop)
    if seg is None:
        return None
    where = {"statements": (start, stop), "inputs": seg.inputs, "output": seg.output}
    text = stages.stage_source(problem.source, args, statements, seg, problem.sizes)
    try:
        sub = stages.stage_problem(problem, folder, text, len(list(folder.iterdir())))
    except Exception:  # a run whose values are not tensors, or that the loader refuses
        return None
    for family in stage_families():
        found = family.match(sub)
        if found is not None and first_strategy(family, found) is not None:
            return {"kind": "family", "family": family.name, "facts": found.facts, **where}
    return None


def match(problem) -> Match | None:
    found = stages.forward_statements(problem.source)
    if found is None:
        return None
    args, statements = found
    try:
        ops = stages.statement_ops(problem, args, statements)
    except Exception:  # a statement that does not run alone on the meta device
        return None
    with tempfile.TemporaryDirectory(prefix="kb_stages_") as folder:
        chain = stages.cut(
            len(statements),
            lambda start, stop: recognise_stage(
                problem, args, statements, ops, Path(folder), start, stop
            ),
        )
    if chain is None or len(chain) < 2 or all(s[2]["kind"] == "views" for s in chain):
        return None
    return Match(
        NAME,
        {
            "stages": tuple(answer for _, _, answer in chain),
            "forward_params": ast.unparse(args),
            "init_source": constructor_source(problem.source),
        },
    )


def stage_strategies(match: Match) -> list[tuple[int, Strategy, Match]]:
    """(index, strategy, match) of each family stage: its family's first strategy."""
    families = {f.name: f for f in stage_families()}
    found = []
    for k, stage in enumerate(match.facts["stages"]):
        if stage["kind"] == "family":
            sub = Match(stage["family"], stage["facts"])
            found.append((k, first_strategy(families[stage["family"]], sub), sub))
    return found


def stage_sources(match: Match, precision: str) -> list[tuple[str, str]]:
    """(id, source) of each family stage's candidate, with `precision` for the stages whose
    strategy takes one (their tl.dot on fp32 operands)."""
    sources = []
    for k, strategy, sub in stage_strategies(match):
        params = {"precision": precision} if "precision" in strategy.defaults() else {}
        sources.append((f"stage {k}: {strategy.name}", strategy.render(sub, params)))
    return sources


def forward_lines(match: Match, classes: list[str]) -> list[str]:
    """ModelNew.forward: each stage in turn, family stages through their ModelNew's forward."""
    lines, members = [], iter(classes)
    for stage in match.facts["stages"]:
        if stage["kind"] == "views":
            lines += stage["code"].splitlines()
            continue
        call = f"{next(members)}.forward(self{''.join(f', {n}' for n in stage['inputs'])})"
        lines.append(f"{stage['output']} = {call}" if stage["output"] else f"return {call}")
    return [f"        {line}" for line in lines]


@dataclass(frozen=True)
class StagedStrategy(Strategy):
    """Renders the whole chain; its template is unused."""

    def reference_precision(self, match: Match) -> str:
        """TF32 where every stage that takes the chain's precision is computed in TF32 by
        PyTorch (convolutions), so a chain of a convolution and its epilogue may match cuDNN."""
        taking = [(s, sub) for _, s, sub in stage_strategies(match) if "precision" in s.defaults()]
        tf32 = bool(taking) and all(s.reference_precision(sub) == "tf32" for s, sub in taking)
        return "tf32" if tf32 else "fp32"

    def render(self, match: Match, params: dict | None = None) -> str:
        precision = {**self.defaults(), **(params or {})}["precision"]
        merged = merge_modules(stage_sources(match, precision), frozenset({"ModelNew"}))
        classes = [c.name for c in merged.classes]
        merged.imports.require("torch")
        parts = [
            "# Staged: ModelNew (Model's constructor, as every stage's ModelNew) runs each stage's",
            "# kernels in turn through that stage's forward, which allocates its result.",
            *merged.imports.lines(),
        ]
        for k, body in enumerate(merged.bodies):
            parts += ["", "", f"# stage member {k}", *body_lines(body)]
        parts += [
            "",
            "",
            "class ModelNew(torch.nn.Module):",
            match.facts["init_source"],
            f"    def forward({match.facts['forward_params']}):",
            *forward_lines(match, classes),
        ]
        source = "\n".join(parts) + "\n"
        ast.parse(source)  # what we wrote must parse: anything else is a bug here
        return source


CHAIN = StagedStrategy(
    name="staged.chain",
    family=NAME,
    applies="a chain of operators that no family fuses whole, each stage one that some family "
    "recognises (a convolution or product with its elementwise epilogue, a norm, a pooling, a "
    "reduction, a softmax, elementwise math)",
    addresses=("under-utilised",),
    explanation=(
        "Run each stage's Triton kernels one after another through intermediates in global "
        "memory; each stage fuses the elementwise operations its family fuses. Fusing two "
        "stages (a reduction into the producer's epilogue) would save one round trip of the "
        "intermediate through memory."
    ),
    template="",
    params=(Param("precision", PRECISIONS, "ieee"),),
)

FAMILY = Family(
    name=NAME,
    description="a chain of stages, each recognised by another family, run one after another",
    match=match,
    strategies=(CHAIN,),
    fallback=True,
)
