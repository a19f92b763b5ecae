"""Several devices in one search (engine.backends.devices), on the sim backend through the real
CLI: simulated devices complete evaluations in simulated time, so a run is a function of its
seed and device count."""

import json

import pytest

from engine.backends import resolve_gpus
from engine.session_files import SessionPaths
from tests.test_sessions_sim import kb, run_args, show, stable


def evaluations_by_device(sessions, name) -> dict[int, int]:
    counts: dict[int, int] = {}
    for path in SessionPaths(sessions / name).candidates.glob("*.json"):
        for evaluation in json.loads(path.read_text())["evaluations"]:
            counts[evaluation["device"]] = counts.get(evaluation["device"], 0) + 1
    return counts


def test_two_simulated_devices_share_the_search(tmp_path):
    kb(*run_args("two", seed=5, budget="80evals", gpus="2"), sessions=tmp_path)
    ledger = show("two", tmp_path)["ledger"]
    by_device = ledger["gpu_seconds_by_device"]
    assert set(by_device) == {"0", "1"}
    assert all(spent >= 0.3 * ledger["gpu_seconds"] for spent in by_device.values()), by_device
    assert sum(by_device.values()) == pytest.approx(ledger["gpu_seconds"], rel=1e-6)
    counts = evaluations_by_device(tmp_path, "two")
    assert set(counts) == {0, 1} and sum(counts.values()) == ledger["evaluations"]


def test_a_multi_device_run_is_a_function_of_its_seed_and_device_count(tmp_path):
    for name in ("first", "second"):
        kb(*run_args(name, seed=6, budget="50evals", gpus="3"), sessions=tmp_path)
    first, second = show("first", tmp_path), show("second", tmp_path)
    assert stable(first) == stable(second)
    assert len(first["ledger"]["gpu_seconds_by_device"]) == 3


def test_one_device_is_the_default_and_is_kept_with_the_session(tmp_path):
    args = run_args("plain", seed=1, budget="10evals")
    at = args.index("--gpus")
    kb(*args[:at], *args[at + 2 :], sessions=tmp_path)
    assert set(show("plain", tmp_path)["ledger"]["gpu_seconds_by_device"]) == {"0"}


@pytest.mark.parametrize(
    "text, words",
    [("none", "'none': devices to evaluate on"), ("0", "names no device"),
     ("1,1", "names no device, or one twice"), ("-1", "names no device")],
)  # fmt: skip
def test_gpus_that_name_no_devices_are_usage_errors(tmp_path, text, words):
    out = kb(*run_args("bad", seed=1, gpus=text), sessions=tmp_path, check=False)
    assert out.returncode == 2 and words in out.stderr, out.stderr
    assert not (tmp_path / "bad").exists()


def test_gpus_resolve_to_device_indices():
    assert resolve_gpus("3", "sim") == (0, 1, 2)
    assert resolve_gpus("0,2", "cpu") == (0, 2)
    assert resolve_gpus("all", "sim") == (0,)


@pytest.mark.slow
def test_two_real_judges_evaluate_side_by_side_on_cpu(tmp_path):
    """Threaded devices: two cpu judges (the interpreter), each in its own worker process."""
    args = ["run", "softmax", "--backend", "cpu", "--gpus", "2", "--budget", "4evals",
            "--session", "cpu2", "--headless"]  # fmt: skip
    kb(*args, sessions=tmp_path)
    snapshot = show("cpu2", tmp_path)
    assert snapshot["state"] == "finished"
    assert set(snapshot["ledger"]["gpu_seconds_by_device"]) == {"0", "1"}
    assert set(evaluations_by_device(tmp_path, "cpu2")) == {0, 1}
