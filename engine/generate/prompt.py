"""The prompt builder: what an LLM is told about the problem, the kernel to improve, what failed,
which expert strategies fit, and the contract its reply must meet. Same request, same messages."""

from __future__ import annotations

import hashlib
import json

import hints
from engine.generate.base import GenerationRequest, ParentInfo
from engine.generate.repair import model_methods, signature_text
from engine.problems import Problem
from hints.base import SYMPTOMS, Family, Match, Strategy

MAX_STRATEGIES = 6  # enough to cover the structural moves without drowning the kernel in text
MAX_RULE_HINTS = 3  # ncu's rules are ordered by estimated speedup; the tail is noise
MAX_FAILURES = 6  # the most recent ones: older failures are usually fixed already
MAX_SIBLING_SOURCES = 2  # slower siblings shown in full; the rest only by their speedup
MAX_FACT_CHARS = 40  # longer match facts are code snippets for templates, not for the model
MAX_FACT_ITEMS = 4
MAX_MESSAGE_CHARS = 400  # an error message longer than this is a traceback: keep its head
# The output contract's line on the session's precision policy (engine.problems.PRECISION_POLICIES).
PRECISION_CONTRACT = {
    "strict": "- computes fp32 inputs to fp32 accuracy, as this session's precision policy is "
    "strict: its error against float64 may be at most twice PyTorch's own, so every `tl.dot` on "
    'fp32 operands passes `input_precision="ieee"` or `"tf32x3"` (plain TF32 fails a GEMM);',
    "tf32": "- may run `tl.dot` on fp32 operands on TF32 tensor cores "
    '(`input_precision="tf32"` or `"tf32x3"`), as this session\'s precision policy is tf32, '
    "with its error within the problem's tf32 tolerance;",
}

SYSTEM_PROMPT = """\
You are an expert GPU kernel engineer. You rewrite PyTorch reference modules as fast, correct \
Triton kernels for NVIDIA GPUs. You reason about memory traffic, parallel decomposition, tiling \
and occupancy, and you answer with one complete Python module and nothing the user has to fix."""


def build_prompt(request: GenerationRequest) -> list[dict]:
    """Chat messages for one generation request."""
    problem = request.problem
    sections = [problem_section(problem)]
    tags = diagnosis_tags(request.parent.diagnosis if request.parent else None)
    strategies = strategy_section(hints.match_problem(problem), tags)
    if strategies:
        sections.append(strategies)
    if request.parent is not None:
        sections.append(parent_section(request.parent))
    if request.failures or request.slower_siblings:
        sections.append(history_section(request.failures, request.slower_siblings))
    sections.append(task_section(request))
    sections.append(contract_section(problem))
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(sections)},
    ]


