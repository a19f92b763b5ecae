"""`kernelbrain check`, `problems` and `doctor`, called as the command line (in this process; the
judge and its runners are real subprocesses)."""

import json
from pathlib import Path

import pytest
from cli import kernelbrain, kernelbrain_process

from engine.cli.check import census_caveat
from engine.cli.problems import LISTING_CACHE

CANDIDATES = Path(__file__).parent / "candidates"


kb = kernelbrain


def test_check_passes_with_json():
    done = kb("check", "softmax", str(CANDIDATES / "softmax_valid.py"), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {"passed", "reason", "message", "error", "seed", "census"}
    assert report["passed"] is True and report["reason"] is None
    assert 0 <= report["error"] < 1e-5
    assert report["census"] is None  # the cpu has no kernel census


def test_a_passed_check_says_when_its_kernel_census_vouched_for_nothing():
    """On cuda a check ends with a kernel census; a census that could not run or saw none of the
    candidate's kernels is said under the verdict, one that saw them is not."""
    assert census_caveat({"status": "ok", "why": ""}) is None
    why = "the profiler listed none of the candidate's Triton kernels"
    assert census_caveat({"status": "unseen", "why": why}) == f"kernel census unseen: {why}"
    assert census_caveat({"status": "unavailable", "why": "ncu is not installed"}) == (
        "kernel census unavailable: ncu is not installed"
    )


def test_check_rejects_with_exit_1():
    done = kb("check", "softmax", str(CANDIDATES / "softmax_partial.py"), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert (report["passed"], report["reason"]) == (False, "unwritten_output")
    plain = kb("check", "softmax", str(CANDIDATES / "softmax_signature.py"))
    assert plain.returncode == 1
    assert plain.stdout.startswith("rejected (signature_mismatch)")


@pytest.mark.slow
def test_check_seeds_are_fresh_printed_and_repeatable():
    valid = str(CANDIDATES / "softmax_valid.py")
    seeds = {json.loads(kb("check", "softmax", valid, "--json").stdout)["seed"] for _ in range(2)}
    assert len(seeds) == 2
    again = kb("check", "softmax", valid, "--seed", "12345")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.rstrip().endswith("seed 12345")
    assert "at tiny, small" in again.stdout  # not only the tiniest size on cpu


def test_check_rejects_a_candidate_right_only_at_the_tiniest_size(tmp_path):
    from tests.adversarial.softmax import RIGHT_ONLY_WHEN_TINY

    path = tmp_path / "tiny_only.py"
    path.write_text(RIGHT_ONLY_WHEN_TINY)
    done = kb("check", "softmax", str(path), "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["reason"] in ("wrong_output", "unwritten_output")


def test_check_refuses_without_a_sandbox_unless_trusted(tmp_path):
    valid = str(CANDIDATES / "softmax_valid.py")
    env = {"KERNELBRAIN_BWRAP": "0"}  # read once a process: these are real ones
    refused = kernelbrain_process("check", "softmax", valid, env=env)
    assert refused.returncode == 2
    assert "without the OS sandbox" in refused.stderr and "--trust-candidates" in refused.stderr
    trusted = kernelbrain_process("check", "softmax", valid, "--trust-candidates", env=env)
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr


def test_usage_errors_exit_2(tmp_path):
    missing = kb("check", "softmax", str(tmp_path / "nope.py"))
    assert missing.returncode == 2
    assert "no candidate file" in missing.stderr
    broken = tmp_path / "broken_problem.py"
    broken.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    bad_problem = kb("check", str(broken), str(CANDIDATES / "softmax_valid.py"))
    assert bad_problem.returncode == 2
    assert "missing `get_inputs`" in bad_problem.stderr


def test_problems_lists_sizes_and_replaced_ops(tmp_path):
    done = kb("problems", env={"KERNELBRAIN_SESSIONS": str(tmp_path)})  # computed, not kept
    assert done.returncode == 0
    assert "softmax: Softmax over dim 1" in done.stdout
    assert "replaces: scaled_dot_product_attention" in done.stdout
    assert "  full0  batch=4096, dim=393216  -> float32[4096, 393216]" in done.stdout
    assert "  tiny   n=2, c=8, h=5, w=6  -> float32[2, 8, 5, 6]" in done.stdout  # a label once
    tolerances = [line for line in done.stdout.splitlines() if "tolerance:" in line]
    assert "  tolerance: every precision 1e-05" in tolerances  # one value for all
    assert "  tolerance: fp32 1e-05, tf32x3 1e-05, tf32 0.002" in tolerances  # one a precision
    assert not any("{" in line for line in tolerances)


def test_problems_once_listed_starts_without_torch(tmp_path):
    """The first `problems` computes the listing (tracing each problem needs torch) and keeps it
    in the sessions folder; the next, a process of its own, prints the same lines without
    importing torch. A listing kept for other files is computed again."""
    env = {"KERNELBRAIN_SESSIONS": str(tmp_path)}
    first = kb("problems", env=env)
    assert first.returncode == 0 and "softmax: Softmax over dim 1" in first.stdout
    kept = tmp_path / LISTING_CACHE
    assert json.loads(kept.read_text())["text"] == first.stdout
    again = kernelbrain_process("problems", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert again.returncode == 0 and again.stdout == first.stdout
    imported = [line.split("|")[-1].strip() for line in again.stderr.splitlines()]
    assert "engine.problems.problem" in imported  # the import times are there to read
    assert not [name for name in imported if name.split(".")[0] == "torch"]
    kept.write_text(json.dumps({"key": "other files", "text": "stale\n"}))
    assert kb("problems", env=env).stdout == first.stdout
    assert json.loads(kept.read_text())["key"] != "other files"


def test_doctor_reports_backend_and_isolation():
    done = kb("doctor")
    assert done.returncode == 0, done.stderr
    for key in ("GPU", "torch", "triton", "ncu", "backend auto", "candidate sandbox", "keys set"):
        assert key in done.stdout
