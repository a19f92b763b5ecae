"""The lines above the panes: session, engine state, best result, pending commands. A line
wider than the screen breaks between its parts (" · "), so that nothing of it is cut."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from engine.session_files import BEST_CAVEAT, BEST_MEANING, shown_state
from kbtui.formatting import speedup_with_interval
from kbtui.pending import PendingCommands
from kbtui.poller import EngineState

SEPARATOR = " · "
STATE_STYLES = {
    "running": "$text-success",
    "paused": "$text-warning",
    "stopped": "$text-error",
    "finished": "$text-primary",
    "interrupted": "$text-error",
}


def engine_line(engine: EngineState | None) -> Content | None:
    """What the engine is doing when it is not simply running, and what `r` does about it."""
    if engine is None or engine.phase == "running":
        return None
    if engine.phase == "starting":
        return Content.assemble(
            ("engine starting", "bold $text-warning"), " · commands wait in the inbox until it runs"
        )
    if engine.failure:
        return Content.assemble(("engine failed: ", "bold $text-error"), engine.failure)
    return Content.assemble(
        ("engine not running", "bold $text-error"), " · r resumes it; commands wait until then"
    )


def status_content(
    snapshot: dict | None, engine: EngineState | None, pending: PendingCommands
) -> Content:
    if snapshot is None:
        head = Content.assemble(("waiting for the engine's first snapshot", "$text-muted"))
    else:
        alive = engine is None or engine.phase != "stopped"
        state = shown_state(snapshot.get("state", "?"), engine_alive=alive)
        best = snapshot.get("best") or {}
        best_speedup = speedup_with_interval(best.get("speedup"), best.get("speedup_ci"))
        best_text = f"best {best['id']} {best_speedup}" if best.get("id") else "no passing yet"
        head = Content.assemble(
            (snapshot.get("session", "?"), "bold"),
            f" {snapshot.get('problem', '?')} · {snapshot.get('backend', '?')} · ",
            (state, f"bold {STATE_STYLES.get(state, '')}"),
            f" · step {snapshot.get('step', 0)} · ",
            (best_text, "$text-accent"),
        )
        if snapshot.get("precision_policy") == "tf32":
            head += Content.assemble((" · TF32 allowed", "$text-warning"))
        if snapshot.get("allowed_torch_ops"):
            allowed = ",".join(snapshot["allowed_torch_ops"])
            head += Content.assemble((f" · torch {allowed} allowed", "$text-warning"))
        if snapshot.get("timings_meaningful") is False:
            head += Content.assemble((" · timings not meaningful", "$text-warning"))
    lines = [head]
    if snapshot and snapshot.get("state") == "paused" and snapshot.get("pause_reason"):
        lines.append(Content.assemble(
            ("paused by machine faults: ", "bold $text-warning"), snapshot["pause_reason"]
        ))  # fmt: skip
    if (engine_text := engine_line(engine)) is not None:
        lines.append(engine_text)
    if len(pending):
        sent = ", ".join(
            " ".join(filter(None, (c["command"], c.get("candidate"), c.get("amount"))))
            for c in pending
        )
        lines.append(Content.assemble(("pending: ", "$text-warning"), sent))
    return Content("\n").join(lines)


def fold(content: Content, width: int) -> Content:
    """Each line of `content` broken before those of its parts (" · ") that would pass `width`
    cells; a part wider than that alone is left to the widget's word wrap."""
    rows: list[Content] = []
    for line in content.split("\n"):
        if width <= 0 or line.cell_length <= width:
            rows.append(line)
            continue
        row, *parts = line.split(SEPARATOR)
        for part in parts:
            if row.cell_length + len(SEPARATOR) + part.cell_length <= width:
                row = Content(SEPARATOR).join((row, part))
            else:
                rows.append(row)
                row = part
        rows.append(row)
    return Content("\n").join(rows)


class SessionStatus(Static):
    _content: Content | None = None  # the lines as status_content made them, before fold

    def on_mount(self) -> None:
        self.tooltip = f"best: {BEST_MEANING}; {BEST_CAVEAT}"

    def show(
        self, snapshot: dict | None, engine: EngineState | None, pending: PendingCommands
    ) -> None:
        self._content = status_content(snapshot, engine, pending)
        self.update(fold(self._content, self.content_region.width))

    def on_resize(self) -> None:
        if self._content is not None:
            self.update(fold(self._content, self.content_region.width))