def prompt_sha256(messages: list[dict]) -> str:
    canonical = json.dumps(messages, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def plain(value) -> str:
    """A measurement or diagnosis value as short text."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{key} {plain(item)}" for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(item) for item in value)
    return str(value)


def fenced(source: str) -> str:
    return f"```python\n{source.rstrip()}\n```"


def problem_section(problem: Problem) -> str:
    lines = [f"## The problem: {problem.name}", "The PyTorch reference:", fenced(problem.source)]
    if problem.replaces:
        lines.append("It computes with these PyTorch operators: " + ", ".join(problem.replaces))
    lines.append("Input sizes (keyword arguments of get_inputs/get_init_inputs) and outputs:")
    for size in problem.sizes:
        params = ", ".join(f"{k}={v}" for k, v in size.params.items()) or "defaults"
        outputs = "; ".join(
            f"{shape} {dtype}" for shape, dtype in problem.output_specs.get(size.label, [])
        )
        lines.append(f"- {size.label} ({size.tier}): {params} -> {outputs or 'see Model'}")
    return "\n".join(lines)


def diagnosis_tags(diagnosis: dict | None) -> frozenset[str]:
    """The SYMPTOMS a diagnosis names (its kind and its tags)."""
    if not diagnosis:
        return frozenset()
    named = [diagnosis.get("kind"), *diagnosis.get("tags", [])]
    return frozenset(tag for tag in named if tag in SYMPTOMS)


def select_strategies(
    matches: list[tuple[Family, Match]], tags: frozenset[str], limit: int = MAX_STRATEGIES
) -> list[Strategy]:
    """Strategies that apply to the matches, those addressing the diagnosed symptoms first."""
    fitting = [s for family, match in matches for s in family.strategies if s.applies_to(match)]
    ranked = sorted(
        enumerate(fitting), key=lambda pair: (not tags & set(pair[1].addresses), pair[0])
    )
    return [strategy for _, strategy in ranked[:limit]]


def strategy_section(matches: list[tuple[Family, Match]], tags: frozenset[str]) -> str:
    strategies = select_strategies(matches, tags)
    if not strategies:
        return ""
    lines = ["## Expert strategies that fit this problem"]
    for family, match in matches:
        facts = ", ".join(f"{k}={v}" for k, v in match.facts.items() if is_short_fact(v))
        lines.append(f"Recognised as {family.name} ({facts}): {family.description}")
    for strategy in strategies:
        addressed = sorted(tags & set(strategy.addresses))
        why = f" [addresses the diagnosed {', '.join(addressed)}]" if addressed else ""
        lines.append(
            f"- {strategy.name}{why}: {strategy.explanation} (Applies when {strategy.applies}.)"
        )
    return "\n".join(lines)


def is_short_fact(value) -> bool:
    """A fact worth a prompt's words: a number, a flag, a short name or a short list of numbers
    (match facts also carry code snippets and per-size views that only templates need)."""
    if isinstance(value, (list, tuple)):
        return len(value) <= MAX_FACT_ITEMS and all(isinstance(v, (int, float)) for v in value)
    return (
        value is None
        or isinstance(value, (bool, int, float))
        or (isinstance(value, str) and "\n" not in value and len(value) <= MAX_FACT_CHARS)
    )


def parent_section(parent: ParentInfo) -> str:
    lines = [
        f"## The kernel to improve: candidate {parent.id} (from {parent.origin})",
        fenced(parent.source),
    ]
    if parent.measurements:
        lines.append("Its measurements (speedup over PyTorch; above 1 is faster):")
        lines.extend(measurement_line(m) for m in parent.measurements)
    lines.append(diagnosis_text(parent.diagnosis))
    return "\n".join(lines)


def measurement_line(m: dict) -> str:
    text = f"- rung {m.get('rung')}: {plain(m.get('speedup'))}x"
    if m.get("speedup_ci"):
        low, high = m["speedup_ci"]
        text += f" (95% interval {plain(low)}x to {plain(high)}x)"
    if m.get("cv") is not None:
        text += f", run-to-run variation {100 * m['cv']:.1f}%"
    if m.get("per_shape"):
        text += f"; per shape: {plain(m['per_shape'])}"
    return text


def diagnosis_text(diagnosis: dict | None) -> str:
    """The profiler's diagnosis (engine.profiler) in plain language, with ncu's top rule hints."""
    if not diagnosis:
        return "It has not been profiled yet."
    if diagnosis.get("status") != "ok":
        return f"It could not be profiled: {diagnosis.get('why') or 'no reason given'}."
    kind, summary = diagnosis.get("kind", "unknown"), diagnosis.get("summary", "")
    lines = [f"Profiler diagnosis: {kind}. {summary}".rstrip()]
    evidence = diagnosis.get("evidence") or []
    if isinstance(evidence, dict):
        evidence = [f"{key}: {plain(value)}" for key, value in evidence.items()]
    lines.extend(f"- {plain(item)}" for item in evidence)
    stalls = diagnosis.get("stalls") or []
    if stalls:
        lines.append("Top warp stalls: " + ", ".join(stall_text(s) for s in stalls))
    rule_hints = diagnosis.get("rule_hints") or []
    if rule_hints:
        lines.append("Nsight Compute's top rule hints:")
        lines.extend(f"- {rule_hint_text(h)}" for h in rule_hints[:MAX_RULE_HINTS])
    return "\n".join(lines)


def stall_text(stall) -> str:
    """[reason, share of stall cycles] as "long_scoreboard 62%"."""
    if isinstance(stall, (list, tuple)) and len(stall) == 2 and isinstance(stall[1], float):
        return f"{stall[0]} {stall[1]:.0%}"
    return plain(stall)


def rule_hint_text(hint) -> str:
    """One ncu rule finding: its name, its text and the share of time ncu thinks it costs."""
    if not isinstance(hint, dict):
        return plain(hint)
    text = f"{hint.get('rule', 'rule')}: {clipped(hint.get('text', ''))}"
    if hint.get("estimated_speedup"):
        text += f" (ncu estimates up to {hint['estimated_speedup']:.0f}% of the time)"
    return text


def clipped(message: str) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + " ..."


def history_section(failures: list[dict], slower_siblings: list[dict]) -> str:
    lines = ["## What did not work before (do not repeat it)"]
    for failure in failures[-MAX_FAILURES:]:
        lines.append(
            f"- candidate {failure.get('id')} rejected ({failure.get('reason')}): "
            f"{clipped(failure.get('message', ''))}"
        )
    for sibling in slower_siblings:
        lines.append(
            f"- candidate {sibling.get('id')} was slower: {plain(sibling.get('speedup'))}x"
        )
    for sibling in slower_siblings[-MAX_SIBLING_SOURCES:]:
        if sibling.get("source"):
            lines.append(f"Slower candidate {sibling.get('id')}:\n{fenced(sibling['source'])}")
    return "\n".join(lines)


def task_section(request: GenerationRequest) -> str:
    if request.parent is None:
        return (
            "## Task\nWrite a fast Triton implementation of the reference. Choose the parallel "
            "decomposition and memory traffic deliberately: use the strategies above where they "
            "fit, and take a different approach from anything listed as not working."
        )
    return (
        f"## Task\nWrite a faster version of candidate {request.parent.id}. Attack the bottleneck "
        "the diagnosis names (a structural change such as a different decomposition or fewer "
        "passes over memory usually beats retuning), and keep what makes it correct."
    )


def contract_section(problem: Problem) -> str:
    methods = model_methods(problem.source)
    init, forward = (signature_text(name, func) for name, func in methods.items())
    replaced = ", ".join(problem.replaces) or "none"
    return "\n".join(
        [
            "## Output contract",
            "Reply with exactly one ```python block holding a complete module that:",
            f"- defines `class ModelNew(nn.Module)` with `{init}` and `{forward}`, the same as "
            "Model's, so that `ModelNew(*get_init_inputs())(*get_inputs())` works;",
            "- does its math in `@triton.jit` kernels launched from `forward` (allocating outputs "
            "and reshaping views with torch is fine);",
            f"- never calls the PyTorch operators being replaced ({replaced}), neither through "
            "torch, Tensor methods nor torch.nn.functional;",
            "- imports nothing beyond torch, triton and math;",
            PRECISION_CONTRACT[problem.precision_policy],
            "- is correct for every size above, including sizes that are not powers of two "
            "(mask loads and stores), and returns Model's output shapes and dtypes.",
        ]
    )
