"""Durable sessions on the sim backend, through the real CLI: kill -9, Ctrl-C and a running engine
in real processes, the rest of the commands called in this process (tests/cli.py)."""

import json
import os
import random
import signal
import subprocess
import time

import pytest
from cli import CLI, kernelbrain

from engine.session.store import Store
from engine.session_files import SessionPaths, read_events, read_snapshot, send_command

# wall-clock readings and what derives from them (idle: wall less busy; paused: wall stood still)
CLOCK = {"wall_seconds", "idle_seconds", "paused_seconds"}
VOLATILE = CLOCK | {"updated_at", "issued_at", "applied_at", "ts", "engine_pid", "session"}


def kb(*args, sessions, check=True):
    out = kernelbrain(*args, "--sessions-dir", sessions)
    if check and out.returncode != 0:
        raise AssertionError(f"kernelbrain {' '.join(args)} failed:\n{out.stderr}")
    return out


def stable(data):
    """`show --json` without what legitimately differs between two runs: times, names."""
    if isinstance(data, dict):
        return {k: stable(v) for k, v in data.items() if k not in VOLATILE}
    if isinstance(data, list):
        return [stable(v) for v in data]
    return data


def show(name, sessions):
    return json.loads(kb("show", name, "--json", sessions=sessions).stdout)


def run_args(name, seed, budget="60evals", problem="softmax", gpus="1"):
    return [
        "run",
        problem,
        "--backend",
        "sim",
        "--seed",
        str(seed),
        "--budget",
        budget,
        "--session",
        name,
        "--gpus",
        gpus,
        "--headless",
    ]


