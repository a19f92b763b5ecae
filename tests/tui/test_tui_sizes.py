"""The TUI at every size, read as text: every Queue column whole from 80x24 to 200x60 (the
speedup with its whole interval, also when it arrives after its row was drawn), the origin as
wide as the room allows, the status line broken between its parts instead of cut, the Budget
chart inside its pane, the status line on top in full screen, and `e` exporting into the
session's folder."""

from __future__ import annotations

import re

import pytest
from pilot_helpers import budget_pane, screen_text, select, settle, wait_until
from sim_session import NAME

from engine.session_files import read_snapshot, write_json_atomic
from kbtui.app import KernelBrainApp
from kbtui.formatting import MISSING, compact_interval, number, speedup_with_interval
from kbtui.plot import chart_place
from kbtui.widgets.queue import COLUMNS, origin_fitter, strategy

pytestmark = pytest.mark.anyio

SIZES = {"80x24": (80, 24), "120x40": (120, 40), "200x60": (200, 60)}
EVALUATING = "c0028"  # planned on a device of the two-device session when its engine ended
ROW = re.compile(r"│ (c\d{4}) ([^│]*)│")  # a Queue row: its id, then its other cells
SCROLLBAR = " ▁▂▃▄▅▆▇█"  # the Queue's scrollbar, in its last column


def queue_rows(lines: list[str]) -> dict[str, list[str]]:
    """The Queue's rows on screen by candidate id: their cells, split where two spaces part
    them (a cell holds one space at most: "1.05 [1.02,1.08]")."""
    rows = {}
    for line in lines:
        if match := ROW.search(line):
            cells = match[2].rstrip(SCROLLBAR).strip()
            rows[match[1]] = [match[1], *re.split(r" {2,}", cells)]
    return rows


def assert_whole(cells: list[str], row: dict, flags: str = "", full_origin: bool = True) -> None:
    """Every cell of a snapshot row as the Queue shows it, none cut; the origin in full, or its
    strategy's own name where the table has no room for the full one."""
    origin = row["origin"]
    assert cells[1] == (origin if full_origin else strategy(origin)), cells
    expected = [
        row.get("parent") or MISSING,
        str(row["rung"]),
        row["status"],
        number(row.get("score")),
        compact_interval(row.get("speedup"), row.get("speedup_ci")),
    ]
    assert cells[2:7] == expected, cells
    assert cells[7:] == ([flags] if flags else []), cells


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
async def test_every_queue_column_is_whole_at_each_size(two_device_session, size):
    snapshot = read_snapshot(two_device_session)
    rows = {row["id"]: row for row in snapshot["candidates"]}
    assert rows[EVALUATING]["status"] == "evaluating"
    app = KernelBrainApp(two_device_session)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        top = queue_rows(screen_text(app))  # the best rows, each with its interval
        await select(pilot, EVALUATING)
        await pilot.press("p")  # no engine runs: the pin waits, and its row says "pin…"
        await pilot.pause()
        lines = screen_text(app)
    shown = queue_rows(lines)
    assert EVALUATING in shown and len(shown) >= 6
    assert sum(bool(rows[candidate_id]["speedup_ci"]) for candidate_id in top) >= 6
    full_origin = size != (80, 24)  # 80 columns leave the origin 14 cells, not the 16 it needs
    for candidate_id, cells in top.items():
        assert_whole(cells, rows[candidate_id], full_origin=full_origin)
    for candidate_id, cells in shown.items():
        flags = "pin…" if candidate_id == EVALUATING else ""
        assert_whole(cells, rows[candidate_id], flags, full_origin=full_origin)
    best = snapshot["best"]
    best_text = f"best {best['id']} {speedup_with_interval(best['speedup'], best['speedup_ci'])}"
    assert best_text in lines[0]


