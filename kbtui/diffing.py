"""Align two sources line by line for a side-by-side diff (difflib, no third-party diff)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from itertools import zip_longest


@dataclass(frozen=True)
class DiffRow:
    """One row of a side-by-side diff; `left` and `right` are 0-based line numbers or None."""

    tag: str  # "equal", "replace", "delete" or "insert"
    left: int | None
    right: int | None


def side_by_side(old_lines: list[str], new_lines: list[str]) -> list[DiffRow]:
    """Rows pairing each old line with its new counterpart; a blank side where one has none."""
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        pairs = zip_longest(range(old_start, old_end), range(new_start, new_end))
        rows.extend(DiffRow(tag, left, right) for left, right in pairs)
    return rows


def change_counts(rows: list[DiffRow]) -> tuple[int, int]:
    """Lines added and removed."""
    added = sum(1 for row in rows if row.tag != "equal" and row.right is not None)
    removed = sum(1 for row in rows if row.tag != "equal" and row.left is not None)
    return added, removed
