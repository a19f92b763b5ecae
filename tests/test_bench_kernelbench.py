"""`kernelbrain bench` over a KernelBench folder, through the real CLI on the sim backend: the
level filter, files that cannot be benched reported (not fatal), and KernelBench's metrics."""

import itertools
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from cli import kernelbrain

from engine.bench.kernelbench import kernelbench_metrics, metrics_lines
from engine.bench.runner import BenchPlan, with_metrics
from engine.benchmarks.kernelbench_order import ROW, SAMPLE_FOLDER, SAMPLE_TABLE, interleaved
from engine.problems import load_problem

ROOT = Path(__file__).resolve().parent.parent
OURS = ROOT / "tests" / "problems_kernelbench"
UNRECOGNISED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real

def get_inputs():
    return [torch.randn(8, 64)]

def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def kernelbench_run(tmp_path_factory):
    """A KernelBench-like folder: level1 with two problems, a file that does not load and one no
    generator recognises; level2 with a problem the --level filter leaves out."""
    root = tmp_path_factory.mktemp("KernelBench")
    (root / "level1").mkdir()
    (root / "level2").mkdir()
    shutil.copy(OURS / "softmax_no_sizes.py", root / "level1" / "1_Softmax.py")
    shutil.copy(OURS / "groupconv_no_sizes.py", root / "level1" / "2_GroupConv.py")
    (root / "level1" / "3_Broken.py").write_text("class Model(:\n")
    (root / "level1" / "4_FFT.py").write_text(UNRECOGNISED)
    shutil.copy(OURS / "softmax_no_sizes.py", root / "level2" / "9_Softmax_again.py")
    out = root / "out"
    done = kernelbrain("bench", root, "--level", "1", "--backend", "sim", "--budget-per-problem",
                       "8evals", "--out", out)
    return done, out


def test_a_folder_benches_its_level_and_reports_what_it_could_not_bench(kernelbench_run):
    done, out = kernelbench_run
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "sim.json").read_text())
    assert {r["problem"] for r in results["rows"]} == {"1_Softmax", "2_GroupConv"}
    shapes = {r["problem"]: r["shape"] for r in results["rows"]}
    assert shapes["1_Softmax"] == "4096x393216"  # its input's shape: the file has no SIZES
    skipped = results["kernelbench"]["skipped"]
    assert {Path(f).name for f in skipped} == {"3_Broken.py", "4_FFT.py"}
    assert "3_Broken.py: skipped" in done.stderr and "4_FFT.py: skipped" in done.stderr


def test_kernelbench_metrics_count_skipped_files_as_not_correct(kernelbench_run):
    _, out = kernelbench_run
    metrics = json.loads((out / "sim.json").read_text())["kernelbench"]
    assert metrics["problems"] == 4
    correct = sum(p["correct"] for p in metrics["per_problem"].values())
    assert metrics["correct"] == correct / 4 and correct >= 1
    for baseline in ("eager", "compile"):
        assert metrics[f"fast_1_{baseline}"] >= metrics[f"fast_1.5_{baseline}"]
        assert metrics[f"fast_1.5_{baseline}"] >= metrics[f"fast_2_{baseline}"]
    markdown = (out / "sim.md").read_text()
    assert "## KernelBench metrics" in markdown and "4 problems" in markdown
    assert "3_Broken.py" in markdown


def bench_files(out, *files):
    return kernelbrain("bench", *files, "--backend", "sim", "--budget-per-problem", "4evals",
                       "--out", out)


def test_a_set_benched_by_several_commands_gets_its_metrics_over_the_whole_set(tmp_path):
    """Files named one by one are KernelBench files too: one that does not load is reported,
    not fatal; a second command into the same --out adds its files to the same metrics."""
    broken = tmp_path / "3_Broken.py"
    broken.write_text("class Model(:\n")
    first = bench_files(tmp_path / "out", OURS / "softmax_no_sizes.py", broken)
    assert first.returncode == 0, first.stderr
    assert "3_Broken.py: skipped" in first.stderr
    metrics = json.loads((tmp_path / "out" / "sim.json").read_text())["kernelbench"]
    assert metrics["problems"] == 2 and set(metrics["per_problem"]) == {"softmax_no_sizes"}
    second = bench_files(tmp_path / "out", OURS / "groupconv_no_sizes.py")
    assert second.returncode == 0, second.stderr
    metrics = json.loads((tmp_path / "out" / "sim.json").read_text())["kernelbench"]
    assert metrics["problems"] == 3 and metrics["unfinished"] == []
    assert set(metrics["per_problem"]) == {"softmax_no_sizes", "groupconv_no_sizes"}
    assert {Path(f).name for f in metrics["skipped"]} == {"3_Broken.py"}


