"""Several devices in one search (engine.backends.devices), on the sim backend through the real
CLI: simulated devices complete evaluations in simulated time, so a run is a function of its
seed and device count."""

import json

import pytest

from engine.backends import resolve_gpus
from engine.compose import create_session, open_view, resume_session
from engine.generate.composite import ORIGIN as COMPOSITE
from engine.session.settings import SessionSettings
from engine.session.store import Store
from engine.session_files import SessionPaths, read_snapshot
from tests.test_sessions_sim import kb, run_args, show, stable


def evaluations_by_device(sessions, name) -> dict[int, int]:
    counts: dict[int, int] = {}
    for path in SessionPaths(sessions / name).candidates.glob("*.json"):
        for evaluation in json.loads(path.read_text())["evaluations"]:
            counts[evaluation["device"]] = counts.get(evaluation["device"], 0) + 1
    return counts


def budget_evaluations_by_device(paths: SessionPaths) -> dict[str, int]:
    """The evaluations in the candidates' detail files that count against the budget (a
    composite's do not), by device."""
    counts: dict[str, int] = {}
    for path in paths.candidates.glob("*.json"):
        detail = json.loads(path.read_text())
        for evaluation in detail["evaluations"] if detail["origin"] != COMPOSITE else []:
            key = str(evaluation["device"])
            counts[key] = counts.get(key, 0) + 1
    return counts


def two_device_session(tmp_path, evals: int) -> SessionPaths:
    paths = SessionPaths(tmp_path / "two")
    limits = {"evaluations": evals}
    create_session(paths, SessionSettings("matvec", "sim", seed=3, limits=limits, gpus=(0, 1)))
    return paths


def test_each_device_reports_what_it_evaluates_and_has_spent(tmp_path):
    """At every step the published snapshot's devices name the candidates the engine is
    evaluating, one a device, and their spending adds up to the ledger's; `show --json` of the
    finished session says the same."""
    paths = two_device_session(tmp_path, evals=60)
    both_busy = 0

    def check(engine) -> None:
        nonlocal both_busy
        snapshot = read_snapshot(paths)
        devices, ledger = snapshot["devices"], snapshot["ledger"]
        assert [(d["index"], d["gpu"]) for d in devices] == [(0, 0), (1, 1)]
        assert sum(d["evaluations"] for d in devices) == ledger["evaluations"]
        spent = {str(d["index"]): d["gpu_seconds"] for d in devices if d["gpu_seconds"]}
        assert spent == ledger["gpu_seconds_by_device"]
        now = [d["evaluating"] for d in devices if d["evaluating"]]
        evaluating = [c for c in engine.search.population if c.status == "evaluating"]
        assert sorted(n["id"] for n in now) == sorted(c.id for c in evaluating)
        assert not any(n["rung"] in engine.search.by_id[n["id"]].results for n in now)  # not yet
        both_busy += len(now) == 2

    engine = resume_session(paths)
    try:
        assert engine.run(on_step=check) == "finished"
    finally:
        engine.close()
        engine.store.close()
    assert both_busy > 40
    shown = show("two", tmp_path)
    assert shown["devices"] == read_snapshot(paths)["devices"]
    assert not any(d["evaluating"] for d in shown["devices"])
    by_device = {str(d["index"]): d["evaluations"] for d in shown["devices"]}
    assert by_device == budget_evaluations_by_device(paths)
    assert sum(by_device.values()) == shown["ledger"]["evaluations"] == 60


def test_a_ledger_stored_before_it_counted_evaluations_by_device_counts_them_in_the_store(
    tmp_path,
):
    paths = two_device_session(tmp_path, evals=20)
    engine = resume_session(paths)
    try:
        engine.run()
    finally:
        engine.close()
        engine.store.close()
    store = Store(paths.database)
    ledger = store.state()["ledger"]
    counted = ledger.pop("evaluations_by_device")
    store.db.execute("UPDATE state SET value = ? WHERE key = 'ledger'", [json.dumps(ledger)])
    store.close()
    view = open_view(paths)
    try:
        devices = view.snapshot()["devices"]
    finally:
        view.store.close()
    assert {str(d["index"]): d["evaluations"] for d in devices} == counted
    assert set(counted) == {"0", "1"} and sum(counted.values()) == ledger["evaluations"]


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


def test_bench_searches_on_the_devices_given(tmp_path):
    from tests.test_bench_sim import bench

    bench("softmax", "--backend", "sim", "--gpus", "2", "--budget-per-problem", "30evals",
          "--ablation", "softmax", "--out", str(tmp_path))  # fmt: skip
    results = json.loads((tmp_path / "sim.json").read_text())
    assert results["runs"][-1]["gpus"] == [0, 1]
    assert "--gpus 2" in results["runs"][-1]["command"]
    for kind in ("ladder", "flat"):
        sessions = tmp_path / "sessions"
        assert set(evaluations_by_device(sessions, f"softmax-{kind}")) == {0, 1}, kind
    refused = bench("softmax", "--backend", "sim", "--gpus", "0", "--out", str(tmp_path / "x"),
                    check=False)  # fmt: skip
    assert refused.returncode == 2 and "names no device" in refused.stderr


def test_the_multi_device_benchmark_compares_rates_and_reference_timings_by_device(tmp_path):
    from engine.benchmarks.multi_gpu import main

    out = tmp_path / "multi.json"
    main(["softmax", "--backend", "sim", "--gpus", "2", "--budget", "30evals", "--out", str(out)])
    results = json.loads(out.read_text())
    one, two = results["searches"]
    assert (one["devices"], two["devices"]) == (1, 2)
    assert one["evaluations"] == 30 and two["evaluations"] == 30
    assert set(two["gpu_seconds_by_device"]) == {"0", "1"}
    ratio = two["evaluations_per_wall_s"] / one["evaluations_per_wall_s"]
    assert results["rate_ratio"] == pytest.approx(ratio, rel=1e-2)
    for size in two["reference"].values():  # the sim's reference is the same on every device
        assert set(size["by_device"]) == {"0", "1"} and size["within_noise"], size
