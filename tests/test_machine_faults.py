"""Faults have an owner: a machine that fails (a judge or runner that cannot start) rejects no
candidate and pauses the search, which goes on exactly once the fault is gone; a candidate that
crashes its own runner is still a crash. The faults are real failing processes: a `torch` that
cannot load (as oneMKL failed on an H200 under load) and a sandbox that cannot start."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from cli import kernelbrain

from engine.backends.faults import Backoff, judged
from engine.backends.local import LocalBackend
from engine.cli import main
from engine.compose import create_session, resume_session
from engine.jobs import MACHINE_FAULT, EvalJob, EvalResult, RungSpec
from engine.problems import load_problem
from engine.search.state import MACHINE_FAULTS_BEFORE_PAUSE
from engine.session.settings import SessionSettings
from engine.session_files import SessionPaths, read_events, read_snapshot, send_command
from engine.worker import Timeouts

CANDIDATES = Path(__file__).parent / "candidates"
MKL_FAILURE = "Intel oneMKL FATAL ERROR: Cannot load libtorch_cpu.so."
BROKEN_TORCH = f"""import os, sys
sys.stderr.write({MKL_FAILURE!r} + "\\n")
sys.stderr.flush()
os._exit(1)
"""
# bubblewrap that passes the judge's probe (`... true`) but cannot start a sandbox.
BROKEN_BWRAP = """#!/bin/sh
for last; do :; done
[ "$last" = true ] && exit 0
echo "bwrap: Creating new namespace failed: Cannot allocate memory" >&2
exit 1
"""
ONE_EVALUATION_S = 60  # a cpu evaluation takes seconds; a test waits no longer than this


@pytest.fixture
def no_backoff(monkeypatch):
    """Machine faults are asked again at once."""
    monkeypatch.setenv("KERNELBRAIN_FAULT_BACKOFF_S", "0")


def broken_torch(folder: Path) -> str:
    """A PYTHONPATH on which a fresh judge's `import torch` fails as oneMKL did."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(BROKEN_TORCH)
    return str(folder)


def events(paths: SessionPaths, kind: str) -> list[str]:
    return [e["message"] for e in read_events(paths) if e["kind"] == kind]


