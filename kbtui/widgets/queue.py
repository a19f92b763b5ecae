"""The "Queue" pane: the population as a sortable table. Its cursor stays on the top row until
the user moves it, then on the candidate the user chose, however the rows re-sort. Every column
is as wide as its header and its widest cell, whatever the cell held when first drawn; the
origin takes the width the others leave (its full name, else the strategy's own name)."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable

from engine.session_files import CANDIDATE_STATUSES
from kbtui.formatting import MISSING, compact_interval, number, truncate
from kbtui.pending import PendingCommands

COLUMNS = (
    ("id", "id"),
    ("origin", "origin"),
    ("parent", "parent"),
    ("rung", "r"),
    ("status", "status"),
    ("score", "score"),
    ("speedup", "speedup [CI]"),
    ("flags", "flags"),
)
ORIGIN = 1  # the origin's place among COLUMNS
ORIGIN_MIN_WIDTH = 8  # a cut origin keeps this much; the Noise pane shows the whole origin
STATUS_ORDER = CANDIDATE_STATUSES  # the session contract lists them in sorting order
# Columns that `s` cycles through, each with its natural direction (True: largest first).
SORT_DIRECTIONS = {
    "score": True,
    "speedup": True,
    "rung": True,
    "id": False,
    "status": False,
    "origin": False,
    "parent": False,
    "flags": True,
}


def sort_value(row: dict, column: str):
    """A comparable value for one column of a snapshot candidate row; unknowns sort last."""
    if column in ("score", "speedup", "rung"):
        value = row.get(column)
        return float("-inf") if value is None else value
    if column == "status":
        status = row.get("status")
        return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)
    if column == "flags":
        return (bool(row.get("pinned")), bool(row.get("vetoed")))
    return row.get(column) or ""


def flags(row: dict, pending: list[str]) -> str:
    marks = [name for name in ("pinned", "vetoed") if row.get(name)]
    marks = ["pin" if m == "pinned" else "veto" for m in marks]
    return " ".join(marks + [f"{command}…" for command in pending])


def cell_texts(row: dict, pending: list[str]) -> list[str]:
    """A snapshot candidate row's cells, the origin in full ("matvec.row_block")."""
    return [
        row["id"],
        row.get("origin") or MISSING,
        row.get("parent") or MISSING,
        str(row.get("rung", MISSING)),
        row.get("status") or MISSING,
        number(row.get("score")),
        compact_interval(row.get("speedup"), row.get("speedup_ci")),
        flags(row, pending),
    ]


def strategy(origin: str) -> str:
    """An origin without its family ("row_block" of "matvec.row_block")."""
    return origin.rsplit(".", 1)[-1]


def origin_fitter(rows: list[list[str]], available: int, padding: int) -> Callable[[str], str]:
    """How to show the origins of `rows` (cell_texts) in a table `available` cells wide whose
    other columns keep their widest cell: every full name where all fit, else every strategy's
    own name, cut to the room left (at least ORIGIN_MIN_WIDTH) where those do not fit either."""
    widths = [max(len(label), *(len(r[i]) for r in rows)) for i, (_, label) in enumerate(COLUMNS)]
    room = available - 2 * padding * len(COLUMNS) - sum(widths) + widths[ORIGIN]
    label = len(COLUMNS[ORIGIN][1])
    if widths[ORIGIN] <= room:
        return lambda origin: origin
    if max(label, *(len(strategy(r[ORIGIN])) for r in rows)) <= room:
        return strategy
    cut = max(room, ORIGIN_MIN_WIDTH)
    return lambda origin: truncate(strategy(origin), cut)


class CandidateSelected(Message):
    """The candidate under the Queue's cursor changed (by a key, a click or a refresh)."""

    def __init__(self, candidate_id: str) -> None:
        super().__init__()
        self.candidate_id = candidate_id


class QueueTable(DataTable):
    """Rows keyed by candidate id; a refresh redraws changed cells only."""

    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.rows_by_id: dict[str, dict] = {}
        self.total = 0
        self.sort_column = "score"
        self.sort_reverse = SORT_DIRECTIONS["score"]
        self.follows_top = True  # until the user moves the cursor (a key or a click)
        self._placing = False  # the table, not the user, is moving the cursor
        self._shown: dict[str, list[str]] = {}  # plain text of each row's cells, as drawn
        self._pending = PendingCommands()
        self._announced: str | None = None

    def on_mount(self) -> None:
        self.border_title = "Queue"
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    @property
    def selected_id(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def show(self, candidates: list[dict], total: int, pending: PendingCommands) -> None:
        selected = self.selected_id
        self.rows_by_id = {row["id"]: row for row in candidates}
        self.total = total
        self._placing = True
        try:
            for gone in self._shown.keys() - self.rows_by_id.keys():
                self.remove_row(gone)
                del self._shown[gone]
            self.redraw(pending)
        finally:
            self._placing = False
        self._sort_keeping(selected)

    def redraw(self, pending: PendingCommands) -> None:
        """Draw every row's cells again (what changed only), with `pending`'s commands."""
        self._pending = pending
        texts = {i: cell_texts(row, pending.for_candidate(i)) for i, row in self.rows_by_id.items()}
        if not texts:
            return
        available = self.content_region.width - self.styles.scrollbar_size_vertical
        fit_origin = origin_fitter(list(texts.values()), available, self.cell_padding)
        for candidate_id, row in texts.items():
            row[ORIGIN] = fit_origin(row[ORIGIN])
            self._draw_row(candidate_id, row)

    def on_resize(self) -> None:
        self.redraw(self._pending)  # the origins take the width there is

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        self.sort_column = column
        self.sort_reverse = SORT_DIRECTIONS[column] if reverse is None else reverse
        self._sort_keeping(self.selected_id)

    def cycle_sort(self) -> None:
        columns = list(SORT_DIRECTIONS)
        self.sort_by(columns[(columns.index(self.sort_column) + 1) % len(columns)])

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = event.column_key.value
        self.sort_by(column, not self.sort_reverse if column == self.sort_column else None)

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        if not self._placing and old != new:
            self.follows_top = False

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._announce()

    def _announce(self) -> None:
        if (selected := self.selected_id) is not None and selected != self._announced:
            self._announced = selected
            self.post_message(CandidateSelected(selected))

    def _draw_row(self, candidate_id: str, texts: list[str]) -> None:
        old = self._shown.get(candidate_id)
        if old is None:
            self.add_row(*map(Text, texts), key=candidate_id)
        else:
            for (column, _), text, drawn in zip(COLUMNS, texts, old, strict=True):
                if text != drawn:
                    # The column grows (or shrinks) to its widest cell: a speedup that arrives
                    # after its row was first drawn is never cut to the width of a dash.
                    self.update_cell(candidate_id, column, Text(text), update_width=True)
        self._shown[candidate_id] = texts

    def _sort_keeping(self, selected: str | None) -> None:
        rows, column = self.rows_by_id, self.sort_column
        self.sort(
            "id", key=lambda cell: sort_value(rows[cell.plain], column), reverse=self.sort_reverse
        )
        arrow = "↓" if self.sort_reverse else "↑"
        self.border_subtitle = f"{len(rows)} of {self.total} · by {column} {arrow} (s)"
        self._placing = True
        try:
            if selected in rows and not self.follows_top:
                self.move_cursor(row=self.get_row_index(selected))
            elif rows:
                self.move_cursor(row=0)
        finally:
            self._placing = False
        self._announce()
