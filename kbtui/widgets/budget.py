"""The "Budget" pane: the ledger by rung, activity and device (GPU-held, then compiling and
idle), LLM spend, what is left, and progress."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from kbtui.formatting import MISSING, dollars, duration, percent, speedup
from kbtui.plot import best_speedup_plot

PLOT_HEIGHT = 4
LABEL_WIDTH = 17
DOING_WIDTH = 21  # "evaluating c0012 r1", padded so that the devices' columns line up
# Ledger rows: label, ledger key, budget key (limits and left), formatter.
LIMITED = (
    ("wall", "wall_seconds", "wall_seconds", duration),
    ("GPU", "gpu_seconds", "gpu_seconds", duration),
    ("evaluations", "evaluations", "evaluations", "{:.0f}".format),
    ("LLM cost", "llm_cost_usd", "llm_usd", dollars),
)


def cell(value, fmt) -> str:
    return f"{MISSING if value is None else fmt(value):>10}"


def labelled(label: str, *parts) -> Content:
    return Content.assemble((f"{label:<{LABEL_WIDTH}}", "bold"), *parts)


def device_lines(devices: list[dict]) -> list[Content]:
    """One line per device: what it evaluates now and what it has spent; none for one device."""
    if len(devices) < 2:
        return []
    lines = []
    for device in devices:
        now = device["evaluating"]
        doing = f"evaluating {now['id']} r{now['rung']}" if now else "idle"
        lines.append(
            labelled(
                "devices" if device["index"] == 0 else "",
                f"d{device['index']} (GPU {device['gpu']})  ",
                (f"{doing:<{DOING_WIDTH}}", "$text-accent" if now else "$text-muted"),
                f"GPU {duration(device['gpu_seconds']):>6}  {device['evaluations']:>4} evals",
            )
        )
    return lines


def budget_content(snapshot: dict) -> Content:
    limits = (snapshot.get("budget") or {}).get("limits") or {}
    left = (snapshot.get("budget") or {}).get("left") or {}
    ledger = snapshot.get("ledger") or {}
    by_rung = sorted((ledger.get("gpu_seconds_by_rung") or {}).items())
    by_activity = (ledger.get("gpu_seconds_by_activity") or {}).items()
    off_gpu = [*(ledger.get("cpu_seconds_by_activity") or {}).items()]
    if "idle_seconds" in ledger:
        off_gpu.append(("idle", ledger["idle_seconds"]))
    best = (snapshot.get("best") or {}).get("speedup")
    header = f"{'':<{LABEL_WIDTH}}{'spent':>10}  {'limit':>10}  {'left':>10}"
    lines = [Content.assemble((header, "$text-muted"))]
    for label, spent, budgeted, fmt in LIMITED:
        lines.append(
            labelled(
                label,
                f"{cell(ledger.get(spent), fmt)}  {cell(limits.get(budgeted), fmt)}  ",
                (cell(left.get(budgeted), fmt), "$text-success"),
            )
        )
    lines += [
        labelled(
            "best speedup", f"{cell(best, speedup)}  {cell(limits.get('target_speedup'), speedup)}"
        ),
        labelled(
            "GPU by rung",
            "  ".join(f"r{rung} {duration(s)}" for rung, s in by_rung) or MISSING,
            f"  (top rung {percent(ledger.get('top_rung_share'))})",
        ),
        labelled(
            "GPU by activity",
            "  ".join(f"{name} {duration(s)}" for name, s in by_activity) or MISSING,
        ),
        *device_lines(snapshot.get("devices") or []),
        labelled(
            "off the GPU",
            "  ".join(f"{name} {duration(s)}" for name, s in off_gpu) or MISSING,
        ),
        labelled(
            "LLM tokens",
            f"{ledger.get('llm_tokens_in', 0)} in  {ledger.get('llm_tokens_out', 0)} out",
        ),
    ]
    return Content("\n").join(lines)


class BudgetPane(VerticalScroll):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._progress: list = []
        self._ledger = Static(Content.assemble(("no snapshot yet", "$text-muted")))
        self._plot_title = Static(Content.assemble(("best speedup vs GPU-seconds", "bold")))
        self._plot = Static(id="budget-plot")

    def compose(self):
        yield self._ledger
        yield self._plot_title
        yield self._plot

    def show(self, snapshot: dict) -> None:
        self._ledger.update(budget_content(snapshot))
        self._progress = snapshot.get("progress") or []
        self._redraw_plot()

    def on_resize(self) -> None:
        self._redraw_plot()

    def _redraw_plot(self) -> None:
        width = self.scrollable_content_region.width or 80
        self._plot.update(best_speedup_plot(self._progress, width - 1, PLOT_HEIGHT))
