"""`kernelbrain bench` on the cpu backend: the real pipeline end to end (searches in workers, the
timing subprocess with torch.compile, the judge timing the kernels), and failures reported, not
fatal."""

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.backends.local import gpu_turn
from engine.bench.measure import measure_ceilings, time_contenders
from engine.problems import load_problem
from engine.session.store import Store

CANDIDATES = Path(__file__).parent / "candidates"


@pytest.mark.slow
def test_cpu_bench_with_ablation_through_the_cli(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "bench", "softmax", "--backend", "cpu",
         "--budget-per-problem", "4evals", "--ablation", "softmax", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    results = json.loads((tmp_path / "cpu.json").read_text())
    assert results["backend"] == "cpu" and results["timings_meaningful"] is False
    [run] = results["runs"]
    assert run["device"]["measured"] and run["ceilings"]["copy_bytes_per_s"] > 0
    [row] = results["rows"]  # the cpu ladder times the tiny size only
    assert (row["problem"], row["shape"], row["precision"]) == ("softmax", "4x300", "fp32")
    for key in ("eager_ms", "compile_ms", "best_ms", "judged_eager_ms"):
        assert row[key]["median"] > 0, key
    assert row["compile_seconds"] > 0
    # x eager within the judge's process, compile/eager within the timing process
    x_eager = row["judged_eager_ms"]["median"] / row["best_ms"]["median"]
    per_compile = row["compile_ms"]["median"] / row["eager_ms"]["median"]
    assert row["speedup_eager"] == pytest.approx(x_eager)
    assert row["speedup_compile"] == pytest.approx(x_eager * per_compile)
    assert row["notes"] == {}
    assert results["searches"]["softmax/ladder"]["evaluations"] == 4
    assert results["searches"]["softmax/flat"]["evaluations"] == 4
    [entry] = results["ablation"]
    assert entry["ladder_best_ms"]["tiny"] == row["best_ms"]
    assert entry["flat_best_ms"]["tiny"]["median"] > 0
    assert "Timings are not meaningful" in (tmp_path / "cpu.md").read_text()
    assert re.search(r"^softmax: timed in \d+ s of wall$", out.stderr, re.MULTILINE), out.stderr


def test_a_failing_torch_compile_is_reported_and_the_others_are_timed(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/g++")  # inductor's C++ backend cannot compile
    problem = load_problem("softmax")
    source = (CANDIDATES / "softmax_valid.py").read_text()
    [times] = time_contenders(problem, ["tiny"], {"best": source}, "cpu", seed=0).values()
    assert times.errors["compile"].startswith("torch.compile failed: ")
    assert "compiler" in times.errors["compile"]
    assert set(times.samples) == {"eager", "best"} and set(times.judged_eager) == {"best"}
    assert times.compile_seconds is None


@pytest.mark.slow
def test_a_kernel_that_never_ends_is_stopped_by_the_judge_and_the_baselines_are_timed():
    problem = load_problem("softmax")
    source = (CANDIDATES / "softmax_endless.py").read_text()
    [times] = time_contenders(problem, ["tiny"], {"best": source}, "cpu", seed=0,
                              judge_timeout_s=20).values()  # fmt: skip
    assert set(times.samples) == {"eager", "compile"} and "best" not in times.judged_eager
    assert times.errors["best"].startswith("the judge: timeout: ")


def test_the_bench_runs_no_candidate_code_outside_the_judge(tmp_path):
    """A kernel that writes a file when it is imported outside the sandbox (where the project
    is visible) leaves no file: the bench's timing process never imports candidates."""
    marker = tmp_path / "escaped"
    source = (CANDIDATES / "softmax_valid.py").read_text() + (
        f"\nimport pathlib\ntry:\n    pathlib.Path({str(marker)!r}).write_text('out')\n"
        "except OSError:\n    pass\n"
    )
    [times] = time_contenders(load_problem("softmax"), ["tiny"], {"best": source}, "cpu",
                              seed=0).values()  # fmt: skip
    assert times.samples["best"] and not marker.exists()


@pytest.mark.slow
def test_an_interrupted_bench_of_several_at_a_time_stops_them_all_resumably(tmp_path):
    """On cpu, where evaluations take seconds (on sim a search can end before the signal)."""
    args = [sys.executable, "-m", "engine.cli", "bench", "softmax", "rmsnorm", "--backend", "cpu",
            "--jobs", "2", "--budget-per-problem", "100evals", "--out", str(tmp_path)]  # fmt: skip
    # Ctrl-C as in a terminal, also where pytest runs with SIGINT ignored (a script's background
    # job), which its children would inherit
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    sessions = [tmp_path / "sessions" / f"{name}-ladder" for name in ("softmax", "rmsnorm")]
    deadline = time.monotonic() + 300

    def evaluated(session):  # an evaluation of that search is checkpointed
        events = session / "events.jsonl"
        return events.exists() and '"kind":"evaluated"' in events.read_text()

    while not all(map(evaluated, sessions)):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    for session in sessions:
        store = Store(session / "state.duckdb", read_only=True)
        try:
            assert 0 < store.db.execute("SELECT count(*) FROM evaluations").fetchone()[0] < 100
        finally:
            store.close()
    other = [sys.executable, "-m", "engine.cli", "bench", "softmax", "--backend", "cpu",
             "--budget-per-problem", "5evals", "--out", str(tmp_path)]  # fmt: skip
    other = subprocess.run(other, capture_output=True, text=True, timeout=300)
    assert other.returncode == 2 and "limits {'evaluations': 100" in other.stderr
    # one of them again, with the same settings, goes on from its checkpoint and says so
    again = [sys.executable, "-m", "engine.cli", "bench", "softmax", "--backend", "cpu",
             "--budget-per-problem", "100evals", "--out", str(tmp_path)]  # fmt: skip
    again = subprocess.Popen(again, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    said = next(line for line in again.stderr if "search, resumed" in line)
    again.send_signal(signal.SIGINT)
    again.communicate(timeout=300)
    assert re.fullmatch(r"softmax-ladder: an earlier bench's search, resumed at step [1-9][0-9]*\n",
                        said)  # fmt: skip


@pytest.mark.slow
def test_the_timing_process_waits_for_its_turn_on_the_device():
    """The bench's timing process (eager, torch.compile, the ceilings) runs only while no
    evaluation of another search (`bench --jobs`) holds the device."""
    start = time.monotonic()
    measure_ceilings("cpu")
    alone = time.monotonic() - start
    done = threading.Event()
    with gpu_turn("cpu", 0):
        threading.Thread(target=lambda: (measure_ceilings("cpu"), done.set()), daemon=True).start()
        assert not done.wait(2 * alone + 2)  # twice what it takes alone: it is waiting
    assert done.wait(120)
