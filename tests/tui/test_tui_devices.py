"""The Budget pane's devices: one row per device of a session on several, none on one."""

from __future__ import annotations

import pytest
from pilot_helpers import settle

from engine.session_files import read_snapshot
from kbtui.app import KernelBrainApp
from kbtui.formatting import duration
from kbtui.widgets.budget import BudgetPane

pytestmark = pytest.mark.anyio


async def budget_lines(paths, size) -> list[str]:
    app = KernelBrainApp(paths)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await pilot.pause()
        pane = app.query_one(BudgetPane)
        return str(pane.query_one("Static").content).splitlines()


async def test_each_device_of_a_two_device_session_has_a_row(two_device_session):
    snapshot = read_snapshot(two_device_session)
    devices, status = snapshot["devices"], {c["id"]: c["status"] for c in snapshot["candidates"]}
    assert all(device["evaluating"] for device in devices)  # the engine ended mid-search
    lines = await budget_lines(two_device_session, (80, 24))
    rows = [line for line in lines if " (GPU " in line]
    assert len(rows) == len(devices) == 2
    for row, device in zip(rows, devices, strict=True):
        now = device["evaluating"]
        assert status[now["id"]] == "evaluating"
        label = "devices " if device["index"] == 0 else ""
        assert " ".join(row.split()) == (
            f"{label}d{device['index']} (GPU {device['gpu']}) evaluating {now['id']} "
            f"r{now['rung']} GPU {duration(device['gpu_seconds'])} {device['evaluations']} evals"
        )


async def test_a_one_device_session_has_no_device_rows(session):
    assert len(read_snapshot(session)["devices"]) == 1
    lines = await budget_lines(session, (80, 24))
    assert not [line for line in lines if line.startswith("devices") or " (GPU " in line]
