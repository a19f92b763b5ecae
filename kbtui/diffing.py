"""Align two sources line by line for a diff, side by side or unified (difflib, no third-party
diff), and cut the unchanged stretches out of it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from itertools import zip_longest


@dataclass(frozen=True)
class DiffRow:
    """One row of a diff; `left` and `right` are 0-based line numbers or None."""

    tag: str  # "equal", "replace", "delete" or "insert"
    left: int | None
    right: int | None


def _opcodes(old_lines: list[str], new_lines: list[str]):
    return difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_opcodes()


def side_by_side(old_lines: list[str], new_lines: list[str]) -> list[DiffRow]:
    """Rows pairing each old line with its new counterpart; a blank side where one has none."""
    rows: list[DiffRow] = []
    for tag, old_start, old_end, new_start, new_end in _opcodes(old_lines, new_lines):
        pairs = zip_longest(range(old_start, old_end), range(new_start, new_end))
        rows.extend(DiffRow(tag, left, right) for left, right in pairs)
    return rows


def unified(old_lines: list[str], new_lines: list[str]) -> list[DiffRow]:
    """Rows of one column: each changed stretch as its removed lines, then its added lines."""
    rows: list[DiffRow] = []
    for tag, old_start, old_end, new_start, new_end in _opcodes(old_lines, new_lines):
        if tag == "equal":
            pairs = zip(range(old_start, old_end), range(new_start, new_end), strict=True)
            rows.extend(DiffRow(tag, left, right) for left, right in pairs)
        else:
            rows.extend(DiffRow("delete", left, None) for left in range(old_start, old_end))
            rows.extend(DiffRow("insert", None, right) for right in range(new_start, new_end))
    return rows


def hunks(rows: list[DiffRow], context: int) -> list[DiffRow | int]:
    """The rows within `context` rows of a change; each run of rows left out becomes its length."""
    kept = set()
    for index, row in enumerate(rows):
        if row.tag != "equal":
            kept.update(range(index - context, index + context + 1))
    shown: list[DiffRow | int] = []
    for index, row in enumerate(rows):
        if index in kept:
            shown.append(row)
        elif shown and isinstance(shown[-1], int):
            shown[-1] += 1
        else:
            shown.append(1)
    return shown


def change_counts(rows: list[DiffRow]) -> tuple[int, int]:
    """Lines added and removed."""
    added = sum(1 for row in rows if row.tag != "equal" and row.right is not None)
    removed = sum(1 for row in rows if row.tag != "equal" and row.left is not None)
    return added, removed
