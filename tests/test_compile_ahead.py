"""Compiling ahead (engine.backends.compile_pool, engine.worker.precompile): candidates' kernels
compiled for an H200 (sm_90) by real sandboxed compile workers, on this machine without a GPU,
before their evaluation in the real judge on the cpu backend."""

import json
import random
import socket
import threading
import uuid
from pathlib import Path

import pytest

from engine.backends.local import LocalBackend
from engine.backends.sim import SimBackend
from engine.compose import create_session, resume_session
from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.jobs import EvalJob, RungSpec, source_sha256
from engine.problems import load_problem
from engine.search.budget import Ledger
from engine.session.settings import SessionSettings
from engine.session_files import SessionPaths
from engine.worker import Timeouts
from engine.worker.sandbox import isolation
from hints import match_problem
from hints.matmul import FAMILY as MATMUL
from tests.adversarial import softmax as attacks

CANDIDATES = Path(__file__).parent / "candidates"
KERNELBENCH = Path(__file__).parent / "problems_kernelbench"
ENGINE_DIR = Path(__file__).resolve().parent.parent / "engine"
H200 = "cuda:90:32"
TIMEOUTS = Timeouts(compile_s=60, run_s=30, time_s=60)
sandboxed = pytest.mark.skipif(not isolation().sandboxed, reason=isolation().detail)


@pytest.fixture(scope="module")
def backend():
    local = LocalBackend("cpu", timeouts=TIMEOUTS, compile_target=H200, compile_workers=1)
    yield local
    local.close()


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


def first_evaluation(source: str, seq: int = 1) -> EvalJob:
    return EvalJob(f"c{seq}", source, RungSpec(0, ("full0",), 1, 3, input_sets=1), seq)


def cache_of(backend, source: str) -> Path:
    return Path(backend.triton_caches) / source_sha256(source)[:32]


def test_a_kernel_only_the_compiler_refuses_is_rejected_before_it_holds_the_gpu(backend, softmax):
    source = (CANDIDATES / "softmax_loop_carried_type.py").read_text()
    result = backend.evaluate(softmax, first_evaluation(source))
    assert result.reason == "compile_error", result.message
    assert "Loop-carried variable total" in result.message
    assert set(result.gpu_seconds) == {"precompile", "compile"}  # no judge work at all
    interpreter_only = LocalBackend("cpu", timeouts=TIMEOUTS, compile_target=None)
    try:  # the interpreter alone lets it through
        assert interpreter_only.check(softmax, source).passed
    finally:
        interpreter_only.close()


def test_kernels_compiled_ahead_wait_in_the_candidates_own_cache(backend, softmax):
    source = (CANDIDATES / "softmax_valid.py").read_text()
    backend.prepare(softmax, [source], ["full0", "full1"])
    found = backend.compiled_ahead(softmax, source, backend.sizes_for(softmax, ["full0"]))
    assert found["status"] == "compiled" and found["compiled"] == ["tiny"], found
    cubins = sorted(p.name for p in cache_of(backend, source).rglob("*.cubin"))
    assert cubins == ["softmax_kernel.cubin"]  # PTX assembled for sm_90 by Triton's ptxas
    result = backend.evaluate(softmax, first_evaluation(source, seq=2))
    assert result.passed, result.message
    assert result.gpu_seconds["precompile"] > 0  # the worker's seconds, CPU work
    assert list(cache_of(backend, source).rglob("softmax_kernel.cubin"))  # kept for its next


def test_a_judged_request_compiles_ahead_before_it_holds_the_gpu(backend, softmax):
    """The bench times a search's best kernel with a judge request of its own, in a fresh cache:
    its kernels compile in the compile box first, as an evaluation's do, never while the request
    holds the GPU's turn (every other search's GPU work waits for it)."""
    refused = (CANDIDATES / "softmax_loop_carried_type.py").read_text()
    result = backend.judge(softmax, refused, [softmax.size("tiny")], check_seeds=[1])
    assert result.reason == "compile_error", result.message
    assert set(result.gpu_seconds) == {"precompile", "compile"}  # no judge work at all
    source = (CANDIDATES / "softmax_valid.py").read_text().replace("softmax_kernel", "kb_softmax")
    result = backend.judge(softmax, source, [softmax.size("tiny")], check_seeds=[1])
    assert result.passed, result.message
    assert result.gpu_seconds["precompile"] > 0
    assert list(cache_of(backend, source).rglob("kb_softmax.cubin"))


