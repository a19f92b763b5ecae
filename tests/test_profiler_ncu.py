"""Running Nsight Compute: the command line, the launcher, and every way profiling can fail.

On a machine without ncu the profile call is made for real and must come back "unavailable". The
pipeline itself (export, two imports, parse, diagnose) runs against a stand-in `ncu` executable
that replays the output recorded on the H200, since this machine has neither ncu nor a GPU.
"""

import contextlib
import glob
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import torch

from engine.backends.local import LocalBackend
from engine.gate.kernel_census import own_kernels_unseen
from engine.jobs import EvalResult
from engine.problems import load_problem
from engine.profiler import ncu_status, profile
from engine.profiler.ncu import (
    CENSUS_MAX_LAUNCHES,
    REQUESTED_METRICS,
    SECTIONS,
    explain_failure,
    import_command,
    ncu_command,
    run_bounded,
)
from engine.runner.profile_launch import GO_FILE, NVTX_RANGE, READY_FILE, profiled_calls
from engine.worker.sandbox import EXCHANGE_PARENT, isolation

DATA = Path(__file__).parent / "data" / "ncu"
# One worker runs these: a test that waits for a profile's launcher finds it by its folder's name
# pattern, which another worker's profile would match too.
pytestmark = pytest.mark.xdist_group("ncu")
CANDIDATE = (DATA / "rmsnorm_candidate.py").read_text()
RMSNORM = Path(__file__).parents[1] / "engine" / "problems" / "builtin" / "rmsnorm.py"
REPO = Path(__file__).parents[1]

# A stand-in for ncu: replays the recorded pages on --import (or the page file FAKE_NCU_RAW
# names); on --export runs the real launcher (which, with no GPU here, ends once it has its turn)
# and writes a report; answers the probe; and can refuse the counters or hang in the profiled
# run (FAKE_NCU_MODE).
FAKE_NCU = f"""#!{sys.executable}
import json, os, subprocess, sys, time
args = sys.argv[1:]
mode = os.environ.get("FAKE_NCU_MODE", "ok")
cache = os.path.join(os.environ.get("KB_EXCHANGE", ""), "triton-cache")
seeded = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
with open(os.environ["FAKE_NCU_LOG"], "a") as log:
    log.write(json.dumps({{"args": args, "env": sorted(os.environ), "cache": seeded}}) + "\\n")
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
          "Performance Counters on the target device 0.")
    sys.exit(1)
if "--import" in args:
    page = args[args.index("--page") + 1]
    recorded = os.path.join({str(DATA)!r}, "h200_rmsnorm_" + page + ".csv")
    print(open(os.environ.get("FAKE_NCU_" + page.upper(), recorded)).read())
elif "--export" in args:
    subprocess.run(args[args.index("-S") - 1 :])
    if mode == "hang":
        time.sleep(60)
    open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
else:
    print('"ID","Kernel Name","gpu__time_duration.sum"')
    print('"0","vectorized_elementwise_kernel","2,080"')
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """Put the stand-in ncu first on PATH; forget the cached ncu status before and after."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ncu"
    script.write_text(FAKE_NCU)
    script.chmod(0o755)
    log = tmp_path / "ncu-calls.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    # The stand-in logs to a file outside any sandbox: the pipeline is tested without one here
    # (test_ncu_and_its_program_run_inside_the_candidate_sandbox covers the sandbox).
    monkeypatch.setenv("KERNELBRAIN_BWRAP", "0")
    isolation.cache_clear()
    ncu_status.cache_clear()
    yield log
    ncu_status.cache_clear()
    isolation.cache_clear()


SANDBOXED_NCU = f"""#!{os.path.realpath(sys.executable)}
import os, subprocess, sys
args = sys.argv[1:]
if "--export" not in args:  # the probe, outside any sandbox
    print('"ID","Kernel Name","gpu__time_duration.sum"')
    print('"0","vectorized_elementwise_kernel","2,080"')
    sys.exit(0)
print("exchange", os.environ["KB_EXCHANGE"], "project", os.path.exists({str(REPO / "README.md")!r}))
sys.exit(subprocess.run(args[args.index("-S") - 1 :]).returncode)
"""


