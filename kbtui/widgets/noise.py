"""The "Noise" pane: the selected candidate's timing samples per shape, beside the reference's."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from kbtui.formatting import (
    interval,
    milliseconds,
    number,
    percent,
    sparkline,
    speedup_with_interval,
)

LABEL_WIDTH = 12  # "  reference "
MIN_SPARK = 8


def stats_text(stats: dict | None) -> str:
    stats = stats or {}
    return (
        f" median {milliseconds(stats.get('median'))} IQR {number(stats.get('iqr'))}"
        f" CV {percent(stats.get('cv'))} CI {interval(stats.get('ci_low'), stats.get('ci_high'))}"
    )


def squeeze(samples: list[float], width: int) -> list[float]:
    """At most `width` values: each the largest of its run of samples, so spikes stay visible."""
    if len(samples) <= width:
        return samples
    step = len(samples) / width
    return [max(samples[int(i * step) : int((i + 1) * step)]) for i in range(width)]


def latest_timed(detail: dict) -> dict | None:
    """The evaluation at the highest rung that has timings."""
    timed = [e for e in detail.get("evaluations") or [] if e.get("timings")]
    return max(timed, key=lambda e: e.get("rung", 0)) if timed else None


def timing_lines(timing: dict, width: int) -> list[Content]:
    """A shape's speedup, then the kernel's and the reference's samples, each with its stats."""
    series = (
        ("kernel", timing.get("samples_ms") or [], timing.get("stats"), "$text-accent"),
        (
            "reference",
            timing.get("ref_samples_ms") or [],
            timing.get("ref_stats"),
            "$text-secondary",
        ),
    )
    stats = [stats_text(s) for _, _, s, _ in series]
    spark_width = max(MIN_SPARK, width - LABEL_WIDTH - max(map(len, stats)) - 1)
    lines = [
        Content.assemble(
            (timing.get("size_label", "?"), "bold $text-primary"),
            f" · {len(series[0][1])} samples · speedup ",
            (speedup_with_interval(timing.get("speedup"), timing.get("speedup_ci")), "bold"),
        )
    ]
    for (label, samples, _, style), text in zip(series, stats, strict=True):
        # Each series on its own scale: the shape of its noise, not its level, is the point.
        spark = sparkline(
            squeeze(samples, spark_width), min(samples, default=0.0), max(samples, default=0.0)
        )
        lines.append(
            Content.assemble(
                f"  {label:<{LABEL_WIDTH - 2}}", (spark.ljust(spark_width), style), text
            )
        )
    return lines


def score_line(row: dict | None) -> Content | None:
    """Why the Queue ranks the candidate where it does: its score is its speedup times a bonus
    for each rung climbed and a penalty for noisy timings (engine.search.score)."""
    if not row or row.get("score") is None or not row.get("speedup"):
        return None
    score, speedup = row["score"], row["speedup"]
    return Content.assemble(
        ("score ", "bold"),
        f"{number(score)} = speedup {speedup:.2f}× × {score / speedup:.2f}"
        f" (bonus per rung, penalty for CV {percent(row.get('cv'))})",
    )


def noise_content(candidate_id: str, detail: dict | None, row: dict | None, width: int) -> Content:
    if detail is None:
        return Content.assemble((f"{candidate_id}: no detail file yet", "$text-muted"))
    evaluations = detail.get("evaluations") or []
    evaluation = latest_timed(detail)
    if evaluation is None:
        last = evaluations[-1] if evaluations else None
        why = (
            "not evaluated yet"
            if last is None
            else f"no timings ({last.get('reason') or 'failed'})"
        )
        return Content.assemble((f"{candidate_id}: {why}", "$text-muted"))
    head = Content.assemble(
        (candidate_id, "bold"),
        f" · {detail.get('origin') or '?'} · rung {evaluation.get('rung')}"
        f" · {evaluation.get('precision') or '?'} · error {number(evaluation.get('error'))}"
        f" (tolerance {number(evaluation.get('tolerance'))})",
    )
    lines = [head]
    if (score := score_line(row)) is not None:
        lines.append(score)
    if evaluation.get("meaningful") is False:
        lines.append(Content.assemble(("timings mean nothing on this backend", "$text-warning")))
    for timing in evaluation["timings"]:
        lines += timing_lines(timing, width)
    return Content("\n").join(lines)


class NoisePane(VerticalScroll):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.candidate_id: str | None = None
        self._detail: dict | None = None
        self._row: dict | None = None  # the candidate's row in the snapshot
        self._body = Static(Content.assemble(("select a candidate", "$text-muted")))

    def compose(self):
        yield self._body

    def show(self, candidate_id: str, detail: dict | None, row: dict | None) -> None:
        self.candidate_id, self._detail, self._row = candidate_id, detail, row
        self._redraw()

    def on_resize(self) -> None:
        if self.candidate_id is not None:
            self._redraw()

    def _redraw(self) -> None:
        width = self.scrollable_content_region.width or 80
        self._body.update(noise_content(self.candidate_id, self._detail, self._row, width))
