"""Run Nsight Compute on candidate forward calls: a profile diagnoses what limits the kernels of
one call; a census lists every kernel that one call at each target size launches.

One profiled run exports a .ncu-rep report; imports read it back as the raw page (every metric
by name) and, for a profile, the details page (ncu's rule hints). Every failure (no ncu, no
permission for the counters, a crash, a timeout) becomes {"status": "unavailable", "why": ...}:
the search goes on without a diagnosis.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.problems import Problem
from engine.profiler import diagnosis as dg
from engine.profiler.csvparse import RawPage, parse_details, parse_raw
from engine.runner.profile_launch import GO_FILE, NVTX_RANGE, READY_FILE
from engine.worker.sandbox import (
    EXCHANGE_PARENT,
    TRITON_CACHE_NAME,
    runner_command,
    worker_environment,
)

# Where Nsight Compute installs itself when it is not on PATH.
NCU_INSTALLS = "/opt/nvidia/nsight-compute/*"
NCU_FALLBACKS = (f"{NCU_INSTALLS}/ncu", "/usr/local/cuda/bin/ncu")
SECTIONS = (
    "SpeedOfLight",
    "Occupancy",
    "LaunchStats",
    "MemoryWorkloadAnalysis",
    "WarpStateStats",
    "SchedulerStats",
)
# Named metrics on top of the sections: the figures the diagnosis reads (ncu drops unsupported
# ones silently; the diagnosis lists them under missing_metrics).
REQUESTED_METRICS = (
    dg.DURATION,
    dg.DRAM_READ,
    dg.DRAM_WRITE,
    dg.DRAM_RATE,
    dg.DRAM_PCT,
    dg.SM_PCT,
    dg.MEMORY_PCT,
    dg.L1_PCT,
    dg.L2_PCT,
    dg.ACHIEVED_OCCUPANCY,
    dg.THEORETICAL_OCCUPANCY,
    dg.REGISTERS,
    dg.WAVES,
    dg.SPILLS[1],
    *dg.GLOBAL_SECTORS,
    *dg.GLOBAL_REQUESTS,
    *(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in dg.STALL_WORDS),
)
# The NVTX range holds exactly one forward call; this caps how many of its kernel launches are
# profiled (each costs a couple of dozen replay passes).
MAX_PROFILED_LAUNCHES = 8
# The census records each launch's name and duration only (one replay pass a kernel). A call that
# launches more kernels than this is refused by the census: one that stopped early could miss the
# kernel that does the work.
CENSUS_MAX_LAUNCHES = 512
PROBE_TIMEOUT_S = 120
IMPORT_TIMEOUT_S = 120
# How long ncu and the launcher may take to start (Python, torch, CUDA's injection), and how
# often the engine looks for the launcher's READY_FILE meanwhile.
START_TIMEOUT_S, TURN_POLL_S = 180.0, 0.01
PROBE_PROGRAM = "import torch; x = torch.ones(1024, device='cuda'); (x * 2).sum().item()"
NOTHING_PROFILED = (
    f"ncu profiled no kernel in the NVTX range {NVTX_RANGE!r}: ModelNew.forward launched nothing "
    "on the GPU"
)


def find_ncu() -> str | None:
    """The ncu executable: on PATH, else the newest standard install."""
    on_path = shutil.which("ncu")
    if on_path:
        return on_path
    for pattern in NCU_FALLBACKS:
        found = sorted(p for p in glob.glob(pattern) if os.access(p, os.X_OK))
        if found:
            return found[-1]
    return None


def run_bounded(command: list[str], timeout_s: float, **kwargs) -> tuple[int | None, str]:
    """(exit status, stdout+stderr); the status is None when the whole process group was killed
    for running past `timeout_s` (ncu and the profiled program with it)."""
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
        **kwargs,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return None, output


def explain_failure(output: str) -> str:
    """Plain words for why ncu could not profile, from its output."""
    if "ERR_NVGPUCTRPERM" in output:
        return (
            "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): the driver "
            "restricts them to administrators; run as root, or load the nvidia module with "
            "NVreg_RestrictProfilingToAdminUsers=0"
        )
    if "LibraryNotLoaded" in output:
        return (
            "ncu could not load its own libraries (LibraryNotLoaded): the Nsight Compute install "
            "is incomplete or does not match the driver; reinstall it"
        )
    lowered = output.lower()
    if "permission" in lowered:
        return f"ncu was refused permission: {tail(output)}"
    if "no cuda gpus" in lowered or "found no nvidia driver" in lowered:
        return "no CUDA GPU: the profiled program found no GPU or driver"
    return tail(output) or "ncu printed nothing"


def tail(output: str, lines: int = 6) -> str:
    """ncu's error lines and the last lines the program printed before them, on one line."""
    kept = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in kept if line.startswith("==ERROR==")]
    program = [line for line in kept if not line.startswith("==")]
    return " | ".join(program[-lines:] + errors[-lines:])