@pytest.mark.skipif(not isolation().sandboxed, reason=isolation().detail)
def test_ncu_and_its_program_run_inside_the_candidate_sandbox(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ncu"
    script.write_text(SANDBOXED_NCU)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    ncu_status.cache_clear()
    try:
        result = profile(load_problem(str(RMSNORM)), CANDIDATE, "tiny", timeout_s=120)
    finally:
        ncu_status.cache_clear()
    assert result["status"] == "unavailable"
    # ncu saw the sandbox's exchange folder and no project; the launcher ran there, found no GPU
    assert "exchange /xchg project False" in result["why"], result
    assert "no CUDA GPU" in result["why"]


def calls(log: Path) -> list[dict]:
    """Each call of the stand-in ncu: {"args": [...], "env": [variable names]}."""
    return [json.loads(line) for line in log.read_text().splitlines()]


# --- the command lines --------------------------------------------------------------------------


def test_profile_command_selects_one_nvtx_range_with_the_sections_and_metrics():
    program = [sys.executable, "-m", "engine.profiler.launch"]
    command = ncu_command("/usr/bin/ncu", Path("/tmp/x/launch"), program)
    text = " ".join(command)
    assert command[0] == "/usr/bin/ncu" and command[-3:] == program
    assert f"--nvtx --nvtx-include {NVTX_RANGE}/" in text  # trailing "/": a push/pop range
    assert "--launch-count" in command
    assert "--clock-control none" in text
    assert "--target-processes all" in text
    assert "--export /tmp/x/launch" in text
    for section in (
        "SpeedOfLight",
        "Occupancy",
        "LaunchStats",
        "MemoryWorkloadAnalysis",
        "WarpStateStats",
        "SchedulerStats",
    ):
        assert f"--section {section}" in text
    assert SECTIONS and command[command.index("--metrics") + 1] == ",".join(REQUESTED_METRICS)
    for metric in (
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "launch__registers_per_thread",
        "launch__waves_per_multiprocessor",
        "sass__inst_executed_register_spilling",
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    ):
        assert metric in REQUESTED_METRICS


def test_import_commands_read_the_report_as_csv_pages():
    for page in ("raw", "details"):
        command = import_command("ncu", Path("r.ncu-rep"), page)
        assert " ".join(command) == f"ncu --import r.ncu-rep --csv --page {page} --print-units base"


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


def test_run_bounded_kills_the_whole_process_group_on_timeout():
    started = time.monotonic()
    status, output = run_bounded(["bash", "-c", "sleep 30 & echo $!; wait"], timeout_s=1)
    assert status is None and time.monotonic() - started < 10
    grandchild, deadline = int(output.split()[0]), time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:  # it may still be exiting
        time.sleep(0.05)
    assert not alive(grandchild), "the grandchild outlived the timeout"


def test_failures_are_explained_in_plain_words():
    perm = explain_failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    assert "performance counters" in perm and "NVreg_RestrictProfilingToAdminUsers=0" in perm
    assert "LibraryNotLoaded" in explain_failure("==ERROR== LibraryNotLoaded: libnvperf_host.so")
    no_gpu = explain_failure("RuntimeError: Found no NVIDIA driver on your system.")
    assert no_gpu.startswith("no CUDA GPU")
    assert explain_failure("==PROF== Connected\n==ERROR== Unknown option '--bad'\nmore") == (
        "more | ==ERROR== Unknown option '--bad'"  # what the program said, then ncu's errors
    )


# --- real calls on this machine -----------------------------------------------------------------


def test_profile_never_raises_and_says_why_when_ncu_cannot_run():
    problem = load_problem(str(RMSNORM))
    usable, why = ncu_status()
    result = profile(problem, CANDIDATE, "tiny", timeout_s=240)
    if usable:  # on the GPU machine: a real diagnosis of the tiny size
        assert result["status"] == "ok", result
        assert result["kernel"] == "kb_rmsnorm_dim1" and result["gpu_seconds"] > 0
    else:
        assert result == {"status": "unavailable", "why": why, "gpu_seconds": 0.0}
        assert "ncu" in why or "CUDA" in why


def test_ncu_status_is_cached_per_process():
    assert ncu_status() is ncu_status()


# --- the pipeline, against the stand-in ncu -----------------------------------------------------


def test_profile_runs_ncu_once_and_reads_the_report_twice(fake_ncu, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-candidates")
    assert ncu_status()[0]
    result = profile(load_problem(str(RMSNORM)), CANDIDATE, "small")
    assert result["status"] == "ok", result
    assert result["kind"] == "memory-bound" and round(result["metrics"]["dram_pct"], 1) == 84.6
    assert result["size"] == "small" and result["gpu_seconds"] > 0
    assert [k["name"] for k in result["kernels"]] == ["kb_rmsnorm_dim1"]
    assert result["rule_hints"][0]["estimated_speedup"] == 15.41
    logged = calls(fake_ncu)
    assert not any("OPENAI_API_KEY" in call["env"] for call in logged)
    probe, run, raw, details = (call["args"] for call in logged)
    assert "--clock-control" in probe and "-c" in probe
    assert run[run.index("--nvtx-include") + 1] == f"{NVTX_RANGE}/"
    assert run[-3:] == ["-S", "-m", "kbrunner.profile_launch"]  # the runner's launcher
    assert (
        raw[raw.index("--page") + 1] == "raw" and details[details.index("--page") + 1] == "details"
    )


def test_a_profile_starts_with_the_kernels_its_evaluation_compiled(fake_ncu, tmp_path):
    compiled = tmp_path / "candidate-cache"
    (compiled / "a1b2").mkdir(parents=True)
    (compiled / "a1b2" / "kb_rmsnorm_dim1.cubin").write_bytes(b"sm_90 code")
    result = profile(load_problem(str(RMSNORM)), CANDIDATE, "small", triton_cache=str(compiled))
    assert result["status"] == "ok", result
    run = next(call for call in calls(fake_ncu) if "--export" in call["args"])
    assert run["cache"] == ["a1b2"]  # in the launcher's Triton cache before it started


def test_no_permission_for_counters_is_reported(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    usable, why = ncu_status()
    assert not usable and "ERR_NVGPUCTRPERM" in why
    assert profile(load_problem(str(RMSNORM)), CANDIDATE, "tiny") == {
        "status": "unavailable",
        "why": why,
        "gpu_seconds": 0.0,
    }


def test_a_hanging_profile_is_stopped_at_its_timeout(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    result = profile(load_problem(str(RMSNORM)), CANDIDATE, "tiny", timeout_s=1)
    assert result["status"] == "unavailable" and "ran past 1 s" in result["why"]
    assert 1 <= result["gpu_seconds"] < 30


# --- the kernel census ------------------------------------------------------------------------


def census_page(tmp_path: Path, names: list[str]) -> Path:
    """A raw page as `ncu --import --page raw` prints it for a census: names and durations."""
    lines = ['"ID","Kernel Name","gpu__time_duration.sum"', '"","","ns"']
    lines += [f'"{i}","{name}","1,024"' for i, name in enumerate(names)]
    path = tmp_path / "census_raw.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_census_command_lists_names_alone_and_one_launch_past_its_limit():
    program = [sys.executable, "-m", "engine.profiler.launch"]
    command = ncu_command("/usr/bin/ncu", Path("/tmp/x/launch"), program, census=True)
    assert "--section" not in command
    assert command[command.index("--metrics") + 1] == "gpu__time_duration.sum"
    assert command[command.index("--launch-count") + 1] == str(CENSUS_MAX_LAUNCHES + 1)
    assert f"{NVTX_RANGE}/" in command and command[-3:] == program


def censused(tmp_path, monkeypatch, names: list[str]) -> EvalResult:
    """A passed result put through the cuda backend's census, against the stand-in ncu."""
    monkeypatch.setenv("FAKE_NCU_RAW", str(census_page(tmp_path, names)))
    backend = LocalBackend(device="cuda")
    result = EvalResult(True, gpu_seconds={"time": 1.0})
    try:
        backend.census(load_problem(str(RMSNORM)), CANDIDATE, ["full0", "full1"], result)
    finally:
        backend.close()
    return result


def test_the_census_sees_forward_called_as_the_judge_times_it():
    """A forward may branch on the modes: its own kernels in training or under autograd, torch's
    math where it is timed. The launcher that the census and the profiles run makes its warm-up
    calls and its one call in the range as the judge's runner times forward, in eval mode with
    autograd off, whatever mode the model was built in."""
    seen, marked = [], []

    class Branches(torch.nn.Module):
        def forward(self, x):
            seen.append((self.training, torch.is_grad_enabled(), bool(marked)))
            return x * 2 if self.training or torch.is_grad_enabled() else torch.mm(x, x)

    @contextlib.contextmanager
    def in_range():
        marked.append(True)
        yield

    x = torch.eye(2)
    output = profiled_calls(Branches(), [x], in_range)  # built in training mode, as ModelNew is
    assert torch.equal(output, x) and output is not x  # torch's math, as timed
    assert seen == [(False, False, False), (False, False, False), (False, False, True)]


def test_census_runs_every_target_size_in_one_ncu_run(fake_ncu, tmp_path, monkeypatch):
    result = censused(tmp_path, monkeypatch, ["kb_rmsnorm_dim1", "kb_rmsnorm_dim1"])
    assert result.passed and result.census["status"] == "ok"
    assert result.gpu_seconds["check"] > 0 and result.gpu_seconds["time"] == 1.0
    probe, run, raw = (call["args"] for call in calls(fake_ncu))  # no details page
    assert "--section" not in run and raw[raw.index("--page") + 1] == "raw"


def test_a_census_that_saw_none_of_the_candidates_kernels_vouches_for_nothing(
    fake_ncu, tmp_path, monkeypatch
):
    """Only torch's copies in the range (a CUDA graph's kernel nodes outside it, say): no
    rejection, since nothing foreign was seen, but the census says it saw nothing of the work."""
    copies = ["void at::native::elementwise_kernel<copy_kernel>"]
    result = censused(tmp_path, monkeypatch, copies)
    assert result.passed and result.census["status"] == "unseen"
    assert "none of the candidate's Triton kernels" in result.census["why"]
    # with torch operators allowed, all of the work may be theirs
    listed = {"status": "ok", "kernels": [{"name": name} for name in copies]}
    assert not own_kernels_unseen(listed, CANDIDATE, frozenset({"mm"}))
    assert own_kernels_unseen(listed, CANDIDATE, frozenset())


def test_census_rejects_a_torch_kernel_beside_the_candidates_own(fake_ncu, tmp_path, monkeypatch):
    hidden = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float *)"
    result = censused(tmp_path, monkeypatch, ["kb_rmsnorm_dim1", hidden])
    assert not result.passed and result.reason == "torch_compute"
    assert "cunn_SoftMaxForward" in result.message and result.census["status"] == "rejected"


def test_census_rejects_a_call_that_launches_more_kernels_than_it_lists(
    fake_ncu, tmp_path, monkeypatch
):
    # Trivial launches of its own first, then the work where a capped list would not look.
    result = censused(tmp_path, monkeypatch, ["kb_rmsnorm_dim1"] * (CENSUS_MAX_LAUNCHES + 1))
    assert not result.passed and result.reason == "torch_compute"
    assert f"more than {CENSUS_MAX_LAUNCHES} kernels" in result.message


def test_a_profile_takes_the_gpus_turn_only_once_ncu_and_its_program_have_started(fake_ncu):
    turn, done = threading.Lock(), {}
    problem = load_problem(str(RMSNORM))
    announced = f"{EXCHANGE_PARENT or tempfile.gettempdir()}/kernelbrain-ncu-*/{READY_FILE}"
    with turn:  # another search's work on the GPU
        worker = threading.Thread(target=lambda: done.update(profile(problem, CANDIDATE, "tiny",
                                                                     turn=turn)))  # fmt: skip
        worker.start()
        deadline = time.monotonic() + 120
        while not (started := glob.glob(announced)):
            assert time.monotonic() < deadline, "the launcher never said it had started"
            time.sleep(0.05)
        time.sleep(1.0)  # the launcher waits, and no profiled call has run
        assert worker.is_alive() and not (Path(started[0]).parent / GO_FILE).exists()
        released = time.monotonic()
    worker.join(120)
    assert done["status"] == "ok", done
    assert 0 < done["gpu_seconds"] < time.monotonic() - released  # the wait is not the GPU's
