"""`kernelbrain check`, `problems` and `doctor` through real subprocesses."""

import json
import subprocess
import sys
from pathlib import Path

CANDIDATES = Path(__file__).parent / "candidates"
ROOT = Path(__file__).parent.parent


def kb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=ROOT,
        timeout=240,
    )  # fmt: skip


def test_check_passes_with_json():
    done = kb("check", "softmax", str(CANDIDATES / "softmax_valid.py"), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {"passed", "reason", "message", "error"}
    assert report["passed"] is True and report["reason"] is None
    assert 0 <= report["error"] < 1e-5


def test_check_rejects_with_exit_1():
    done = kb("check", "softmax", str(CANDIDATES / "softmax_partial.py"), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert (report["passed"], report["reason"]) == (False, "unwritten_output")
    plain = kb("check", "softmax", str(CANDIDATES / "softmax_signature.py"))
    assert plain.returncode == 1
    assert plain.stdout.startswith("rejected (signature_mismatch)")


def test_strict_precision_rejects_a_tf32_kernel_that_tf32_passes(tmp_path):
    ieee = (CANDIDATES / "linear_relu_div_valid.py").read_text()
    tf32 = tmp_path / "linear_relu_div_tf32.py"
    tf32.write_text(ieee.replace(', input_precision="ieee"', ""))  # tl.dot's default: TF32
    strict = kb("check", "linear_relu_div", str(tf32), "--json")
    assert strict.returncode == 1
    report = json.loads(strict.stdout)
    assert report["reason"] == "tf32_in_strict_session"
    assert report["message"] == (
        'this kernel computes in tf32 (tl.dot without input_precision="ieee"); the session is '
        'strict fp32: use input_precision="ieee", or run with --precision tf32'
    )
    allowed = kb("check", "linear_relu_div", str(tf32), "--precision", "tf32")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert allowed.stdout.startswith("passed") and "within 0.002 (tf32)" in allowed.stdout


def test_usage_errors_exit_2(tmp_path):
    missing = kb("check", "softmax", str(tmp_path / "nope.py"))
    assert missing.returncode == 2
    assert "no candidate file" in missing.stderr
    broken = tmp_path / "broken_problem.py"
    broken.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    bad_problem = kb("check", str(broken), str(CANDIDATES / "softmax_valid.py"))
    assert bad_problem.returncode == 2
    assert "missing `get_inputs`" in bad_problem.stderr


def test_problems_lists_sizes_and_replaced_ops():
    done = kb("problems")
    assert done.returncode == 0
    assert "softmax: Softmax over dim 1" in done.stdout
    assert "replaces: scaled_dot_product_attention" in done.stdout
    assert "batch=4096, dim=393216" in done.stdout


def test_doctor_reports_backend_and_isolation():
    done = kb("doctor")
    assert done.returncode == 0, done.stderr
    for key in ("GPU", "torch", "triton", "ncu", "backend auto", "worker network", "keys set"):
        assert key in done.stdout
