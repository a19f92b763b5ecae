"""Admission by memory (engine.bench.admission): a bench of several problems at a time never runs
together problems whose estimated memory exceeds what it was given, runs a problem larger than
all of it alone, and estimates from the problem's own tensors without allocating them."""

import threading
import time
from pathlib import Path

import torch
from meta_calls import Passed

from engine.bench.admission import (
    FLOAT64_FACTOR,
    INPUT_COPIES,
    OUTPUT_COPIES,
    Admission,
    Footprint,
    auto_jobs,
    chosen,
    data_bytes,
    footprint,
)
from engine.bench.runner import admitted_labels, run_concurrently
from engine.problems import load_problem

KERNELBENCH = Path(__file__).resolve().parent / "problems_kernelbench"

GiB = 1 << 30


def bench_recording_overlaps(admission: Admission, footprints: dict) -> list[list[str]]:
    """Run every problem through run_concurrently with a bench that records which problems
    were running each time one started."""
    running: list[str] = []
    seen: list[list[str]] = []
    lock = threading.Lock()

    def bench(spec, problem, on_step):
        with lock:
            running.append(spec)
            seen.append(sorted(running))
        time.sleep(0.05)
        with lock:
            running.remove(spec)
        return spec

    finished = []
    run_concurrently(bench, {s: None for s in footprints}, admission, footprints,
                     lambda spec, outcome: finished.append(outcome), None)  # fmt: skip
    assert sorted(finished) == sorted(footprints)
    return seen


def test_problems_whose_estimates_exceed_the_memory_never_run_together():
    footprints = {
        "a": Footprint(host=6 * GiB, gpu=1 * GiB),
        "b": Footprint(host=6 * GiB, gpu=1 * GiB),
        "c": Footprint(host=1 * GiB, gpu=7 * GiB),
        "d": Footprint(host=1 * GiB, gpu=3 * GiB),
        "e": Footprint(host=2 * GiB, gpu=2 * GiB),
    }
    seen = bench_recording_overlaps(Admission(4, host=10 * GiB, gpu=8 * GiB), footprints)
    for together in seen:
        assert sum(footprints[s].host for s in together) <= 10 * GiB, together
        assert sum(footprints[s].gpu for s in together) <= 8 * GiB, together
    assert max(map(len, seen)) > 1  # it is not one at a time: what fits runs together


def test_jobs_bound_what_fits_and_a_problem_larger_than_everything_runs_alone():
    small = {f"p{i}": Footprint(host=GiB, gpu=0) for i in range(6)}
    assert max(map(len, bench_recording_overlaps(Admission(2, 100 * GiB, None), small))) <= 2
    huge = {"huge": Footprint(host=50 * GiB, gpu=0), **small}
    for together in bench_recording_overlaps(Admission(4, 10 * GiB, None), huge):
        assert "huge" not in together or together == ["huge"]


def test_the_estimate_counts_the_problems_own_tensors_on_the_device():
    softmax = load_problem("softmax")
    labels = admitted_labels(softmax, "cuda")
    largest = max(s.params["batch"] * s.params["dim"] * 4 for s in softmax.full)  # fp32 input
    on_gpu = footprint(softmax, labels, "cuda")
    assert 13 * largest < on_gpu.gpu < 40 * largest  # every copy the plane keeps, float64 too
    assert on_gpu.host < 16 * GiB  # the processes alone: no tensor of it lives on the host
    tiny = footprint(softmax, admitted_labels(softmax, "cpu"), "cpu")
    assert tiny.gpu == 0 and tiny.host < on_gpu.gpu


def test_a_recurrent_models_estimate_counts_its_output_by_shape():
    """A bench at --jobs auto estimates every problem before it starts: a 6-layer GRU over 512
    steps counts its real output, found by shape (PyTorch's own meta run steps through it in
    Python, seconds a size)."""
    gru = load_problem(str(KERNELBENCH / "level3" / "39_GRU.py"))
    weights = sum(p.numel() for p in torch.nn.GRU(128, 256, 6).parameters()) * 4
    inputs, output = (512 * 10 * 128 + 6 * 10 * 256) * 4, 512 * 10 * 256 * 4
    with Passed() as passed:
        estimate = data_bytes(gru, [gru.full[0].label])
    assert "gru" not in passed.ops
    assert estimate == (INPUT_COPIES * inputs + OUTPUT_COPIES * output + 2 * weights
                        + FLOAT64_FACTOR * (inputs + weights + output))  # fmt: skip


ITEM_IN_CONSTRUCTOR = """
import torch

class Model(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.rate = float(torch.linspace(0, 1, 4)[1].item())  # as Swin's drop-path rates
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x) * self.rate

def get_inputs():
    return [torch.rand(8, 64)]

def get_init_inputs():
    return [64]
"""


def test_a_model_whose_constructor_needs_values_is_estimated(tmp_path):
    """The meta device cannot run `.item()`: such a Model is built on the cpu for its estimate
    (an exception here would stop the whole bench before its first search)."""
    path = tmp_path / "item_in_constructor.py"
    path.write_text(ITEM_IN_CONSTRUCTOR)
    problem = load_problem(str(path))
    inputs, output, weights = 8 * 64 * 4, 8 * 64 * 4, (64 * 64 + 64) * 4
    assert data_bytes(problem, [problem.full[0].label]) == (
        INPUT_COPIES * inputs + OUTPUT_COPIES * output + 2 * weights
        + FLOAT64_FACTOR * (inputs + weights + output))  # fmt: skip
    assert footprint(problem, admitted_labels(problem, "cuda"), "cuda").gpu > 0


def test_auto_jobs_and_what_the_bench_says_it_chose():
    assert auto_jobs(2) == 1 and auto_jobs(16) == 8
    said = chosen(6, (120 * GiB, 100 * GiB))
    assert said == ("up to 6 problems at a time, as many as their estimated memory fits in host "
                    "120 GiB and GPU 100 GiB")  # fmt: skip
    assert chosen(1, (None, None)) == "1 problem(s) at a time"
