"""Evaluations in Ray actors (engine.backends.ray_fleet), on a local Ray instance on this
machine's CPUs: through the real CLI on sim (the same search as without Ray, an actor killed
mid-run), and a cpu actor's judge against a candidate that reaches for the engine's secrets."""

import os
import signal
import socket
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from cli import CLI, kernelbrain_process

from engine.backends.ray_fleet import LOCAL, DeviceActor, RayDevice, connect
from engine.jobs import EvalJob, RungSpec
from engine.problems import load_problem
from engine.session_files import SessionPaths, read_events
from tests.adversarial import softmax as attacks
from tests.test_devices import evaluations_by_device
from tests.test_sessions_sim import run_args, show, stable

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")  # one local Ray instance at a time on this machine
CANARY = f"sk-canary-{uuid.uuid4().hex}"


def kb(*args, sessions, check=True):
    """The command in a process of its own: a Ray instance it starts ends with it."""
    out = kernelbrain_process(*args, "--sessions-dir", sessions)
    assert not check or out.returncode == 0, out.stderr
    return out


def ray_args(name: str, seed: int, budget: str) -> list[str]:
    return [*run_args(name, seed=seed, budget=budget, gpus="2"), "--ray", LOCAL]


@pytest.mark.slow  # two searches of 60 evaluations, one in Ray actors
def test_a_ray_run_spreads_over_both_devices_and_is_the_local_search(tmp_path):
    kb(*ray_args("fleet", seed=5, budget="60evals"), sessions=tmp_path)
    kb(*run_args("local", seed=5, budget="60evals", gpus="2"), sessions=tmp_path)
    fleet = show("fleet", tmp_path)
    ledger = fleet["ledger"]
    assert set(ledger["gpu_seconds_by_device"]) == {"0", "1"}
    assert all(s >= 0.3 * ledger["gpu_seconds"] for s in ledger["gpu_seconds_by_device"].values())
    assert set(evaluations_by_device(tmp_path, "fleet")) == {0, 1}
    # simulated devices in Ray actors complete in simulated time, as local ones do
    assert stable(fleet) == stable(show("local", tmp_path))


def actors_under(engine_pid: int) -> list[int]:
    """Process ids of the DeviceActor workers that the engine's own Ray instance started (an
    actor's parent is the raylet, whose parent is the engine)."""

    def parent(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])

    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "cmdline").read_bytes().startswith(b"ray::DeviceActor"):
                if parent(parent(int(entry.name))) == engine_pid:
                    found.append(int(entry.name))
        except (OSError, ValueError):
            continue  # not a process, or one that ended meanwhile
    return found


def test_an_actor_killed_mid_run_costs_only_its_evaluation_in_flight(tmp_path):
    env = {**os.environ, "KERNELBRAIN_SIM_PACE": "0.2"}  # evaluations last long enough to hit
    args = [*CLI, *ray_args("lossy", seed=8, budget="40evals"), "--sessions-dir", str(tmp_path)]
    engine = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    paths = SessionPaths(tmp_path / "lossy")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        paths.events.exists()
        and sum(e["kind"] == "evaluated" for e in read_events(paths)) >= 5
        and actors_under(engine.pid)
    ):
        time.sleep(0.1)
    victim = actors_under(engine.pid)[-1]
    os.kill(victim, signal.SIGKILL)
    _, err = engine.communicate(timeout=240)
    assert engine.returncode == 0, err
    reruns = [e for e in read_events(paths) if e["kind"] == "rerun"]
    assert len(reruns) == 1 and "was lost" in reruns[0]["message"], reruns
    assert reruns[0]["candidate"] and "a new one started" in reruns[0]["message"]
    # nothing else changed: the search is the one an undisturbed engine makes
    kb(*run_args("undisturbed", seed=8, budget="40evals", gpus="2"), sessions=tmp_path)
    assert stable(show("lossy", tmp_path)) == stable(show("undisturbed", tmp_path))


@pytest.fixture(scope="module")
def local_ray():
    """A Ray instance started by this process with a secret in its environment, as an engine
    whose user keeps an API key in the shell would start one."""
    os.environ["OPENAI_API_KEY"] = CANARY
    try:
        connect(LOCAL)
        yield
    finally:
        ray.shutdown()
        del os.environ["OPENAI_API_KEY"]


def test_a_cpu_actor_judges_as_a_local_device_and_keeps_secrets_from_candidates(local_ray):
    @ray.remote(num_cpus=0)
    def worker_environment_has_the_secret() -> bool:
        return os.environ.get("OPENAI_API_KEY") == CANARY

    assert ray.get(worker_environment_has_the_secret.remote())  # the attack has its target
    softmax = load_problem("softmax")
    rung = RungSpec(0, (softmax.full[0].label,), warmup=1, reps=3, input_sets=1)
    device = RayDevice("cpu", 0)
    try:
        assert not device.timings_meaningful
        valid = device.evaluate(softmax, EvalJob("c1", attacks.VALID, rung, seed=1))
        assert valid.passed, valid.message
        leak = device.evaluate(softmax, EvalJob("c2", attacks.RAISES_THE_ENVIRONMENT, rung, 2))
    finally:
        device.close()
    assert leak.reason == "launch_error"
    assert CANARY not in leak.message


def test_an_actor_writes_each_problem_once_while_a_prepare_and_an_evaluation_ask_at_once():
    """The actor serves two calls at once (a prepare beside an evaluation): problems that
    arrive together each get their own file, and a problem asked for twice is written once."""
    actor = DeviceActor("sim")
    softmax = load_problem("softmax")
    problems = [replace(softmax, source=f"{softmax.source}\n# variant {i}\n") for i in range(64)]
    with ThreadPoolExecutor(8) as pool:
        written = list(pool.map(actor.local, problems + problems))
    assert len({p.path for p in written}) == len(problems)
    assert all(p.path.read_text() == p.source for p in written)
    assert [p.path for p in written[: len(problems)]] == [p.path for p in written[len(problems) :]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "extra, words",
    [(["--gpus", "0,1", "--ray", LOCAL], "give a count or 'all'"),
     (["--ray", f"127.0.0.1:{free_port()}"], "could not reach a Ray cluster there")],
)  # fmt: skip
def test_ray_settings_that_cannot_work_are_usage_errors(tmp_path, extra, words):
    args = [*run_args("bad", seed=1)[:-3], *extra]  # run_args ends with --gpus 1 --headless
    out = kb(*args, "--headless", sessions=tmp_path, check=False)
    assert out.returncode == 2 and words in out.stderr, out.stderr
    assert not (tmp_path / "bad").exists()
