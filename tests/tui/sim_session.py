"""The TUI tests' sessions: made by real sim runs (the first through the real CLI), then made
stable; and one real cpu run, whose timings vary, for what does not depend on them.

The sim backend is deterministic for a seed (same candidates, scores and samples), so the only
values that differ between two runs are wall-clock ones; `normalise_wall_clock` fixes exactly
those in the published files (state.duckdb stays as the engine wrote it: only an engine reads
it). The sim backend does no profiling, so one candidate gets the recorded H200 profile."""

from __future__ import annotations

import json
from pathlib import Path

from cli import kernelbrain

from engine.compose import create_session, resume_session
from engine.profiler.csvparse import parse_details, parse_raw
from engine.profiler.diagnosis import diagnose
from engine.profiler.ncu import REQUESTED_METRICS
from engine.session.settings import SessionSettings
from engine.session_files import (
    SessionPaths,
    read_candidate,
    read_snapshot,
    send_command,
    write_json_atomic,
)

REPO = Path(__file__).resolve().parents[2]
NCU_DATA = REPO / "tests" / "data" / "ncu"
NAME = "sim-demo"
# matvec: its search space outlasts the pilot tests' live engines (softmax's runs dry soon after).
PROBLEM, SEED = "matvec", 0
FIRST_EVALS, MORE_EVALS = 30, 30
TWO_DEVICE_NAME, TWO_DEVICE_STEPS = "sim-two", 40
CPU_NAME, CPU_PROBLEM, CPU_BUDGET = "cpu-demo", "softmax", "3evals,600device-s"
START = 1764480000.0  # 2025-11-30 05:20:00 UTC: the normalised clock starts here
EVENT_SPACING_S = 0.1
WALL_SECONDS = 2.5


def engine_cli(*args: str, sessions_dir: Path) -> None:
    result = kernelbrain(*args, "--sessions-dir", sessions_dir)
    if result.returncode != 0:
        raise AssertionError(f"kernelbrain {' '.join(args)} failed:\n{result.stderr}")


def run_sim_session(sessions_dir: Path) -> SessionPaths:
    """A finished matvec search on the sim backend, with a pin and a veto the user sent between
    its two runs: `run` for FIRST_EVALS evaluations, then `resume` once the inbox holds the pin,
    the veto and MORE_EVALS more evaluations of budget."""
    engine_cli(
        "run", PROBLEM, "--backend", "sim", "--headless", "--seed", str(SEED),
        "--budget", f"{FIRST_EVALS}evals", "--session", NAME, sessions_dir=sessions_dir,
    )  # fmt: skip
    paths = SessionPaths(sessions_dir / NAME)
    rows = read_snapshot(paths)["candidates"]
    pruned = [r for r in rows if r["status"] == "pruned"]
    queued = [r for r in rows if r["status"] == "queued"]
    send_command(paths, "pin", candidate=max(pruned, key=lambda r: r["score"])["id"])
    send_command(paths, "veto", candidate=queued[0]["id"])
    send_command(paths, "budget", amount=f"+{MORE_EVALS}evals")
    engine_cli("resume", NAME, "--headless", sessions_dir=sessions_dir)
    return paths


def run_two_device_session(sessions_dir: Path) -> SessionPaths:
    """A matvec search on two simulated devices whose engine ended after TWO_DEVICE_STEPS steps,
    as a killed one ends after a commit: an evaluation planned on each device, both stored."""
    paths = SessionPaths(sessions_dir / TWO_DEVICE_NAME)
    limits = {"evaluations": 1000}
    create_session(paths, SessionSettings(PROBLEM, "sim", SEED, limits, gpus=(0, 1)))
    engine = resume_session(paths)
    try:
        engine.start()
        for _ in range(TWO_DEVICE_STEPS):
            engine.step()
    finally:
        engine.lock.release()
        engine.close()
        engine.store.close()
    return paths


def run_cpu_session(sessions_dir: Path) -> SessionPaths:
    """A finished softmax search on the cpu backend (Triton's interpreter, real timings that
    mean nothing), through the real CLI, with a device-seconds limit among its budget."""
    engine_cli(
        "run", CPU_PROBLEM, "--backend", "cpu", "--headless", "--seed", str(SEED),
        "--budget", CPU_BUDGET, "--session", CPU_NAME, sessions_dir=sessions_dir,
    )  # fmt: skip
    return SessionPaths(sessions_dir / CPU_NAME)


def recorded_h200_profile() -> dict:
    """The diagnosis engine.profiler makes of the ncu output recorded on the H200
    (tests/data/ncu: one launch of a memory-bound Triton RMSNorm kernel)."""
    row = parse_raw((NCU_DATA / "h200_rmsnorm_raw.csv").read_text()).rows[0]
    details = parse_details((NCU_DATA / "h200_rmsnorm_details.csv").read_text())[0]
    return diagnose(row, details, REQUESTED_METRICS)


def give_recorded_profile(paths: SessionPaths, candidate_id: str) -> None:
    """Put the recorded H200 profile in a candidate's detail file, where a cuda run puts its own."""
    detail = read_candidate(paths, candidate_id)
    write_json_atomic(paths.candidate(candidate_id), {**detail, "profile": recorded_h200_profile()})


def normalise_wall_clock(paths: SessionPaths) -> None:
    """Fix the values that depend on when, and in which process, the run happened: each event's
    `ts` (START, then EVENT_SPACING_S apart in log order), the snapshot's `engine_pid`, the
    ledger's `wall_seconds`, each command's `issued_at` and `applied_at` (its event's time), and
    the lock file (emptied, as an engine leaves it when it exits). Nothing else is touched."""
    events = [json.loads(line) for line in paths.events.read_text().splitlines()]
    times = {e["seq"]: START + EVENT_SPACING_S * e["seq"] for e in events}
    paths.events.write_text(
        "".join(json.dumps({**e, "ts": times[e["seq"]]}) + "\n" for e in events)
    )
    applied_at = {e["command"]: times[e["seq"]] for e in events if e["command"]}
    snapshot = read_snapshot(paths)
    snapshot["engine_pid"] = 0
    snapshot["ledger"]["wall_seconds"] = WALL_SECONDS
    for command in snapshot["commands"]:
        command["applied_at"] = applied_at[command["id"]]
        command["issued_at"] = applied_at[command["id"]] - EVENT_SPACING_S
    write_json_atomic(paths.snapshot, snapshot)
    paths.lock.write_text("")
