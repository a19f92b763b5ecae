"""The "Diff" pane: the selected candidate beside its parent, the best, or the reference."""

from __future__ import annotations

from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Static

from kbtui.diffing import change_counts, side_by_side
from kbtui.poller import Selection

NUMBER_WIDTH = 5  # "1234 "
DIVIDER = " │ "
SIDE_STYLES = {"delete": "on $error-muted", "insert": "on $success-muted"}
CONTEXT_ROWS = 3  # unchanged rows shown above the first change when a diff opens


def wrap(line: Content, width: int) -> list[Content]:
    """A line cut into pieces of `width` cells (the diff wraps long lines, never hides them)."""
    if width <= 0 or len(line) <= width:
        return [line]
    return [line[start : start + width] for start in range(0, len(line), width)]


def side_cells(lines: list[Content], index: int | None, style: str, width: int) -> list[Content]:
    if index is None:
        return [Content(" " * (NUMBER_WIDTH + width))]
    pieces = wrap(lines[index], width)
    cells = []
    for number, piece in enumerate(pieces):
        gutter = f"{index + 1:>{NUMBER_WIDTH - 1}} " if number == 0 else " " * NUMBER_WIDTH
        body = piece.pad_right(width - piece.cell_length)
        if style:
            body = body.stylize_before(style)
        cells.append(Content.assemble((gutter, "$text-muted"), body))
    return cells


def diff_content(old: str, new: str, width: int) -> tuple[Content, tuple[int, int], int]:
    """Side-by-side rows for `width` cells, the counts of added and removed lines, and the row
    the first change is drawn on (0 when there is none)."""
    old_lines = highlight(old, language="python").split("\n")
    new_lines = highlight(new, language="python").split("\n")
    rows = side_by_side([line.plain for line in old_lines], [line.plain for line in new_lines])
    side_width = max(10, (width - len(DIVIDER)) // 2 - NUMBER_WIDTH)
    blank = " " * (NUMBER_WIDTH + side_width)
    out = []
    first_change = None
    for row in rows:
        if row.tag != "equal" and first_change is None:
            first_change = len(out)
        left_style = "" if row.tag == "equal" else SIDE_STYLES["delete"]
        right_style = "" if row.tag == "equal" else SIDE_STYLES["insert"]
        left = side_cells(old_lines, row.left, left_style, side_width)
        right = side_cells(new_lines, row.right, right_style, side_width)
        for index in range(max(len(left), len(right))):
            out.append(
                Content.assemble(
                    left[index] if index < len(left) else Content(blank),
                    (DIVIDER, "$text-muted"),
                    right[index] if index < len(right) else Content(blank),
                )
            )
    return Content("\n").join(out), change_counts(rows), first_change or 0


def target_label(selection: Selection, target: str) -> str:
    if target == "reference":
        return "reference.py"
    other = selection.target_ids.get(target)
    return f"{target} {other}" if other else target


def missing_reason(selection: Selection, target: str) -> str:
    if not (selection.detail or {}).get("source"):
        return f"no source for {selection.candidate_id} yet"
    if target != "reference" and selection.target_ids.get(target) is None:
        return f"{selection.candidate_id} has no {target}; d switches the target"
    return f"no source for {target_label(selection, target)}"


class DiffPane(Vertical):
    """A title line naming both sides, over a scrolling side-by-side body."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.target = "parent"
        self._selection: Selection | None = None
        self._opened: tuple | None = None  # (candidate, target, target's id) on show
        self._scroll_pending = False  # scroll to the first change once the pane has a size
        self._title = Static(Content.assemble(("select a candidate", "$text-muted")))
        self._body = Static()

    def compose(self):
        yield self._title
        with VerticalScroll():
            yield self._body

    def show(self, selection: Selection, target: str) -> None:
        self._selection, self.target = selection, target
        self._redraw()

    def on_resize(self) -> None:
        if self._selection is not None:
            self._redraw()

    def _redraw(self) -> None:
        selection, target = self._selection, self.target
        new = (selection.detail or {}).get("source")
        old = selection.target_sources.get(target)
        label = target_label(selection, target)
        if new is None or old is None:
            self._title.update(
                Content.assemble((f"{selection.candidate_id} vs {label}", "bold"), " · d switches")
            )
            self._body.update(Content.assemble((missing_reason(selection, target), "$text-muted")))
            return
        scroll = self.query_one(VerticalScroll)
        width = (self.scrollable_content_region.width or 80) - scroll.styles.scrollbar_size_vertical
        body, (added, removed), first_change = diff_content(old, new, width)
        self._title.update(
            Content.assemble(
                (label, "bold"),
                "  →  ",
                (selection.candidate_id, "bold"),
                "  ",
                (f"+{added}", "$text-success"),
                " ",
                (f"-{removed}", "$text-error"),
                "  · d switches parent/best/reference",
            )
        )
        self._body.update(body)
        # A mutation often changes one line deep in the file: open each diff at its first change.
        opened = (selection.candidate_id, target, selection.target_ids.get(target))
        if opened != self._opened:
            self._opened, self._scroll_pending = opened, True
        if self._scroll_pending and self.size.height:  # a hidden tab has no size to scroll
            self._scroll_pending = False
            top = max(0, first_change - CONTEXT_ROWS)
            self.call_after_refresh(scroll.scroll_to, y=top, animate=False)
