"""`kernelbrain bench` on the sim backend, through the real CLI: the results' fields and their
consistency, and the flat-versus-ladder ablation over one candidate stream."""

import json
import math
import random
import re
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest
from cli import kernelbrain

from engine.bench.floors import size_work
from engine.bench.measure import time_contenders
from engine.bench.rows import problem_rows
from engine.bench.runner import BenchPlan, run_bench
from engine.bench.searches import SearchOutcome, gpu_seconds_to_best, rejections_said
from engine.generate.base import GenerationRequest, GeneratorError
from engine.generate.replay import ReplayGenerator
from engine.problems import load_problem
from engine.records import Candidate
from engine.session.store import Store
from engine.session_files import SessionPaths, read_events

ROW_FIELDS = {
    "problem", "shape", "dtype", "precision", "eager_ms", "compile_ms", "best_ms", "floor_ms",
    "speedup_eager", "speedup_compile", "fraction_of_floor", "gpu_seconds_to_best",
    "gpu_seconds_total",
}  # fmt: skip
ABLATION_FIELDS = {
    "flat_gpu_seconds_to_best", "ladder_gpu_seconds_to_best", "ladder_best_ms", "flat_best_ms",
    "gpu_seconds_to_best_ratio", "best_ms_ratio",
}  # fmt: skip


def bench(*args, check=True):
    out = kernelbrain("bench", *args)
    if check and out.returncode != 0:
        raise AssertionError(f"kernelbrain bench {' '.join(args)} failed:\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def sim_bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    bench("rmsnorm", "softmax", "--backend", "sim", "--budget-per-problem", "50gpu-s",
          "--ablation", "softmax", "--seed", "6", "--out", str(out))  # fmt: skip
    return out, json.loads((out / "sim.json").read_text())


def test_rows_hold_every_field_with_consistent_values(sim_bench):
    _, results = sim_bench
    rows = results["rows"]
    assert [(r["problem"], r["shape"]) for r in rows] == [
        ("rmsnorm", "112x64x512x512"), ("rmsnorm", "16x64x256x256"),
        ("softmax", "4096x393216"), ("softmax", "4096x4096"), ("softmax", "16x16384"),
    ]  # fmt: skip
    for r in rows:
        assert ROW_FIELDS <= set(r)
        assert r["dtype"] == "float32" and r["precision"] == "fp32"
        for key in ("eager_ms", "best_ms"):
            assert r[key]["low"] <= r[key]["median"] <= r[key]["high"]
        assert r["compile_ms"] is None and r["speedup_compile"] is None
        assert "compile" in r["notes"]
        # x eager: the kernel against the reference timed beside it (the judge's pair)
        ratio = r["judged_eager_ms"]["median"] / r["best_ms"]["median"]
        assert r["speedup_eager"] == pytest.approx(ratio)
        assert r["fraction_of_floor"] == pytest.approx(r["floor_ms"] / r["best_ms"]["median"])
        assert 0 < r["gpu_seconds_to_best"] <= r["gpu_seconds_total"] + 1e-6  # progress: 6 places
        search = results["searches"][f"{r['problem']}/ladder"]
        assert r["gpu_seconds_total"] == search["gpu_seconds_total"]
        assert sum(search["gpu_seconds_by_activity"].values()) == pytest.approx(
            search["gpu_seconds_total"]
        )
        assert sum(search["gpu_seconds_by_rung"].values()) == pytest.approx(
            search["gpu_seconds_total"]
        )
        assert r["best_candidate"] == search["best_candidate"]
        assert r["run"] == 0


def test_markdown_names_the_backend_and_holds_every_row(sim_bench):
    out, results = sim_bench
    text = (out / "sim.md").read_text()
    assert "No eager or torch.compile timings" in text
    assert results["runs"][0]["command"] in text
    for r in results["rows"]:
        assert f"| {r['problem']} | {r['shape']} |" in text
    assert "## Ablation" in text


def candidates_in_order(session: SessionPaths):
    store = Store(session.database, read_only=True)
    try:
        return store.candidates()
    finally:
        store.close()


def test_flat_search_evaluates_the_ladders_stream_in_its_order(sim_bench):
    out, results = sim_bench
    ladder = candidates_in_order(SessionPaths(out / "sessions" / "softmax-ladder"))
    flat_session = SessionPaths(out / "sessions" / "softmax-flat")
    flat = candidates_in_order(flat_session)
    assert [c.source for c in flat] == [c.source for c in ladder[: len(flat)]]
    evaluated = [e["candidate"] for e in read_events(flat_session)
                 if e["kind"] in ("evaluated", "rejected")]  # fmt: skip
    assert evaluated == sorted(evaluated) and len(evaluated) == len(set(evaluated))
    assert evaluated == [c.id for c in flat if c.status != "queued"]
    # Flat: one rung, the ladder's top one.
    flat_store = Store(flat_session.database, read_only=True)
    ladder_store = Store(out / "sessions" / "softmax-ladder" / "state.duckdb", read_only=True)
    flat_rungs, ladder_rungs = flat_store.settings().ladder, ladder_store.settings().ladder
    flat_store.close(), ladder_store.close()
    assert flat_rungs == (replace(ladder_rungs[-1], index=0),)
    assert all(set(c.results) <= {0} for c in flat)