def test_a_judge_that_cannot_start_pauses_the_search_and_resume_finishes_it(
    tmp_path, monkeypatch, no_backoff
):
    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("rmsnorm", "cpu", seed=0, limits={"evaluations": 2}))
    with monkeypatch.context() as broken:
        broken.setenv("PYTHONPATH", broken_torch(tmp_path / "broken"))
        engine = resume_session(paths)
        try:
            engine.start()
            for _ in range(2 * MACHINE_FAULTS_BEFORE_PAUSE):
                engine.step()
                if engine.search.schedule.state == "paused":
                    break
        finally:  # the user stops the paused engine (Ctrl-C)
            engine.close()
            engine.lock.release()
            engine.store.close()
    paused = read_snapshot(paths)
    assert paused["state"] == "paused"
    assert [(c["id"], c["status"]) for c in paused["candidates"]] == [("c0001", "evaluating")]
    assert paused["ledger"]["evaluations"] == 0
    faults = events(paths, "machine_fault")
    assert len(faults) == MACHINE_FAULTS_BEFORE_PAUSE
    assert all(f"the judge could not start: {MKL_FAILURE}" in f for f in faults)
    [pause] = events(paths, "paused")
    assert MKL_FAILURE in pause and paused["pause_reason"] in pause
    assert "`kernelbrain unpause s`" in pause and "`kernelbrain resume s`" in pause

    resumed = kernelbrain("resume", "s", "--headless", "--sessions-dir", tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    done = read_snapshot(paths)
    assert (done["state"], done["stop_reason"]) == ("finished", "budget spent: evaluations")
    assert done["pause_reason"] is None and done["ledger"]["evaluations"] == 2
    assert done["candidates"][0]["id"] == "c0001"  # the candidate the fault held, evaluated
    assert done["candidates"][0]["status"] not in ("evaluating", "rejected")
    assert not events(paths, "rejected")
    assert "paused by machine faults before" in events(paths, "resumed")[0]


def test_a_headless_run_says_once_what_failed_and_unpause_goes_on(
    tmp_path, monkeypatch, capsys, no_backoff
):
    monkeypatch.setenv("PYTHONPATH", broken_torch(tmp_path / "broken"))
    run = ["run", "rmsnorm", "--backend", "cpu", "--budget", "1evals", "--session", "s",
           "--headless", "--sessions-dir", str(tmp_path)]  # fmt: skip
    outcome = {}
    headless = threading.Thread(target=lambda: outcome.update(status=main(run)))
    headless.start()
    paths = SessionPaths(tmp_path / "s")
    deadline = time.monotonic() + ONE_EVALUATION_S
    while (read_snapshot(paths) or {}).get("state") != "paused" and headless.is_alive():
        assert time.monotonic() < deadline, "the search did not pause"
        time.sleep(0.1)
    time.sleep(1.5)  # the paused engine keeps polling its inbox
    monkeypatch.delenv("PYTHONPATH")  # the fault is gone
    send_command(paths, "unpause")
    headless.join(ONE_EVALUATION_S)
    assert outcome == {"status": 0}
    err = capsys.readouterr().err
    assert err.count(MKL_FAILURE) == 1 and "`kernelbrain unpause s`" in err
    done = read_snapshot(paths)
    assert done["state"] == "finished" and done["ledger"]["evaluations"] == 1
    assert done["candidates"][0]["status"] != "rejected"
    assert done["ledger"]["paused_seconds"] >= 1.5  # the machine's pause spends no budget either


def broken_bwrap(folder: Path) -> str:
    """A KERNELBRAIN_BWRAP whose sandbox cannot start (the host out of memory)."""
    bwrap = folder / "bwrap"
    bwrap.write_text(BROKEN_BWRAP)
    bwrap.chmod(0o755)
    return str(bwrap)


def test_a_sandbox_that_cannot_start_is_a_machine_fault(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELBRAIN_BWRAP", broken_bwrap(tmp_path))
    backend = LocalBackend("cpu", backoff=Backoff(first_s=0))
    try:
        job = EvalJob("v1", (CANDIDATES / "softmax_valid.py").read_text(),
                      RungSpec(0, ("full0",), 1, 2, input_sets=1), seed=1)  # fmt: skip
        result = backend.evaluate(load_problem("softmax"), job)
        assert result.reason == MACHINE_FAULT, result.message
        assert "the runner could not start" in result.message
        assert "Cannot allocate memory" in result.message and "(3 tries)" in result.message
        assert backend.judge_client.starts == 1  # the judge itself lives on
    finally:
        backend.close()


def test_a_bench_stops_where_machine_faults_pause_its_search(tmp_path, monkeypatch, no_backoff):
    """Waiting would block the bench: it stops, saying what failed, and keeps the session."""
    monkeypatch.setenv("KERNELBRAIN_BWRAP", broken_bwrap(tmp_path))
    out = tmp_path / "out"
    bench = kernelbrain("bench", "rmsnorm", "--backend", "cpu", "--budget-per-problem", "1evals",
                        "--out", out)  # fmt: skip
    assert bench.returncode == 2
    assert "rmsnorm-ladder paused: 3 evaluations in a row failed for the machine" in bench.stderr
    assert "Cannot allocate memory" in bench.stderr and "the same --out" in bench.stderr
    paused = read_snapshot(SessionPaths(out / "sessions" / "rmsnorm-ladder"))
    assert paused["state"] == "paused" and paused["pause_reason"]
    assert [c["status"] for c in paused["candidates"]] == ["evaluating"]


def test_a_candidate_that_crashes_its_runner_again_in_a_fresh_one_is_a_crash():
    backend = LocalBackend("cpu", timeouts=Timeouts(compile_s=20, run_s=20, time_s=30))
    try:
        job = EvalJob("s1", (CANDIDATES / "softmax_segfault.py").read_text(),
                      RungSpec(0, ("full0",), 1, 2, input_sets=1), seed=1)  # fmt: skip
        result = backend.evaluate(load_problem("softmax"), job)
        assert result.reason == "crash", result.message
        assert "segmentation fault" in result.message
        assert "crashed again in a fresh runner, while a known-good request passed" in (
            result.message
        )
    finally:
        backend.close()


def answers(*results: EvalResult):
    """An evaluation that answers `results` in turn."""
    queue = list(results)
    return lambda: queue.pop(0)


def crash() -> EvalResult:
    return EvalResult(False, "crash", "the runner died of an abort")


def test_the_rule_blames_the_machine_where_the_known_good_request_fails_too():
    faults = [EvalResult(False, MACHINE_FAULT, "the judge could not start") for _ in range(3)]
    found = judged(answers(crash(), crash()), answers(*faults), Backoff(first_s=0))
    assert found.reason == MACHINE_FAULT
    assert "a known-good request failed too: the judge could not start (3 tries)" in found.message


def test_the_rule_blames_no_one_for_a_crash_that_a_fresh_runner_does_not_repeat():
    found = judged(answers(crash(), EvalResult(True)), answers(), Backoff(first_s=0))
    assert found.passed


def test_timing_that_looks_tampered_is_judged_again_in_a_fresh_runner():
    """A loaded host's delays look like work moved out of the timed call: the second timing's
    verdict stands (the adversarial tests' attacks are rejected again, test_judge_adversarial)."""
    def tampered() -> EvalResult:
        message = "handing over a timed call's output took 2.65 ms more than a no-op's"
        return EvalResult(False, "timing_tampered", message, gpu_seconds={"time": 1.5})

    passed = EvalResult(True, gpu_seconds={"time": 2.0, "check": 0.5})
    found = judged(answers(tampered(), passed), answers(), Backoff(first_s=0))
    assert found.passed and found.gpu_seconds == {"time": 3.5, "check": 0.5}  # both are charged
    assert found.message == f"timed again in a fresh runner after: {tampered().message}"
    again = judged(answers(tampered(), tampered(), passed), answers(), Backoff(first_s=0))
    assert again.reason == "timing_tampered"


def test_a_machine_fault_is_asked_again_with_backoff_then_reported():
    waits = []
    fault = EvalResult(False, MACHINE_FAULT, "the judge could not start")
    backoff = Backoff(tries=4, first_s=0.01, cap_s=0.02)
    started = time.monotonic()
    found = backoff.retried(lambda: waits.append(time.monotonic()) or fault)
    assert found.message == "the judge could not start (4 tries)"
    gaps = [b - a for a, b in zip(waits, waits[1:], strict=False)]
    assert len(gaps) == 3 and gaps[0] >= 0.01 and all(g >= 0.02 for g in gaps[1:])
    assert time.monotonic() - started < 1.0


FAILING_MODEL = """
import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta":  # traced on meta, failing on every real input
            raise RuntimeError("this Model runs on the meta device only")
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def evaluated_against(problem_file: Path) -> EvalResult:
    """A valid softmax candidate's verdict against the problem in `problem_file`, by the real
    cpu judge."""
    backend = LocalBackend("cpu", backoff=Backoff(first_s=0))
    try:
        job = EvalJob("v1", (CANDIDATES / "softmax_valid.py").read_text(),
                      RungSpec(0, ("default",), 1, 2, input_sets=1), seed=1)  # fmt: skip
        return backend.evaluate(load_problem(str(problem_file)), job)
    finally:
        backend.close()


def test_a_model_that_fails_on_its_own_inputs_is_the_problems_fault_and_pauses_at_once(tmp_path):
    """KernelBench's VanillaRNN at another batch and minGPT's block (before its float64 fix) made
    every candidate's check a `crash`: the judge died computing the reference. The verdict now
    names the problem, charges no candidate, and the search pauses at once, saying what to fix."""
    problem_file = tmp_path / "failing.py"
    problem_file.write_text(FAILING_MODEL)
    result = evaluated_against(problem_file)
    assert result.reason == "reference_failed", result.message
    assert "the problem's Model raised on its own inputs at default" in result.message
    assert "runs on the meta device only" in result.message

    paths = SessionPaths(tmp_path / "s")
    settings = SessionSettings(str(problem_file), "cpu", seed=0, limits={"evaluations": 2})
    create_session(paths, settings)
    engine = resume_session(paths)
    try:
        engine.start()
        for _ in range(4):
            engine.step()
            if engine.search.schedule.state == "paused":
                break
    finally:
        engine.close()
        engine.lock.release()
        engine.store.close()
    paused = read_snapshot(paths)
    assert paused["state"] == "paused" and paused["ledger"]["evaluations"] == 0
    assert "runs on the meta device only" in paused["pause_reason"]
    assert "Fix the problem file" in paused["pause_reason"]
    assert len(events(paths, "reference_failed")) == 1 and not events(paths, "rejected")


def test_a_reference_that_runs_out_of_memory_stays_the_machines_fault(tmp_path):
    problem_file = tmp_path / "needs_memory.py"
    problem_file.write_text(
        FAILING_MODEL.replace(
            'raise RuntimeError("this Model runs on the meta device only")',
            'raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")',
        )
    )
    result = evaluated_against(problem_file)
    assert result.reason == MACHINE_FAULT, result.message
    assert "Tried to allocate 7.00 GiB" in result.message
