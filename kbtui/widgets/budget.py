"""The "Budget" pane: the ledger by rung, activity and device (GPU-held, then compiling and
idle), the time paused (in no budget), LLM spend, what is left, and progress. On the cpu backend
it says "device", not GPU."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from engine.session_files import device_word
from kbtui.formatting import MISSING, dollars, duration, percent, speedup
from kbtui.plot import best_speedup_plot, chart_place, chart_title

LABEL_GAP = 2  # spaces after the longest label ("GPU by activity")
DOING_WIDTH = 21  # "evaluating c0012 r1", padded so that the devices' columns line up
# Ledger rows: label ("{device}": the backend's word), ledger key, budget key (limits and
# left), formatter.
LIMITED = (
    ("wall", "wall_seconds", "wall_seconds", duration),
    ("{device}", "gpu_seconds", "gpu_seconds", duration),
    ("evaluations", "evaluations", "evaluations", "{:.0f}".format),
    ("LLM cost", "llm_cost_usd", "llm_usd", dollars),
)


def cell(value, fmt) -> str:
    return f"{MISSING if value is None else fmt(value):>10}"


def label_width(device: str) -> int:
    """The labels' column: the longest label, "{device} by activity", and LABEL_GAP."""
    return len(f"{device} by activity") + LABEL_GAP


def labelled(label: str, *parts, width: int) -> Content:
    return Content.assemble((f"{label:<{width}}", "bold"), *parts)


def device_lines(devices: list[dict], device: str, width: int) -> list[Content]:
    """One line per device: what it evaluates now and what it has spent; none for one device."""
    if len(devices) < 2:
        return []
    lines = []
    for d in devices:
        now = d["evaluating"]
        doing = f"evaluating {now['id']} r{now['rung']}" if now else "idle"
        lines.append(
            labelled(
                "devices" if d["index"] == 0 else "",
                f"d{d['index']} ({device} {d['gpu']})  ",
                (f"{doing:<{DOING_WIDTH}}", "$text-accent" if now else "$text-muted"),
                f"{device} {duration(d['gpu_seconds']):>6}  {d['evaluations']:>4} evals",
                width=width,
            )
        )
    return lines


def paused_line(snapshot: dict, width: int) -> list[Content]:
    """The ledger's paused seconds, once the search has paused: they spend no budget."""
    paused = (snapshot.get("ledger") or {}).get("paused_seconds") or 0.0
    if not paused and snapshot.get("state") != "paused":
        return []
    return [
        labelled(
            "paused",
            f"{cell(paused, duration)}  ",
            ("a pause spends no budget", "$text-muted"),
            width=width,
        )
    ]


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
    device = device_word(snapshot.get("backend"))
    width = label_width(device)
    header = f"{'':<{width}}{'spent':>10}  {'limit':>10}  {'left':>10}"
    lines = [Content.assemble((header, "$text-muted"))]
    for label, spent, budgeted, fmt in LIMITED:
        lines.append(
            labelled(
                label.format(device=device),
                f"{cell(ledger.get(spent), fmt)}  {cell(limits.get(budgeted), fmt)}  ",
                (cell(left.get(budgeted), fmt), "$text-success"),
                width=width,
            )
        )
    lines[2:2] = paused_line(snapshot, width)  # below the wall clock's row
    lines += [
        labelled(
            "best speedup",
            f"{cell(best, speedup)}  {cell(limits.get('target_speedup'), speedup)}",
            width=width,
        ),
        labelled(
            f"{device} by rung",
            "  ".join(f"r{rung} {duration(s)}" for rung, s in by_rung) or MISSING,
            f"  (top rung {percent(ledger.get('top_rung_share'))})",
            width=width,
        ),
        labelled(
            f"{device} by activity",
            "  ".join(f"{name} {duration(s)}" for name, s in by_activity) or MISSING,
            width=width,
        ),
        *device_lines(snapshot.get("devices") or [], device, width),
        labelled(
            f"off the {device}",
            "  ".join(f"{name} {duration(s)}" for name, s in off_gpu) or MISSING,
            width=width,
        ),
        labelled(
            "LLM tokens",
            f"{ledger.get('llm_tokens_in', 0)} in  {ledger.get('llm_tokens_out', 0)} out",
            width=width,
        ),
    ]
    return Content("\n").join(lines)


class BudgetPane(VerticalScroll):
    """The ledger, and the chart of the best speedup sized to the room the pane has (kbtui.plot
    chart_place): below the ledger, or beside its first lines, over the ledger's blank cells."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._progress: list = []
        self._device = device_word(None)
        self._ledger = Static(Content.assemble(("no snapshot yet", "$text-muted")))
        self._ledger_widths: list[int] = []  # each line's cells
        self._chart = Static(id="budget-chart")

    def compose(self):
        yield self._ledger
        yield self._chart

    def show(self, snapshot: dict) -> None:
        ledger = budget_content(snapshot)
        self._ledger.update(ledger)
        self._ledger_widths = [line.cell_length for line in ledger.split("\n")]
        self._progress = snapshot.get("progress") or []
        self._device = device_word(snapshot.get("backend"))
        self._redraw_plot()

    def on_resize(self) -> None:
        self._redraw_plot()

    def _redraw_plot(self) -> None:
        region = self.scrollable_content_region
        if not (region.width and self._ledger_widths):
            return  # drawn once the pane has its size and a snapshot
        place = chart_place(self._ledger_widths, region.width, region.height)
        self._chart.styles.position = "absolute" if place.row == 0 else "relative"
        self._chart.styles.offset = (place.column, 0)
        self._chart.styles.width = place.width
        plot = best_speedup_plot(self._progress, place.width, place.bars, self._device)
        self._chart.update(
            Content.assemble(
                (chart_title(self._device, place.width), "bold"), "\n", (plot, "$text-accent")
            )
        )