def test_ablation_reports_both_bests(sim_bench):
    _, results = sim_bench
    [entry] = results["ablation"]
    assert entry["problem"] == "softmax" and ABLATION_FIELDS <= set(entry)
    flat = results["searches"]["softmax/flat"]
    ladder = results["searches"]["softmax/ladder"]
    assert entry["flat_gpu_seconds_to_best"] == flat["gpu_seconds_to_best"]
    assert entry["ladder_gpu_seconds_to_best"] == ladder["gpu_seconds_to_best"]
    assert entry["gpu_seconds_to_best_ratio"] == pytest.approx(
        ladder["gpu_seconds_to_best"] / flat["gpu_seconds_to_best"]
    )
    rows = {r["size"]: r for r in results["rows"] if r["problem"] == "softmax"}
    assert set(entry["ladder_best_ms"]) == set(entry["flat_best_ms"]) == set(rows)
    ratios = []
    for label, row in rows.items():
        assert entry["ladder_best_ms"][label] == row["best_ms"]
        assert entry["flat_best_ms"][label]["median"] > 0
        ratios.append(row["best_ms"]["median"] / entry["flat_best_ms"][label]["median"])
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert entry["best_ms_ratio"] == pytest.approx(geomean)
    # At this seed and budget the flat search ends on another kernel, timed under its own name.
    assert not entry["same_best_kernel"]
    assert entry["flat_best_candidate"] == flat["best_candidate"] != ladder["best_candidate"]


def test_replay_generator_hands_out_the_stream_in_order(sim_bench):
    out, _ = sim_bench
    session = out / "sessions" / "softmax-ladder"
    stream = candidates_in_order(SessionPaths(session))
    replay = ReplayGenerator(str(session))
    replay.preflight()
    problem = load_problem("softmax")
    first = replay.propose(GenerationRequest(problem, "coarse", 2, random.Random(0)))
    assert [p.source for p in first.proposals] == [c.source for c in stream[:2]]
    known = frozenset(c.sha256 for c in stream[:3])
    rest = replay.propose(GenerationRequest(problem, "mutate", 0, random.Random(0),
                                            known_sha256=known))  # fmt: skip
    assert [p.source for p in rest.proposals] == [c.source for c in stream[3:]]
    with pytest.raises(GeneratorError, match="holds no session"):
        ReplayGenerator(str(out / "nowhere")).preflight()


def test_a_search_without_a_passing_candidate_keeps_its_eager_row():
    problem = load_problem("softmax")
    labels = [s.label for s in problem.full]
    times = time_contenders(problem, labels, {}, "sim", seed=0)
    search = SearchOutcome("softmax-ladder", None, None, "budget spent: evaluations", [], 4.0,
                           {"time": 4.0}, {"compile": 1.0}, 9.0, {"0": 4.0}, 2, 2, [],
                           "rejected 2 wrong_output; c0001: wrong_output: error 1.09")  # fmt: skip
    work = {label: size_work(problem, problem.size(label)) for label in labels}
    rows = problem_rows(problem, search, work, times, {
        "copy_bytes_per_s": 4e12, "fp32_flops_per_s": 5e13, "tf32_flops_per_s": 3e14,
        "fp16_flops_per_s": 6e14,
    })  # fmt: skip
    for r in rows:
        assert r["eager_ms"]["median"] > 0
        assert r["best_ms"] is None and r["speedup_eager"] is None and r["precision"] is None
        assert r["fraction_of_floor"] is None and r["gpu_seconds_to_best"] is None
        assert r["notes"]["best"] == (
            "the search found no passing candidate (budget spent: evaluations); "
            "rejected 2 wrong_output; c0001: wrong_output: error 1.09"
        )


def test_a_search_says_how_its_candidates_were_rejected():
    def candidate(seq: int, status: str, reason: str | None = None, message: str = ""):
        return Candidate(f"c000{seq}", seq, str(seq), None, "model.rewrite", {}, "", "source", 0,
                         status=status, reason=reason, message=message)  # fmt: skip

    population = [
        candidate(2, "rejected", "launch_error", "a run raised ValueError\nin the candidate"),
        candidate(1, "rejected", "wrong_output", "normalized error 1.09 exceeds 5.3e-07\nsizes"),
        candidate(3, "rejected", "wrong_output", "normalized error 0.5 exceeds 5.3e-07"),
        candidate(4, "pruned"),
    ]
    assert rejections_said(population) == (
        "rejected 2 wrong_output, 1 launch_error; c0001: wrong_output: normalized error 1.09 "
        "exceeds 5.3e-07"
    )
    assert rejections_said(population[3:]) is None