@functools.cache
def ncu_status() -> tuple[bool, str]:
    """(usable, why): whether ncu exists and can read counters, from one tiny profiled program."""
    ncu = find_ncu()
    if ncu is None:
        return False, (
            "no ncu on PATH, in /opt/nvidia/nsight-compute/*/ or /usr/local/cuda/bin: install "
            "Nsight Compute to get bottleneck diagnoses"
        )
    command = [
        ncu, "--target-processes", "all", "--clock-control", "none", "--launch-count", "1",
        "--metrics", dg.DURATION, "--csv", sys.executable, "-c", PROBE_PROGRAM,
    ]  # fmt: skip
    try:
        status, output = run_bounded(command, PROBE_TIMEOUT_S, env=worker_environment("cuda"))
    except OSError as exc:
        return False, f"{ncu} could not be started: {exc}"
    if status is None:
        return False, f"ncu took more than {PROBE_TIMEOUT_S} s to profile one tiny kernel"
    if status == 0 and dg.DURATION in output and "==ERROR==" not in output:
        return True, f"{ncu} reads GPU counters"
    return False, explain_failure(output)


def ncu_command(ncu: str, report: Path, program: list[str], census: bool = False) -> list[str]:
    """Profile the launches inside NVTX_RANGE of `program` into the report file: for a
    diagnosis the sections and metrics it reads; for a census names and durations alone, one
    more launch than the census admits (so that too many shows)."""
    command = [ncu, "--target-processes", "all", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/"]
    if census:
        command += ["--launch-count", str(CENSUS_MAX_LAUNCHES + 1), "--metrics", dg.DURATION]
    else:
        command += ["--launch-count", str(MAX_PROFILED_LAUNCHES)]
        for section in SECTIONS:
            command += ["--section", section]
        command += ["--metrics", ",".join(REQUESTED_METRICS)]
    # Clocks as the timing runs see them; caches flushed between replay passes, so DRAM bytes
    # are those of a cold run.
    command += ["--clock-control", "none", "--cache-control", "all"]
    command += ["--export", str(report), "--force-overwrite"]
    return command + program


def run_in_turn(command: list[str], timeout_s: float, exchange: Path, turn, **kwargs
                ) -> tuple[int | None, str, float]:  # fmt: skip
    """run_bounded for a program that says it has started (READY_FILE in `exchange`) and waits
    for GO_FILE there, written once `turn` is held: ncu's and the program's start overlap other
    work on the GPU, the profiled calls do not. (exit status, output, seconds `turn` was held);
    the start is bounded by START_TIMEOUT_S, the run from the go by `timeout_s`."""
    with tempfile.TemporaryFile("w+", errors="replace") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, **kwargs)  # fmt: skip
        ready, status, held = exchange / READY_FILE, None, 0.0
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(TURN_POLL_S)
            if ready.exists() and proc.poll() is None:
                with turn:
                    started = time.monotonic()
                    (exchange / GO_FILE).touch()
                    status = _wait(proc, timeout_s)
                    held = time.monotonic() - started
            elif proc.poll() is not None:
                status = proc.returncode
        finally:
            if proc.poll() is None:  # past its deadline, or interrupted
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.seek(0)
        return status, log.read(), held


def _wait(proc: subprocess.Popen, timeout_s: float) -> int | None:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def import_command(ncu: str, report: Path, page: str) -> list[str]:
    """Read a report back as CSV; `page` is "raw" or "details"; units in base (ns, bytes)."""
    return [ncu, "--import", str(report), "--csv", "--page", page, "--print-units", "base"]