def test_a_candidate_that_needs_real_values_is_left_to_its_timing_runner(backend, softmax):
    source = attacks.candidate("""
        return launch(x.cpu())  # data where it is: meta tensors have none to copy
    """)
    found = backend.compiled_ahead(softmax, source, [softmax.size("tiny")])
    assert found["status"] == "compiled" and found["compiled"] == []
    assert "meta tensor" in found["skipped"]["tiny"], found
    assert backend.evaluate(softmax, first_evaluation(source, seq=3)).passed


def test_statically_rejected_sources_are_not_compiled(backend, softmax):
    source = (CANDIDATES / "softmax_signature.py").read_text().replace("import triton", "import os")
    backend.prepare(softmax, [source], ["full0"])
    assert not backend.compile_pool.submitted(source_sha256(source))


def test_a_compile_that_never_ends_is_rejected_at_the_compile_deadline(softmax):
    local = LocalBackend("cpu", timeouts=Timeouts(compile_s=5), compile_target=H200,
                         compile_workers=1)  # fmt: skip
    try:
        found = local.compiled_ahead(softmax, attacks.HANGS_FOREVER, [softmax.size("tiny")])
    finally:
        local.close()
    assert found["status"] == "rejected" and found["reason"] == "timeout", found


SPIES = attacks.candidate("""
    import os, subprocess
    seen = {"env": dict(os.environ), "files": {}, "connected": [], "spawned": None,
            "wrote": None}
    for path in ("SECRET_FILE", "ENGINE_DIR/jobs.py", os.path.expanduser("~/.ssh/id_rsa")):
        try:
            seen["files"][path] = open(path).read()[:200]
        except OSError as exc:
            seen["files"][path] = type(exc).__name__
    import socket
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
        seen["connected"].append("tcp")
    except OSError as exc:
        seen["connected"].append(type(exc).__name__)
    try:
        seen["spawned"] = subprocess.run(["/bin/sh", "-c", "echo shell"],
                                         capture_output=True).stdout.decode()
    except OSError as exc:
        seen["spawned"] = type(exc).__name__
    try:
        open("ENGINE_DIR/pwned.py", "w").write("import os")
        seen["wrote"] = "ENGINE_DIR/pwned.py"
    except OSError as exc:
        seen["wrote"] = type(exc).__name__
    os.makedirs(os.environ["TRITON_CACHE_DIR"], exist_ok=True)
    with open(os.path.join(os.environ["TRITON_CACHE_DIR"], "spy.json"), "w") as f:
        f.write(repr(seen).replace("'", '"'))
    return launch(x)
""")


@sandboxed
def test_the_compile_box_holds_no_secret_network_shell_or_project(softmax, tmp_path, monkeypatch):
    canary = f"sk-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    secret = tmp_path / ".env"
    secret.write_text(f"OPENAI_API_KEY={canary}\n")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                pass

    watcher = threading.Thread(target=accept)
    watcher.start()
    source = SPIES
    for name, value in (("SECRET_FILE", secret), ("ENGINE_DIR", ENGINE_DIR),
                        ("PORT", listener.getsockname()[1])):  # fmt: skip
        source = source.replace(name, str(value))
    local = LocalBackend("cpu", timeouts=TIMEOUTS, compile_target=H200, compile_workers=1)
    try:
        found = local.compiled_ahead(softmax, source, [softmax.size("tiny")])
        seen = json.loads((cache_of(local, source) / "spy.json").read_text())
    finally:
        local.close()
        stop.set()
        watcher.join()
        listener.close()
    assert found["status"] == "compiled", found
    assert canary not in json.dumps(seen)
    assert not any(k.endswith("_KEY") for k in seen["env"])
    assert set(seen["files"].values()) == {"FileNotFoundError"}
    assert seen["connected"] == ["PermissionError"] and not accepted
    assert seen["spawned"] == "FileNotFoundError"  # no shell in the box
    assert seen["wrote"] != f"{ENGINE_DIR}/pwned.py" and not (ENGINE_DIR / "pwned.py").exists()