def test_a_problem_not_timed_yet_is_unfinished_not_failed():
    """Results written while the bench is still on problem b (or after it was cut short)."""
    plan = BenchPlan(problems=("a.py", "b.py"), ablation=(), backend="sim", limits={}, seed=0,
                     out=Path("."), command="", kernelbench=("a.py", "b.py"))  # fmt: skip
    softmax = load_problem(str(OURS / "softmax_no_sizes.py"))
    problems = {spec: replace(softmax, name=spec[0]) for spec in plan.problems}
    rows = [{"problem": "a", "best_candidate": "c1", "best_ms": {"median": 1.0},
             "speedup_eager": 2.0, "speedup_compile": 1.0,
             "precision_policy": "strict"}]  # fmt: skip
    searches = {"a/ladder": {"best_candidate": "c1", "gpu_seconds_total": 5.0}}
    results = {"runs": [{"precision_policy": "strict"}], "rows": rows, "searches": searches}
    metrics = with_metrics(plan, results, problems, {})["kernelbench"]
    assert metrics["problems"] == 1 and metrics["unfinished"] == ["b"]
    assert metrics["correct"] == 1.0 and metrics["fast_2_eager"] == 0.0
    assert metrics_lines(metrics)[0].startswith("1 problems (1 more not timed yet: b)")


def test_metrics_follow_kernelbench_definitions():
    timed = {"median": 1.0}
    rows = [
        {"problem": "a", "best_candidate": "c1", "best_ms": timed, "speedup_eager": 2.5,
         "speedup_compile": 1.2},
        {"problem": "a", "best_candidate": "c1", "best_ms": timed, "speedup_eager": 1.44,
         "speedup_compile": 0.8},
        {"problem": "b", "best_candidate": "c4", "best_ms": timed, "speedup_eager": 0.9,
         "speedup_compile": 0.5},
        {"problem": "c", "best_candidate": None, "best_ms": None, "speedup_eager": None,
         "speedup_compile": None},
        # the search's answer, rejected by the judge when the bench timed it: no correct kernel
        {"problem": "e", "best_candidate": "c2", "best_ms": None, "speedup_eager": None,
         "speedup_compile": None, "notes": {"best": "the judge: stale_output: ..."}},
    ]  # fmt: skip
    searches = {"a": {"best_candidate": "c1", "gpu_seconds_total": 10.0},
                "b": {"best_candidate": "c4", "gpu_seconds_total": 20.0},
                "c": {"best_candidate": None, "gpu_seconds_total": 30.0},
                "e": {"best_candidate": "c2", "gpu_seconds_total": 40.0}}  # fmt: skip
    m = kernelbench_metrics(["a", "b", "c", "e"], {"d.py": "broken"}, rows, searches)
    assert m["problems"] == 5 and m["correct"] == 0.4
    assert not m["per_problem"]["e"]["correct"]
    assert m["per_problem"]["a"]["speedup_eager"] == pytest.approx(1.897, abs=1e-3)  # geomean
    assert (m["fast_1_eager"], m["fast_1.5_eager"], m["fast_2_eager"]) == (0.2, 0.2, 0.0)
    assert m["fast_1_compile"] == 0.0  # a's compile geomean is sqrt(0.96) < 1
    assert m["geomean_speedup_eager"] == pytest.approx((1.897 * 0.9) ** 0.5, abs=1e-3)
    assert m["gpu_seconds_per_problem"] == pytest.approx(25.0)


def test_the_sample_order_holds_every_sample_file_once_and_spreads_each_category():
    order = interleaved(SAMPLE_TABLE.read_text())
    kept = sorted(str(p.relative_to(ROOT)) for p in (ROOT / SAMPLE_FOLDER).glob("level*/*.py"))
    assert sorted(order) == kept and len(kept) == 48
    category = {f: c for _, c, f in ROW.findall(SAMPLE_TABLE.read_text())}
    categories = [category[Path(f).name] for f in order]
    assert all(a != b for a, b in itertools.pairwise(categories))  # no two of one in a row
    assert set(categories[:24]) == set(categories)  # every category within the first half


def test_the_coverage_count_names_each_kept_level2_file_and_its_families():
    done = subprocess.run(
        [sys.executable, "-m", "engine.benchmarks.kernelbench_coverage", str(OURS), "--level", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept = sorted(p.name for p in (OURS / "level2").glob("*.py"))
    lines = done.stdout.splitlines()
    assert sorted(line.split(":")[0].removeprefix("level2/") for line in lines[:-1]) == kept
    assert "level2/55_Matmul_MaxPool_Sum_Scale.py: staged" in done.stdout
    assert lines[-1] == f"level2: {len(kept)} of {len(kept)} recognised"
