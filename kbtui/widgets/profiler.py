"""The "Profiler" pane: the bottleneck diagnosis of the selected candidate (or of the candidate
its strategy was profiled on) and its evidence."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from kbtui.formatting import number
from kbtui.poller import Selection

# The headline figures of engine.profiler's diagnosis metrics (all in percent of peak).
HEADLINE_METRICS = (("occupancy", "achieved_occupancy"), ("DRAM", "dram_pct"), ("SM", "sm_pct"))
TOP_STALLS = 4


def metric_text(name: str, value) -> str:
    if isinstance(value, int | float) and (name.endswith("_pct") or name.endswith("occupancy")):
        return f"{value:.1f}%"
    return number(value) if isinstance(value, int | float) else str(value)


def hint_text(hint: dict) -> str:
    """One ncu rule finding: "Rule: what it says (estimated speedup 12%)"."""
    speedup = hint.get("estimated_speedup")
    gain = f" (estimated speedup {speedup:.0f}%)" if speedup else ""
    return f"{hint.get('rule', '?')}: {hint.get('text', '')}{gain}"


def bullets(title: str, items: list[str]) -> list[Content]:
    if not items:
        return []
    return [Content.assemble((title, "bold"))] + [Content(f"  • {item}") for item in items]


def profile_content(selection: Selection) -> Content:
    """The profile that stands for the selected candidate: its own, or its strategy's."""
    candidate_id, profile = selection.candidate_id, selection.profile
    if profile is None:
        return Content.styled(
            f"{candidate_id}: not profiled yet (each strategy is profiled at most once, on a "
            "candidate at rung 1 or above, while profiles stay within their share of the budget)",
            "$text-muted",
        )
    body = diagnosis_content(profile)
    if selection.profiled_on == candidate_id:
        return body
    origin = (selection.detail or {}).get("origin")
    shared = Content.assemble(
        (f"{candidate_id} shares the profile of {selection.profiled_on}", "bold"),
        f": its strategy {origin} is profiled once, and that profile guides its mutations",
    )
    return Content("\n").join([shared, body])


def diagnosis_content(profile: dict) -> Content:
    if profile.get("status") == "unavailable":
        why = profile.get("why") or "no reason given"
        return Content.assemble(("profiler unavailable: ", "bold $text-warning"), why)
    metrics = {k: v for k, v in (profile.get("metrics") or {}).items() if v is not None}
    kind = profile.get("kind") or "diagnosis"
    # engine.profiler's summaries open with their kind ("memory-bound: DRAM at ..."): say it once.
    summary = (profile.get("summary") or "").removeprefix(f"{kind}: ")
    lines = [Content.assemble((kind, "bold $text-accent"), " · ", summary)]
    headline = [(label, name) for label, name in HEADLINE_METRICS if name in metrics]
    if headline:
        lines.append(
            Content("   ").join(
                Content.assemble((f"{label} ", "bold"), metric_text(name, metrics[name]))
                for label, name in headline
            )
        )
    stalls = (profile.get("stalls") or [])[:TOP_STALLS]
    if stalls:
        lines.append(
            Content.assemble(
                ("top stalls ", "bold"),
                ", ".join(f"{reason} {100 * share:.0f}%" for reason, share in stalls),
            )
        )
    lines += bullets("evidence", [str(e) for e in profile.get("evidence") or []])
    lines += bullets("ncu rule hints", [hint_text(h) for h in profile.get("rule_hints") or []])
    shown = {name for _, name in headline}
    others = [f"{n} {metric_text(n, v)}" for n, v in metrics.items() if n not in shown]
    if others:
        lines.append(Content.assemble(("metrics ", "bold"), "  ".join(others)))
    missing = profile.get("missing_metrics") or []
    if missing:
        lines.append(Content.assemble(("missing: ", "$text-muted"), ", ".join(missing)))
    return Content("\n").join(lines)


class ProfilerPane(VerticalScroll):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._body = Static(Content.assemble(("select a candidate", "$text-muted")))

    def compose(self):
        yield self._body

    def show(self, selection: Selection) -> None:
        self._body.update(profile_content(selection))