class Recording(SimBackend):
    """The sim backend, with what the engine asked it to prepare written down."""

    def __init__(self):
        super().__init__()
        self.prepared: list[tuple[list[str], tuple]] = []

    def prepare(self, problem, sources, labels):
        self.prepared.append((list(sources), tuple(labels)))


def test_after_each_step_the_engine_hands_the_queues_head_to_the_backend(tmp_path):
    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("softmax", "sim", 3, {"evaluations": 6}))
    engine = resume_session(paths)
    engine.backend = Recording()
    engine.start()
    for _ in range(4):
        engine.step()
        queued = [engine.search.by_id[c].source for c in engine.search.schedule.queue[:8]]
        sources, labels = engine.backend.prepared[-1]
        assert sources == queued and labels == engine.search.ladder[-1].size_labels
    assert any(sources for sources, _ in engine.backend.prepared)


def test_compile_workers_time_overlaps_the_gpus_and_is_not_idle():
    ledger = Ledger()
    ledger.charge_evaluation(0, {"precompile": 5.0, "compile": 1.0, "time": 2.0})
    ledger.wall_seconds = 4.0
    assert ledger.gpu_seconds == 2.0
    assert ledger.cpu_seconds_by_activity == {"compile": 1.0, "precompile": 5.0}
    assert ledger.idle_seconds == pytest.approx(1.0)  # 4 s of wall: 2 on the GPU, 1 waiting


def test_compile_workers_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("KERNELBRAIN_COMPILE_WORKERS", "0")
    local = LocalBackend("cpu", compile_target=H200)
    try:
        assert local.compile_pool is None
    finally:
        local.close()


def test_a_worker_count_that_is_no_count_says_what_to_give(monkeypatch):
    monkeypatch.setenv("KERNELBRAIN_COMPILE_WORKERS", "many")
    with pytest.raises(ValueError, match="'many': not a count: give 1"):
        LocalBackend("cpu", compile_target=H200)


PLANTS_IN_ITS_CACHE = attacks.candidate("""
    import os
    os.makedirs(os.environ["TRITON_CACHE_DIR"], exist_ok=True)
    open(os.path.join(os.environ["TRITON_CACHE_DIR"], "planted-by-a-candidate"), "w").close()
    return launch(x)
""")
LOOKS_FOR_THE_PLANT = attacks.candidate("""
    import os
    for top, _, names in os.walk(os.environ["TRITON_CACHE_DIR"]):
        if "planted-by-a-candidate" in names:
            raise RuntimeError("found another candidate's file in my Triton cache")
    return launch(x)
""")


def test_a_compiled_ahead_cache_reaches_its_own_candidate_only(softmax):
    """The first runner of a judge seeds every later runner's cache with its own warm-up's: a
    candidate's cache (filled in the compile box, before its first evaluation) must not be in it."""
    local = LocalBackend("cpu", timeouts=TIMEOUTS, compile_target=H200, compile_workers=1)
    tiny = [softmax.size("tiny")]
    try:  # the judge's runtime protection alone (the engine's static rules refuse `os`)
        found = local.compiled_ahead(softmax, PLANTS_IN_ITS_CACHE, tiny)
        assert found["status"] == "compiled", found
        assert (cache_of(local, PLANTS_IN_ITS_CACHE) / "planted-by-a-candidate").exists()
        planted = local.judge(softmax, PLANTS_IN_ITS_CACHE, tiny, check_seeds=[1])
        assert planted.passed, planted.message
        looking = local.judge(softmax, LOOKS_FOR_THE_PLANT, tiny, check_seeds=[1])
    finally:
        local.close()
    assert looking.passed, looking.message


