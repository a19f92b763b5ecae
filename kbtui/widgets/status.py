"""The line above the panes: session, engine state, best result, pending commands."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from engine.session_files import shown_state
from kbtui.formatting import speedup_with_interval
from kbtui.pending import PendingCommands

STATE_STYLES = {
    "running": "$text-success",
    "paused": "$text-warning",
    "stopped": "$text-error",
    "finished": "$text-primary",
    "interrupted": "$text-error",
}


def status_content(
    snapshot: dict | None, running: bool | None, pending: PendingCommands
) -> Content:
    if snapshot is None:
        head = Content.assemble(("waiting for the engine's first snapshot", "$text-muted"))
    else:
        state = shown_state(snapshot.get("state", "?"), engine_alive=running is not False)
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
    if running is False:
        lines.append(
            Content.assemble(
                ("engine not running", "bold $text-error"),
                " · press r to resume the session (commands wait in the inbox until then)",
            )
        )
    if len(pending):
        sent = ", ".join(
            " ".join(filter(None, (c["command"], c.get("candidate"), c.get("amount"))))
            for c in pending
        )
        lines.append(Content.assemble(("pending: ", "$text-warning"), sent))
    return Content("\n").join(lines)


class SessionStatus(Static):
    def show(self, snapshot: dict | None, running: bool | None, pending: PendingCommands) -> None:
        self.update(status_content(snapshot, running, pending))
