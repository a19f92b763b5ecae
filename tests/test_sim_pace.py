"""The sim backend at a GPU's pace: an evaluation lasts the GPU time it simulates, so a default
demonstration run lasts minutes (time to pin and veto), with the same results as at once."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.backends.sim import SIM_PACE_ENV, SimBackend
from engine.errors import KernelBrainError
from engine.jobs import EvalJob, RungSpec
from engine.problems import load_problem
from engine.session_files import SessionPaths, read_snapshot

VALID = (Path(__file__).parent / "candidates" / "softmax_valid.py").read_text()
RUNG_0 = RungSpec(0, ("full0",), warmup=3, reps=10)
DEMO_MINUTES = 2  # long enough to watch a search and to pin and veto in it


def test_a_sim_evaluation_lasts_the_gpu_time_it_simulates(monkeypatch):
    softmax = load_problem("softmax")
    job = EvalJob("c0001", VALID, RUNG_0, seed=0)
    monkeypatch.delenv(SIM_PACE_ENV)  # the default: a GPU's pace
    start = time.monotonic()
    paced = SimBackend().evaluate(softmax, job)
    took = time.monotonic() - start
    simulated = sum(paced.gpu_seconds.values())
    assert simulated > 0.5 and took >= simulated
    monkeypatch.setenv(SIM_PACE_ENV, "0")
    assert SimBackend().evaluate(softmax, job).to_dict() == paced.to_dict()
    monkeypatch.setenv(SIM_PACE_ENV, "fast")
    with pytest.raises(KernelBrainError, match="KERNELBRAIN_SIM_PACE='fast': give the wall"):
        SimBackend()


def test_a_default_sim_run_on_softmax_lasts_minutes_at_a_gpus_pace(tmp_path):
    """Run at the tests' pace (0): the GPU time it simulates is what it lasts by default."""
    subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "softmax", "--backend", "sim", "--headless",
         "--session", "demo", "--sessions-dir", str(tmp_path)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    ledger = read_snapshot(SessionPaths(tmp_path / "demo"))["ledger"]
    simulated = ledger["gpu_seconds"] + sum(ledger["cpu_seconds_by_activity"].values())
    assert simulated >= DEMO_MINUTES * 60  # GPU time and compiling, both slept through