def test_gpu_seconds_to_best_counts_from_when_the_best_settled():
    assert gpu_seconds_to_best([]) is None
    assert gpu_seconds_to_best([[5.0, 1.2], [9.0, 1.5], [20.0, 1.51]]) == 9.0
    # A screen that overestimated, revised when confirmed: counts from the revision.
    assert gpu_seconds_to_best([[5.0, 2.0], [30.0, 1.6]]) == 30.0


def test_usage_errors_come_before_any_search(tmp_path):
    out = bench("softmax", "--backend", "sim", "--ablation", "rmsnorm", "--out", str(tmp_path),
                check=False)  # fmt: skip
    assert out.returncode == 2
    assert "--ablation rmsnorm: not among the benched problems" in out.stderr
    out = bench("softmax", "--backend", "sim", "--budget-per-problem", "soon", check=False)
    assert out.returncode == 2 and "cannot read budget 'soon'" in out.stderr
    out = bench("nosuchproblem", "--backend", "sim", "--out", str(tmp_path), check=False)
    assert out.returncode == 2 and "no problem 'nosuchproblem'" in out.stderr
    out = bench("softmax", "--backend", "sim", "--jobs", "0", "--out", str(tmp_path), check=False)
    assert out.returncode == 2 and "--jobs 0: give 1 or more" in out.stderr
    assert not (tmp_path / "sessions").exists()


def test_later_commands_add_their_problems_to_the_same_results(tmp_path):
    bench("softmax", "--backend", "sim", "--budget-per-problem", "3evals", "--out", str(tmp_path))
    bench("rmsnorm", "--backend", "sim", "--budget-per-problem", "3evals", "--out", str(tmp_path))
    results = json.loads((tmp_path / "sim.json").read_text())
    assert [run["problems"] for run in results["runs"]] == [["softmax"], ["rmsnorm"]]
    assert [(r["problem"], r["run"]) for r in results["rows"]] == [
        ("softmax", 0), ("softmax", 0), ("softmax", 0), ("rmsnorm", 1), ("rmsnorm", 1),
    ]  # fmt: skip
    assert set(results["searches"]) == {"softmax/ladder", "rmsnorm/ladder"}
    text = (tmp_path / "sim.md").read_text()
    assert all(run["command"] in text for run in results["runs"])


def test_a_bench_cut_short_keeps_the_earlier_figures_of_what_it_did_not_time_again(tmp_path):
    bench("softmax", "rmsnorm", "--backend", "sim", "--budget-per-problem", "3evals",
          "--out", str(tmp_path))  # fmt: skip
    shutil.rmtree(tmp_path / "sessions")  # the searches start afresh, with other settings
    plan = BenchPlan(problems=("softmax", "rmsnorm"), ablation=(), backend="sim",
                     limits={"evaluations": 4}, seed=1, out=tmp_path, command="again")  # fmt: skip

    def cut_short(engine):
        if engine.problem.name == "rmsnorm":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bench(plan, on_step=cut_short)
    results = json.loads((tmp_path / "sim.json").read_text())
    assert [run["command"] for run in results["runs"]][1:] == ["again"]
    runs = {(r["problem"], r["run"]) for r in results["rows"]}
    assert runs == {("softmax", 1), ("rmsnorm", 0)}  # rmsnorm's earlier figures stand
    assert results["searches"]["softmax/ladder"]["evaluations"] == 4
    assert results["searches"]["rmsnorm/ladder"]["evaluations"] == 3


def test_a_bench_run_again_resumes_its_searches_and_times_again(tmp_path):
    """Also from a copy of its --out elsewhere (as a device call carries the last call's)."""
    args = ["softmax", "rmsnorm", "--backend", "sim", "--budget-per-problem", "3evals",
            "--ablation", "softmax", "--out"]  # fmt: skip
    bench(*args, str(tmp_path / "first"))
    first = json.loads((tmp_path / "first" / "sim.json").read_text())
    sessions = sorted((tmp_path / "first" / "sessions").iterdir())
    evaluations = [count_evaluations(s) for s in sessions]
    shutil.copytree(tmp_path / "first", tmp_path / "carried")
    out = bench(*args, str(tmp_path / "carried"))
    for search in ("softmax-ladder", "softmax-flat", "rmsnorm-ladder"):
        assert f"{search}: an earlier bench's search, resumed finished" in out.stderr
    again = json.loads((tmp_path / "carried" / "sim.json").read_text())
    carried = sorted((tmp_path / "carried" / "sessions").iterdir())
    assert [count_evaluations(s) for s in carried] == evaluations
    assert again["searches"].keys() == first["searches"].keys()
    assert [s["evaluations"] for s in again["searches"].values()] == [3, 3, 3]
    assert len(again["runs"]) == 2 and len(again["ablation"]) == 1
    assert [r["run"] for r in again["rows"]] == [1] * len(first["rows"])  # timed again