def sandboxed_launcher(ncu: str, exchange: Path, problem: Problem, source: str, labels: list[str]):
    """The profiled program: the runner's launcher in the candidate sandbox (sockets allowed for
    ncu's injection), its inputs written to `exchange`, where it writes facts.json."""
    (exchange / "problem.py").write_text(problem.path.read_text())
    (exchange / "candidate.py").write_text(source)
    spec = {"problem": "problem.py", "candidate": "candidate.py",
            "sizes": [problem.size(label).params for label in labels]}  # fmt: skip
    (exchange / "profile.json").write_text(json.dumps(spec))
    # ncu's folder, and every Nsight Compute install (a wrapper on PATH may start another).
    roots = {str(Path(os.path.realpath(ncu)).parent), *glob.glob(NCU_INSTALLS)}
    return runner_command("cuda", str(exchange), str(exchange), "kbrunner.profile_launch",
                          profiling=tuple(sorted(roots)))  # fmt: skip


def unavailable(why: str, gpu_seconds: float = 0.0) -> dict:
    return {"status": "unavailable", "why": why, "gpu_seconds": gpu_seconds}


def diagnose_range(raw: RawPage, details_text: str, bytes_min: float | None) -> dict:
    """Diagnose the longest launch of the range; list every launch."""
    details = {d.launch_id: d for d in parse_details(details_text)}
    rows = raw.rows
    longest = max(rows, key=lambda row: dg.number(row, dg.DURATION) or 0.0)
    launch_id = int(dg.number(longest, "ID") or 0)
    single = len(rows) == 1
    result = dg.diagnose(
        longest, details.get(launch_id), REQUESTED_METRICS, bytes_min if single else None
    )
    kernels = []
    for row in rows:
        duration = dg.number(row, dg.DURATION)
        kernels.append(
            {
                "name": row.get("Kernel Name"),
                "duration_us": duration / 1e3 if duration is not None else None,
                "grid": row.get("Grid Size"),
                "block": row.get("Block Size"),
                "dram_bytes": dg.dram_bytes(row, duration * 1e-9 if duration else None),
            }
        )
    result["kernels"] = kernels
    if not single:
        capped = len(rows) >= MAX_PROFILED_LAUNCHES
        result["note"] = (
            f"the forward call launched {len(rows)} kernels"
            + (" (the profiling cap: there may be more)" if capped else "")
            + f"; the diagnosis is of the longest, {result['kernel']}"
        )
        moved = [k["dram_bytes"] for k in kernels]
        line = dg.multi_pass_line(sum(moved) if None not in moved else None, bytes_min)
        if line:
            result["evidence"].append(line + " (all kernels of the call)")
            result["tags"].append("multi-pass")
    return result


def ncu_pages(workdir: Path, problem: Problem, source: str, labels: list[str], census: bool,
              timeout_s: float, turn, triton_cache: str | None) -> dict:  # fmt: skip
    """Run the launcher under ncu over `labels`, holding `turn` while it works on the GPU, and
    import the report: {"raw": RawPage, "details": text (a profile only), "gpu_seconds": the
    seconds `turn` was held}, or an unavailable result. The launcher's Triton cache is seeded
    with `triton_cache` (the candidate's kernels, compiled for its evaluation)."""
    ncu = find_ncu()
    if triton_cache and os.path.isdir(triton_cache):
        shutil.copytree(triton_cache, workdir / TRITON_CACHE_NAME, symlinks=True)
    launch = sandboxed_launcher(ncu, workdir, problem, source, labels)
    # ncu runs inside the sandbox with the program it profiles (its injection talks to it over
    # sockets of the sandbox's own network namespace) and writes its report to the exchange
    # folder; it gets no secrets either.
    inside = Path(launch.env["KB_EXCHANGE"])
    if "--" in launch.argv:
        split = launch.argv.index("--") + 1
        box, program = launch.argv[:split], launch.argv[split:]
    else:  # no OS sandbox here
        box, program = [], launch.argv
    # In the sandbox, the runner's environment alone (ncu's scripts need the shell tools);
    # without one, the engine's without secrets.
    outside = {} if box else worker_environment("cuda")
    env = {**outside, **launch.env, "PATH": "/usr/bin:/bin"}
    command = box + ncu_command(ncu, inside / "launch", program, census)
    try:
        status, output, seconds = run_in_turn(
            command,
            timeout_s,
            workdir,
            turn,
            env=env,
            cwd=workdir,
            pass_fds=launch.pass_fds,
            preexec_fn=launch.preexec_fn,
        )
    finally:
        for fd in launch.pass_fds:
            os.close(fd)
    if status is None and not seconds:
        return unavailable(f"ncu and its program did not start within {START_TIMEOUT_S:g} s")
    if status is None:
        return unavailable(f"ncu ran past {timeout_s:g} s and was stopped", seconds)
    reports = sorted(workdir.glob("launch*.ncu-rep"))
    if status != 0:
        return unavailable(f"ncu failed (exit {status}): {explain_failure(output)}", seconds)
    if not reports:
        return unavailable(NOTHING_PROFILED, seconds)
    pages = {}
    for page in ("raw",) if census else ("raw", "details"):
        page_status, pages[page] = run_bounded(
            import_command(ncu, reports[0], page), IMPORT_TIMEOUT_S, env=worker_environment("cuda")
        )
        if page_status != 0:
            why = f"reading the report's {page} page failed: {tail(pages[page])}"
            return unavailable(why, seconds)
    pages["raw"] = parse_raw(pages["raw"])
    if not pages["raw"].rows:
        return unavailable(NOTHING_PROFILED, seconds)
    return {**pages, "gpu_seconds": seconds}


