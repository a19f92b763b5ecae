"""The Budget pane's devices: one row per device of a session on several, none on one; and
its words for them: GPU, or "device" on the cpu backend."""

from __future__ import annotations

import pytest
from pilot_helpers import budget_pane

from engine.session_files import read_snapshot
from kbtui.app import KernelBrainApp
from kbtui.formatting import duration
from kbtui.widgets.status import SessionStatus

pytestmark = pytest.mark.anyio


async def budget_lines(paths, size) -> list[str]:
    app = KernelBrainApp(paths)
    async with app.run_test(size=size) as pilot:
        pane = await budget_pane(app, pilot)
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


async def budget_pane_and_status_line(paths, size) -> tuple[list[str], str]:
    """The Budget pane's text (ledger, chart: its title, then the plot) and the status line, as
    drawn."""
    app = KernelBrainApp(paths)
    async with app.run_test(size=size) as pilot:
        pane = await budget_pane(app, pilot)
        texts = [str(static.content) for static in pane.query("Static")]
        return texts, str(app.query_one(SessionStatus).content)


async def test_the_budget_pane_of_a_cpu_session_says_device_not_gpu(cpu_session, session):
    """On the cpu backend the device is the CPU (Triton's interpreter): the pane counts device
    seconds and says GPU nowhere, nor does the status line; the sim backend simulates a GPU and
    keeps its words."""
    assert read_snapshot(cpu_session)["backend"] == "cpu"
    (ledger, chart), status = await budget_pane_and_status_line(cpu_session, (100, 30))
    title, plot = chart.split("\n", 1)
    for text in (ledger, title, plot, status):
        assert "gpu" not in text.lower(), text
    rows = {line.split("  ")[0]: line for line in ledger.splitlines()}
    assert {"device", "device by rung", "device by activity", "off the device"} <= set(rows)
    assert "10m00s" in rows["device"]  # the limit given as 600device-s
    assert title == "best speedup vs device-seconds" and plot.endswith(" device")

    (ledger, chart), _ = await budget_pane_and_status_line(session, (100, 30))
    title, plot = chart.split("\n", 1)
    rows = {line.split("  ")[0] for line in ledger.splitlines()}
    assert {"GPU", "GPU by rung", "GPU by activity", "off the GPU"} <= rows
    assert title == "best speedup vs GPU-seconds" and plot.endswith(" GPU")
