"""The "Diff" pane: the selected candidate against its parent, the best, or the reference.

It shows the changed hunks with a little context (the whole file on request), side by side when
the pane is wide enough for both sides' lines and in one column otherwise; long lines scroll
sideways instead of wrapping."""

from __future__ import annotations

from textual.containers import ScrollableContainer, Vertical
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Static

from kbtui.diffing import DiffRow, change_counts, hunks, side_by_side, unified
from kbtui.poller import Selection, next_diff_target

NUMBER_WIDTH = 5  # "1234 "
DIVIDER = " │ "
CONTEXT_ROWS = 3  # unchanged rows shown around each change
ROW_STYLES = {"delete": "on $error-muted", "insert": "on $success-muted"}
MARKS = {"equal": " ", "delete": "-", "insert": "+"}


def gutter(index: int | None) -> Content:
    text = " " * NUMBER_WIDTH if index is None else f"{index + 1:>{NUMBER_WIDTH - 1}} "
    return Content.styled(text, "$text-muted")


def code(lines: list[Content], index: int | None, width: int, style: str) -> Content:
    """A line padded to `width` cells (so a changed line's background spans the column)."""
    line = Content("") if index is None else lines[index]
    line = line.pad_right(width - line.cell_length)
    return line.stylize_before(style) if style and index is not None else line


def gap(count: int) -> Content:
    lines = "line" if count == 1 else "lines"
    return Content.styled(f"{'⋯':>{NUMBER_WIDTH - 1}} {count} unchanged {lines}", "$text-muted")


def longest(shown: list[DiffRow | int], old_lines: list[Content], new_lines: list[Content]) -> int:
    """The widest line the shown rows hold, in cells."""
    rows = [row for row in shown if isinstance(row, DiffRow)]
    return max(
        [old_lines[row.left].cell_length for row in rows if row.left is not None]
        + [new_lines[row.right].cell_length for row in rows if row.right is not None],
        default=0,
    )


def paired_line(row: DiffRow, old: list[Content], new: list[Content], side: int) -> Content:
    changed = row.tag != "equal"
    return Content.assemble(
        gutter(row.left),
        code(old, row.left, side, ROW_STYLES["delete"] if changed else ""),
        (DIVIDER, "$text-muted"),
        gutter(row.right),
        code(new, row.right, side, ROW_STYLES["insert"] if changed else ""),
    )


def unified_line(row: DiffRow, old: list[Content], new: list[Content], width: int) -> Content:
    lines, index = (old, row.left) if row.right is None else (new, row.right)
    style = ROW_STYLES.get(row.tag, "")
    mark = Content.styled(MARKS[row.tag], style)
    return Content.assemble(
        gutter(row.left), gutter(row.right), mark, code(lines, index, width, style)
    )


def diff_content(
    old: str, new: str, width: int, whole_file: bool
) -> tuple[Content, tuple[int, int], int]:
    """The diff for a pane `width` cells wide, the counts of added and removed lines, and the
    line the first change is drawn on (0 when there is none). Side by side when every shown
    line fits in half the width; otherwise one column, as wide as its longest line."""
    old_lines = highlight(old, language="python").split("\n")
    new_lines = highlight(new, language="python").split("\n")
    plain = [line.plain for line in old_lines], [line.plain for line in new_lines]

    def shown_rows(rows: list[DiffRow]) -> list[DiffRow | int]:
        return rows if whole_file else hunks(rows, CONTEXT_ROWS)

    side = (width - len(DIVIDER)) // 2 - NUMBER_WIDTH
    rows = side_by_side(*plain)
    shown = shown_rows(rows)
    paired = longest(shown, old_lines, new_lines) <= side
    if not paired:
        rows = unified(*plain)
        shown = shown_rows(rows)
        text = max(longest(shown, old_lines, new_lines), width - 2 * NUMBER_WIDTH - 1)
    out = []
    first_change = None
    for row in shown:
        if isinstance(row, int):
            out.append(gap(row))
            continue
        if row.tag != "equal" and first_change is None:
            first_change = len(out)
        if paired:
            out.append(paired_line(row, old_lines, new_lines, side))
        else:
            out.append(unified_line(row, old_lines, new_lines, text))
    return Content("\n").join(out), change_counts(rows), first_change or 0


def keys_line(target: str, whole_file: bool) -> str:
    """What is shown and the keys that change it."""
    following = next_diff_target(target)
    shown = "whole file · w: changes only" if whole_file else "changes · w: whole file"
    return f"{shown} · d: vs {following} · m: full screen"


def target_label(selection: Selection, target: str) -> str:
    if target == "reference":
        return "reference.py"
    other = selection.target_ids.get(target)
    return f"{target} {other}" if other else target


def missing_reason(selection: Selection, target: str) -> str:
    if not (selection.detail or {}).get("source"):
        return f"no source for {selection.candidate_id} yet"
    if target != "reference" and selection.target_ids.get(target) is None:
        return f"{selection.candidate_id} has no {target}"
    return f"no source for {target_label(selection, target)}"


class DiffPane(Vertical):
    """A title line naming both sides, over a body that scrolls both ways."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.target = "parent"
        self.whole_file = False
        self._selection: Selection | None = None
        self._opened: tuple | None = None  # (candidate, target, target's id, whole file) shown
        self._scroll_pending = False  # scroll to the first change once the pane has a size
        self._title = Static(Content.assemble(("select a candidate", "$text-muted")))
        self._body = Static(id="diff-body")

    def compose(self):
        yield self._title
        with ScrollableContainer():
            yield self._body

    def show(self, selection: Selection, target: str) -> None:
        self._selection, self.target = selection, target
        self._redraw()

    def toggle_whole_file(self) -> None:
        self.whole_file = not self.whole_file
        if self._selection is not None:
            self._redraw()

    def on_resize(self) -> None:
        if self._selection is not None:
            self._redraw()

    def _redraw(self) -> None:
        selection, target = self._selection, self.target
        new = (selection.detail or {}).get("source")
        old = selection.target_sources.get(target)
        keys = Content.styled(keys_line(target, self.whole_file), "$text-muted")
        if new is None or old is None:
            head = Content.styled(
                f"{selection.candidate_id} vs {target_label(selection, target)}", "bold"
            )
            self._title.update(Content("\n").join([head, keys]))
            self._body.update(Content.styled(missing_reason(selection, target), "$text-muted"))
            return
        scroll = self.query_one(ScrollableContainer)
        width = (self.size.width or 80) - scroll.styles.scrollbar_size_vertical
        body, (added, removed), first_change = diff_content(old, new, width, self.whole_file)
        head = Content.assemble(
            (target_label(selection, target), "bold"),
            " → ",
            (selection.candidate_id, "bold"),
            "  ",
            (f"+{added}", "$text-success"),
            " ",
            (f"-{removed}", "$text-error"),
        )
        self._title.update(Content("\n").join([head, keys]))
        self._body.update(body)
        # A whole file opens at its first change: a mutation often changes one line deep in it.
        opened = (selection.candidate_id, target, selection.target_ids.get(target), self.whole_file)
        if opened != self._opened:
            self._opened, self._scroll_pending = opened, True
        if self._scroll_pending and self.size.height:  # a hidden tab has no size to scroll
            self._scroll_pending = False
            top = max(0, first_change - CONTEXT_ROWS) if self.whole_file else 0
            self.call_after_refresh(scroll.scroll_to, x=0, y=top, animate=False)