def profile_in(workdir: Path, problem: Problem, source: str, size_label: str, timeout_s: float,
               **launch):  # fmt: skip
    pages = ncu_pages(workdir, problem, source, [size_label], False, timeout_s, **launch)
    if "raw" not in pages:
        return pages
    bytes_min = _bytes_min(workdir / "facts.json")
    result = diagnose_range(pages["raw"], pages["details"], bytes_min)
    return {**result, "size": size_label, "bytes_min": bytes_min,
            "gpu_seconds": pages["gpu_seconds"]}  # fmt: skip


def census_in(workdir: Path, problem: Problem, source: str, labels: list[str], timeout_s: float,
              **launch):  # fmt: skip
    pages = ncu_pages(workdir, problem, source, labels, True, timeout_s, **launch)
    if "raw" not in pages:
        return pages
    names = [row.get("Kernel Name") for row in pages["raw"].rows]
    complete = len(names) <= CENSUS_MAX_LAUNCHES
    kernels = [{"name": name} for name in names[:CENSUS_MAX_LAUNCHES]]
    return {"status": "ok", "kernels": kernels, "complete": complete, "sizes": labels,
            "gpu_seconds": pages["gpu_seconds"]}  # fmt: skip


def _bytes_min(facts: Path) -> float | None:
    """The launcher's figure, written inside the sandbox: a number or nothing."""
    try:
        value = json.loads(facts.read_text()[:1000])["bytes_min"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def profile(problem: Problem, source: str, size_label: str, *, timeout_s: float = 300,
            turn=None, triton_cache: str | None = None) -> dict:  # fmt: skip
    """Profile one forward call of the candidate `source` on one size of `problem`, under ncu,
    holding `turn` (a lock on the GPU, if given) once ncu and the program have started.

    Returns the diagnosis (engine.profiler.diagnosis) with `gpu_seconds`, the time `turn` was
    held, and `kernels`, every launch in the call; or {"status": "unavailable", "why"}.
    Never raises.
    """
    return _in_workdir(profile_in, problem, source, size_label, timeout_s, turn, triton_cache)


def census(problem: Problem, source: str, labels: list[str], *, timeout_s: float = 300,
           turn=None, triton_cache: str | None = None) -> dict:  # fmt: skip
    """Every kernel that one forward call of `source` launches at each size in `labels`, under
    ncu, holding `turn` as `profile` does: {"status": "ok", "kernels": [{"name"}], "complete":
    False when the call launched more than CENSUS_MAX_LAUNCHES, "gpu_seconds"}; or
    {"status": "unavailable", "why"}. Never raises.
    """
    return _in_workdir(census_in, problem, source, labels, timeout_s, turn, triton_cache)


def _in_workdir(run, problem: Problem, source: str, what, timeout_s: float, turn,
                triton_cache: str | None) -> dict:  # fmt: skip
    usable, why = ncu_status()
    if not usable:
        return unavailable(why)
    try:
        with tempfile.TemporaryDirectory(prefix="kernelbrain-ncu-", dir=EXCHANGE_PARENT) as workdir:
            turn = turn or contextlib.nullcontext()
            return run(Path(workdir), problem, source, what, timeout_s, turn=turn,
                       triton_cache=triton_cache)  # fmt: skip
    except Exception as exc:  # the contract: a failed profile never stops the search
        return unavailable(f"the profiler failed: {type(exc).__name__}: {exc}")