def test_a_kernel_beyond_the_gpus_shared_memory_is_rejected_before_it_holds_the_gpu(backend):
    """On the GPU Triton refuses such a kernel only when it loads it, after compiling; compiled
    ahead for sm_90 the refusal comes first, in the same words."""
    problem = load_problem(str(Path(__file__).parent / "problems_unseen_mm" / "matmul_scale.py"))
    match = MATMUL.match(problem)
    tiled = next(s for s in MATMUL.strategies if s.name == "matmul.tiled_grouped")
    fits = tiled.render(match)
    huge = tiled.render(match, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 5})
    assert backend.compiled_ahead(problem, fits, [problem.size("tiny")])["status"] == "compiled"
    found = backend.compiled_ahead(problem, huge, [problem.size("tiny")])
    assert found["status"] == "rejected" and found["reason"] == "compile_error", found
    assert "out of resource: shared memory" in found["message"]
    assert "Hardware limit: 232448" in found["message"]


def test_a_model_that_builds_its_mask_with_torch_ops_on_meta_is_compiled_ahead(backend):
    """minGPT's constructor makes its causal mask with `torch.tril`. On meta that runs PyTorch's
    Python reference, which imports torch._dynamo (and through it ctypes) on first use: the
    compile box imports it before any candidate runs, so the native guard does not refuse it."""
    problem = load_problem(str(KERNELBENCH / "level3" / "43_MinGPTCausalAttention.py"))
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    source = OfflineGenerator(problem).propose(request).proposals[0].source
    found = backend.compiled_ahead(problem, source, [problem.size("tiny")])
    assert found["status"] == "compiled" and found["skipped"] == {}, found
    assert found["compiled"] == ["tiny"]


VALUES_IN_CONSTRUCTOR = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        rates = [x.item() for x in torch.linspace(0, 0.1, 2)]  # Swin's drop-path rates
        self.scale = 1.0 + rates[-1]
        self.fc = nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""


def test_a_model_whose_constructor_needs_values_is_compiled_ahead(backend, tmp_path):
    """`.item()` cannot run on meta tensors: such a Model, and its candidate's ModelNew in the
    compile box, are built on the cpu and moved to meta (KernelBench's Swin transformers, 29 and
    30, were left to compile on the GPU in their timing runners)."""
    (tmp_path / "values.py").write_text(VALUES_IN_CONSTRUCTOR)
    problem = load_problem(str(tmp_path / "values.py"))
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    source = OfflineGenerator(problem).propose(request).proposals[0].source
    found = backend.compiled_ahead(problem, source, problem.full)
    assert found["status"] == "compiled" and found["skipped"] == {}, found
    assert found["compiled"] == [s.label for s in problem.full]


WIDE_LAYERS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 256, 3, padding=1)
        self.fc = nn.Linear(256, 512)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(y)


def get_inputs():
    return [torch.randn(256, 64, 16, 16)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("tiles", ["small", "large"])
def test_every_tile_plan_of_a_model_compiles_for_the_h200(backend, tmp_path, tiles):
    """The whole-model family's tile plans at the file's own size, where a convolution of 256
    output channels and a 256 x 512 product fill the widest tiles: within sm_90's shared memory
    and registers (the default plan is the one every other test compiles)."""
    (tmp_path / "wide.py").write_text(WIDE_LAYERS)
    problem = load_problem(str(tmp_path / "wide.py"))
    (family, match), = match_problem(problem)  # fmt: skip
    assert family.name == "model"
    (strategy,) = family.strategies
    source = strategy.render(match, {"precision": "tf32x3", "tiles": tiles})
    assert f"KB_TILES = '{tiles}'" in source
    found = backend.compiled_ahead(problem, source, problem.full)
    assert found["status"] == "compiled" and found["skipped"] == {}, found
    assert found["compiled"] == [s.label for s in problem.full]