async def test_a_speedup_that_arrives_after_its_row_is_drawn_is_whole(session):
    """The first snapshot has no speedup yet (every row a dash); the next has them all. The
    column widens to them (it stayed as wide as its header: "2.85 [2.83,2")."""
    snapshot = read_snapshot(session)
    early = {**snapshot, "step": 1, "best": None}
    early["candidates"] = [
        {**row, "status": "queued", "score": None, "speedup": None, "speedup_ci": None}
        for row in snapshot["candidates"]
    ]
    write_json_atomic(session.snapshot, early)
    app = KernelBrainApp(session, poll_seconds=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        write_json_atomic(session.snapshot, snapshot)
        await wait_until(pilot, lambda: app.snapshot["step"] == snapshot["step"])
        await pilot.pause()
        shown = queue_rows(screen_text(app))
    rows = {row["id"]: row for row in snapshot["candidates"]}
    assert len(shown) > 30
    for candidate_id, cells in shown.items():
        row = rows[candidate_id]
        marks = " ".join(mark for key, mark in (("pinned", "pin"), ("vetoed", "veto")) if row[key])
        assert_whole(cells, row, marks)


def test_the_origin_takes_the_room_the_other_columns_leave():
    row = ["c0012", "elementwise.persistent_grid_stride", "c0003", "1", "evaluating", "1.23",
           "1.23 [1.10,1.35]", "pin"]  # fmt: skip
    widths = [max(len(label), len(cell)) for (_, label), cell in zip(COLUMNS, row, strict=True)]
    others = sum(widths) + 2 * len(widths)
    others -= len(row[1]) + 2
    whole = others + 2 + len(row[1])
    assert origin_fitter([row], whole, 1)(row[1]) == row[1]
    assert origin_fitter([row], whole - 1, 1)(row[1]) == "persistent_grid_stride"
    assert origin_fitter([row], others + 2 + 12, 1)(row[1]) == "persistent_…"
    assert origin_fitter([row], 40, 1)(row[1]) == "persist…"  # never less than 8 cells


async def test_the_status_line_breaks_between_its_parts_at_80_columns(session):
    snapshot = read_snapshot(session)
    write_json_atomic(
        session.snapshot,
        {**snapshot, "precision_policy": "tf32", "allowed_torch_ops": ["mm", "bmm"],
         "timings_meaningful": False},
    )  # fmt: skip
    app = KernelBrainApp(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = screen_text(app)
    best = snapshot["best"]
    parts = [
        f"{NAME} matvec", "sim", "finished", f"step {snapshot['step']}",
        f"best {best['id']} {speedup_with_interval(best['speedup'], best['speedup_ci'])}",
        "TF32 allowed", "torch mm,bmm allowed", "timings not meaningful",
        "engine not running",
    ]  # fmt: skip
    head = lines[:3]
    assert not any("…" in line for line in head), head
    for part in parts:
        assert any(part in line for line in head), (part, head)
    assert "╭─ Queue" in lines[3]


async def test_full_screen_keeps_the_status_line_on_top(session):
    app = KernelBrainApp(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await pilot.pause()
        lines = screen_text(app)
    assert lines[0].startswith(f" {NAME} matvec · sim")
    assert "Noise  Profiler" in lines[2]
    assert not any(NAME in line for line in lines[3:])


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
async def test_the_budget_chart_fits_its_pane(session, size):
    """The whole ledger and the whole chart (title, bars, axis) on screen, without a scrollbar:
    beside the ledger's first lines at 80x24, below it where the pane has the rows."""
    app = KernelBrainApp(session)
    async with app.run_test(size=size) as pilot:
        pane = await budget_pane(app, pilot)
        assert not pane.show_vertical_scrollbar
        assert pane.virtual_size.height <= pane.scrollable_content_region.height
        lines = screen_text(app)
    text = "\n".join(lines)
    for label in ("wall", "best speedup", "GPU by rung", "off the GPU", "LLM tokens"):
        assert f" {label} " in text
    [title] = [line for line in lines if "best speedup vs GPU-seconds" in line or
               line.rstrip().endswith("best speedup")]  # fmt: skip
    best = f"{read_snapshot(session)['best']['speedup']:.2f}×"
    assert sum(best in line for line in lines) >= 2  # the best in the ledger, the axis
    assert any(line.rstrip().endswith("s GPU") for line in lines)  # the axis's seconds
    assert ("left" in title) == (size == (80, 24))  # beside the ledger's header only there


def test_the_chart_goes_below_beside_or_scrolls():
    ledger = [50] * 6 + [66] * 4  # the sim session's: six narrow lines, four wide
    assert chart_place(ledger, 76, 20) == (0, 10, 76, 8)  # ten rows spare: bars in eight
    assert chart_place(ledger, 76, 14) == (0, 10, 76, 2)
    assert chart_place(ledger, 76, 10) == (53, 0, 23, 4)  # beside the six narrow lines
    assert chart_place(ledger, 60, 10) == (0, 10, 60, 2)  # no room beside: below, scrolled


async def test_export_writes_into_the_session_folder_and_says_where(session, tmp_path,
                                                                    monkeypatch):  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    app = KernelBrainApp(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        chosen = app.selected_id
        await pilot.press("e")
        await pilot.pause()
        said = [n.message for n in app._notifications]
    target = session.root / f"{NAME}_{chosen}.py"
    assert "class ModelNew" in target.read_text()
    assert list(elsewhere.iterdir()) == []
    assert f"exported {chosen} to {target.resolve()}" in said