def progressed(proc, paths: SessionPaths, step: int, timeout=120) -> bool:
    """Wait until the published step passes `step`; False when the process ends first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if (read_snapshot(paths) or {}).get("step", -1) > step:
            return True
        assert time.monotonic() < deadline, "the engine made no progress"
        time.sleep(0.05)
    return False


MAX_KILLS = 5


@pytest.mark.slow
@pytest.mark.parametrize("seed, gpus", [(1, "1"), (2, "1"), (3, "1"), (1, "2")])
def test_killed_and_resumed_run_equals_uninterrupted_run(tmp_path, seed, gpus):
    """kill -9 at random moments, each once the engine has stepped since the last kill (a resume
    spends seconds importing torch: on a busy machine blind kills can starve the run), at most
    MAX_KILLS times (each costs a resume; more show nothing more); on one device and on two
    simulated ones (evaluations in flight on both when it is killed)."""
    # matvec's search runs long on sim: 200 evaluations take a few seconds, time for kills.
    args = {"seed": seed, "budget": "200evals", "problem": "matvec", "gpus": gpus}
    kb(*run_args("straight", **args), sessions=tmp_path)
    rng = random.Random(seed)
    paths = SessionPaths(tmp_path / "killed")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen(
        [*CLI, *run_args("killed", **args), "--sessions-dir", str(tmp_path)], **quiet
    )
    kills = 0
    while kills < MAX_KILLS and progressed(
        proc, paths, (read_snapshot(paths) or {}).get("step", -1)
    ):
        try:
            proc.wait(timeout=rng.uniform(0.0, 1.0))
            break
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            resume = [*CLI, "resume", "killed", "--headless", "--sessions-dir", str(tmp_path)]
            proc = subprocess.Popen(resume, **quiet)
    assert proc.wait() == 0
    straight, killed = show("straight", tmp_path), show("killed", tmp_path)
    assert straight["state"] == killed["state"] == "finished"
    assert stable(killed) == stable(straight), f"differs after {kills} kills"
    assert kills >= 1, "the run ended before any kill: make the budget larger"


def test_show_json_holds_the_contract(tmp_path):
    kb(*run_args("s", 0, "30evals"), sessions=tmp_path)
    data = show("s", tmp_path)
    assert {"session", "problem", "state", "best", "candidates", "ledger", "commands"} <= set(data)
    assert data["ledger"]["evaluations"] == 30
    assert data["precision_policy"] == "strict"  # the default
    assert set(data["ledger"]) >= {
        "gpu_seconds",
        "gpu_seconds_by_rung",
        "gpu_seconds_by_activity",
        "llm_tokens_in",
        "llm_tokens_out",
        "llm_cost_usd",
        "wall_seconds",
        "evaluations",
    }
    assert sum(data["ledger"]["gpu_seconds_by_rung"].values()) == pytest.approx(
        data["ledger"]["gpu_seconds"], rel=1e-6
    )
    row = data["candidates"][0]
    assert set(row) >= {"id", "sha256", "parent", "origin", "rung", "status", "score", "reason"}
    assert len({c["sha256"] for c in data["candidates"]}) == len(data["candidates"])
    assert data["best"]["speedup"] == max(
        c["speedup"] or 0 for c in data["candidates"] if c["id"] == data["best"]["id"]
    )
    assert any(c["parent"] for c in data["candidates"]), "no mutation was generated"
    assert max(c["rung"] for c in data["candidates"]) >= 1


def test_profiles_hold_at_most_a_quarter_of_the_gpu_seconds(tmp_path):
    """A short search spends nothing on profiles; a longer one profiles, within the share."""
    kb(*run_args("short", 0, "10evals", problem="matvec"), sessions=tmp_path)
    short = show("short", tmp_path)["ledger"]
    assert short["gpu_seconds_by_activity"]["profile"] == 0.0
    assert short["gpu_seconds_by_rung"].get("1", 0.0) > 0.0, "no rung 1 evaluation to profile"
    kb(*run_args("long", 0, "80evals", problem="matvec"), sessions=tmp_path)
    long = show("long", tmp_path)["ledger"]
    profiled = long["gpu_seconds_by_activity"]["profile"]
    assert 0.0 < profiled <= 0.25 * long["gpu_seconds"]


def test_control_commands_apply_once_on_a_stopped_session(tmp_path):
    kb(*run_args("s", 0, "12evals"), sessions=tmp_path)
    paths = SessionPaths(tmp_path / "s")
    first = show("s", tmp_path)
    victim = first["candidates"][0]["id"]
    keeper = first["candidates"][1]["id"]
    kb("veto", "s", victim, sessions=tmp_path)
    kb("pin", "s", keeper, sessions=tmp_path)
    kb("budget", "s", "+6evals", sessions=tmp_path)
    kb("resume", "s", "--headless", sessions=tmp_path)
    after = show("s", tmp_path)
    by_id = {c["id"]: c for c in after["candidates"]}
    assert by_id[victim]["status"] == "vetoed"
    assert by_id[keeper]["status"] != "pruned"
    assert after["ledger"]["evaluations"] == 18
    assert [c["command"] for c in after["commands"]] == ["veto", "pin", "budget"]
    assert all(c["status"] == "applied" for c in after["commands"])
    acknowledged = [e for e in read_events(paths) if e["kind"] == "command_applied"]
    assert len(acknowledged) == 3
    assert not list(paths.inbox.glob("*.json"))
    # Applied exactly once: resuming again applies nothing new.
    kb("budget", "s", "+2evals", sessions=tmp_path)
    kb("resume", "s", "--headless", sessions=tmp_path)
    assert len(show("s", tmp_path)["commands"]) == 4
    # A vetoed source is never generated again.
    shas = [c["sha256"] for c in show("s", tmp_path)["candidates"]]
    assert len(shas) == len(set(shas))


def test_commands_reach_a_running_engine(tmp_path):
    proc = subprocess.Popen(
        [*CLI, *run_args("live", 0, "100000evals"), "--sessions-dir", str(tmp_path)],
        stderr=subprocess.PIPE,
        text=True,
    )
    paths = SessionPaths(tmp_path / "live")
    deadline = time.time() + 60
    while not paths.snapshot.exists() and time.time() < deadline:
        time.sleep(0.1)
    pause = send_command(paths, "pause")
    wait_for_event(paths, pause["id"])
    # The event is committed before the snapshot of its step is published: wait for that.
    deadline = time.time() + 30
    while json.loads(paths.snapshot.read_text())["state"] != "paused" and time.time() < deadline:
        time.sleep(0.05)
    step = json.loads(paths.snapshot.read_text())["step"]
    time.sleep(1.0)
    assert json.loads(paths.snapshot.read_text())["step"] == step, "paused engine kept stepping"
    second = subprocess.run(
        [*CLI, "resume", "live", "--headless", "--sessions-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 2 and "already run by engine" in second.stderr
    send_command(paths, "unpause")
    kb("stop", "live", sessions=tmp_path)
    assert proc.wait(timeout=60) == 0
    assert show("live", tmp_path)["state"] == "stopped"


def wait_for_event(paths, command_id, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(e.get("command") == command_id for e in read_events(paths)):
            return
        time.sleep(0.05)
    raise AssertionError(f"command {command_id} was never acknowledged")


def test_unknown_problem_and_bad_budget_are_usage_errors(tmp_path):
    out = kb("run", "nosuch", "--backend", "sim", "--headless", sessions=tmp_path, check=False)
    assert out.returncode == 2 and "built-in name" in out.stderr
    out = kb(
        "run", "softmax", "--budget", "10 parsecs", "--headless", sessions=tmp_path, check=False
    )
    assert out.returncode == 2 and "200evals" in out.stderr
    assert not os.listdir(tmp_path) or not (tmp_path / "softmax").exists()


def test_stops_at_target_speedup_and_at_wall_time(tmp_path):
    kb(
        "run",
        "softmax",
        "--backend",
        "sim",
        "--seed",
        "0",
        "--budget",
        "100000evals",
        "--target-speedup",
        "1.2",
        "--session",
        "target",
        "--headless",
        sessions=tmp_path,
    )
    data = show("target", tmp_path)
    assert data["stop_reason"] == "target speedup 1.2x reached"
    confirmed = [c for c in data["candidates"] if c["rung"] == 2 and c["status"] == "done"]
    assert any(c["speedup"] >= 1.2 for c in confirmed)
    kb(
        "run",
        "matvec",
        "--backend",
        "sim",
        "--budget",
        "3s",
        "--session",
        "wall",
        "--headless",
        sessions=tmp_path,
    )
    data = show("wall", tmp_path)
    assert data["stop_reason"] == "budget spent: wall_seconds"
    assert 3 <= data["ledger"]["wall_seconds"] < 30


def test_precision_policy_is_kept_with_the_session_and_on_resume(tmp_path):
    kb(*run_args("t", 0, "6evals", "linear_relu_div"), "--precision", "tf32", sessions=tmp_path)
    first = show("t", tmp_path)
    assert first["precision_policy"] == "tf32"
    kb("budget", "t", "+20evals", sessions=tmp_path)
    kb("resume", "t", "--headless", sessions=tmp_path)  # no --precision: the session's holds
    data = show("t", tmp_path)
    assert data["precision_policy"] == "tf32" and data["ledger"]["evaluations"] == 26
    assert "precision policy: tf32" in kb("show", "t", sessions=tmp_path).stdout
    store = Store(tmp_path / "t" / "state.duckdb", read_only=True)
    candidates = [c for c in store.candidates() if c.origin != "composite"]  # generated ones
    store.close()
    coarse = {c.params["precision"] for c in candidates if not c.parent}
    resumed = {c.params["precision"] for c in candidates if c.created_step > first["step"]}
    assert coarse == {"tf32"}
    assert "tf32x3" in resumed  # a neighbour of the coarse tf32 candidates


def test_ls_and_export(tmp_path):
    kb(*run_args("s", 0, "20evals"), sessions=tmp_path)
    listing = kb("ls", sessions=tmp_path).stdout.splitlines()
    assert listing[0].split() == ["SESSION", "PROBLEM", "STATE", "BEST", "BUDGET", "USED"]
    name, problem, state, best = listing[1].split()[:4]
    assert (name, problem, state) == ("s", "softmax", "finished") and best.endswith("x")
    exported = tmp_path / "best.py"
    kb("export", "s", "-o", str(exported), sessions=tmp_path)
    text = exported.read_text()
    best_id = show("s", tmp_path)["best"]["id"]
    assert f"candidate {best_id} for problem softmax" in text and "class ModelNew" in text
    compile(text, str(exported), "exec")  # a standalone module
    out = kb("export", "s", "--candidate", "c9999", sessions=tmp_path, check=False)
    assert out.returncode == 2 and "no candidate 'c9999'" in out.stderr


@pytest.mark.slow
def test_killed_cpu_run_loses_at_most_the_evaluation_in_flight(tmp_path):
    """On a real backend timings differ between runs, so resume cannot be exact; what was
    committed before the kill survives it unchanged and the budget is spent exactly once."""
    paths = SessionPaths(tmp_path / "cpu")
    args = ["run", "rmsnorm", "--backend", "cpu", "--budget", "14evals", "--session", "cpu",
            "--headless", "--sessions-dir", str(tmp_path)]  # fmt: skip
    proc = subprocess.Popen([*CLI, *args], stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        snapshot = json.loads(paths.snapshot.read_text()) if paths.snapshot.exists() else {}
        if snapshot.get("step", 0) >= 4:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {c["id"]: c for c in show("cpu", tmp_path)["candidates"] if c["score"] is not None}
    assert len(before) >= 3
    kb("resume", "cpu", "--headless", sessions=tmp_path)
    after = show("cpu", tmp_path)
    assert after["state"] == "finished" and after["ledger"]["evaluations"] == 14
    by_id = {c["id"]: c for c in after["candidates"]}
    for cid, c in before.items():
        if by_id[cid]["rung"] == c["rung"]:  # not promoted since: its result is untouched
            assert by_id[cid]["score"] == c["score"]


def test_the_answer_is_censused_once_before_the_search_ends(tmp_path):
    """The search's best gets the kernel census at every target size as the search finishes,
    charged as checking; a resumed, finished search does not census it again."""
    kb(*run_args("census", 3, "60evals", problem="matvec"), sessions=tmp_path)
    paths = SessionPaths(tmp_path / "census")
    best = show("census", tmp_path)["best"]["id"]
    events = read_events(paths)
    [census] = [e for e in events if e["kind"] == "census"]
    assert census["candidate"] == best
    assert census["message"].startswith(f"{best}: kernel census at full0, full1, full2: ")
    assert events[-1]["kind"] == "finished" and events.index(census) == len(events) - 2
    kb("resume", "census", "--headless", sessions=tmp_path)
    assert [e["candidate"] for e in read_events(paths) if e["kind"] == "census"] == [best]