def count_evaluations(session_folder):
    store = Store(session_folder / "state.duckdb", read_only=True)
    try:
        return store.db.execute("SELECT count(*) FROM evaluations").fetchone()[0]
    finally:
        store.close()


def test_a_bench_with_other_settings_does_not_resume_a_kept_search(tmp_path):
    bench("softmax", "--backend", "sim", "--budget-per-problem", "3evals", "--out", str(tmp_path))
    out = bench("softmax", "--backend", "sim", "--budget-per-problem", "5evals", "--seed", "1",
                "--out", str(tmp_path), check=False)  # fmt: skip
    assert out.returncode == 2
    assert "softmax-ladder is from an earlier bench with other settings" in out.stderr
    assert "seed 0 (now 1)" in out.stderr and "limits {'evaluations': 3" in out.stderr
    (tmp_path / "sessions" / "softmax-ladder" / "state.duckdb").unlink()
    out = bench("softmax", "--backend", "sim", "--out", str(tmp_path), check=False)
    assert out.returncode == 2 and "softmax-ladder holds no session" in out.stderr


def test_problems_benched_at_a_time_give_the_results_of_one_at_a_time(tmp_path):
    args = ["softmax", "rmsnorm", "matvec", "--backend", "sim", "--budget-per-problem", "6evals",
            "--ablation", "rmsnorm"]  # fmt: skip
    bench(*args, "--out", str(tmp_path / "serial"))
    bench(*args, "--jobs", "3", "--out", str(tmp_path / "jobs"))
    serial, jobs = (json.loads((tmp_path / d / "sim.json").read_text()) for d in ("serial", "jobs"))
    timeless = {"wall_seconds", "cpu_seconds_by_activity", "session"}

    def outcome(results):
        searches = {k: {f: v for f, v in s.items() if f not in timeless}
                    for k, s in results["searches"].items()}  # fmt: skip
        return searches, results["rows"], results["ablation"]

    assert [r["problem"] for r in jobs["rows"]] == [r["problem"] for r in serial["rows"]]
    assert outcome(jobs) == outcome(serial)
    assert "--jobs 3" in jobs["runs"][0]["command"]


def test_tf32_rows_join_the_strict_rows_of_the_same_problem(tmp_path):
    args = ["linear_relu_div", "--backend", "sim", "--budget-per-problem", "4evals"]
    bench(*args, "--out", str(tmp_path))
    bench(*args, "--precision", "tf32", "--out", str(tmp_path))
    results = json.loads((tmp_path / "sim.json").read_text())
    assert [run["precision_policy"] for run in results["runs"]] == ["strict", "tf32"]
    assert [(r["precision_policy"], r["precision"], r["run"]) for r in results["rows"]] == [
        # strict names what its kernels computed in: tf32x3, accepted there on measured error
        ("strict", "tf32x3", 0), ("strict", "tf32x3", 0), ("tf32", "tf32", 1), ("tf32", "tf32", 1),
    ]  # fmt: skip
    assert set(results["searches"]) == {"linear_relu_div/ladder", "linear_relu_div-tf32/ladder"}
    store = Store(tmp_path / "sessions" / "linear_relu_div-tf32-ladder" / "state.duckdb",
                  read_only=True)  # fmt: skip
    assert store.settings().precision_policy == "tf32"
    store.close()
    text = (tmp_path / "sim.md").read_text()
    assert "| linear_relu_div | 128x4096x4096 | float32 | strict | tf32x3 |" in text
    assert "| linear_relu_div | 128x4096x4096 | float32 | tf32 | tf32 |" in text
    assert "with TF32 enabled" in text


def test_searches_reporting_at_once_keep_their_lines_whole():
    """`bench --jobs` reports from several searches' threads at once (engine.cli.sessions.say):
    each line reaches stderr whole. With print (the line and its newline written apart) about a
    line in nine ran into another here."""
    code = (
        "import threading\n"
        "from engine.cli.sessions import say\n"
        "def report(i):\n"
        "    for j in range(3000):\n"
        "        say(f'search {i}: step {j}')\n"
        "threads = [threading.Thread(target=report, args=(i,)) for i in range(6)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
    )
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stderr  # fmt: skip
    lines = err.splitlines()
    assert len(lines) == 18000
    assert all(re.fullmatch(r"search \d: step \d+", line) for line in lines)
