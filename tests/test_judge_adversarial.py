"""The judge against hostile candidates: each attack runs through the real judge process and a
real sandboxed runner (the engine's static rules are skipped, so the runtime protection is what
is tested), and each test fails if the protection it names is removed."""

import base64
import os
import shutil
import socket
import statistics
import subprocess
import sysconfig
import threading
import uuid
from pathlib import Path

import pytest

from engine.backends.local import LocalBackend
from engine.worker.failures import MESSAGE_LIMIT
from engine.worker.sandbox import isolation
from tests.adversarial import softmax as attacks

ENGINE_DIR = Path(__file__).resolve().parent.parent / "engine"
sandboxed = pytest.mark.skipif(not isolation().sandboxed, reason=isolation().detail)
TIMING = {
    "seed": 11,
    "recheck_seed": 12,
    "warmup": 1,
    "reps": 8,
    "input_sets": 2,
    "interleave": True,
}
SLEEP_S = "0.4"  # a slow kernel: well beyond the cpu backend's timing noise allowance
MEMO_SLEEP_S = "0.05"  # the work a memo saves: far longer than answering from memory


def judge(backend, problem, source: str, timing: dict | None = None, seeds=(101, 102)):
    return backend.judge(
        problem, source, [problem.size("tiny")], check_seeds=list(seeds), timing=timing
    )


def fill(source: str, **values) -> str:
    for name, value in values.items():
        source = source.replace(name, str(value))
    return source


def test_the_valid_template_passes(backend, softmax):
    result = judge(backend, softmax, attacks.VALID, TIMING)
    assert result.passed, result.message
    assert len(result.timings[0].samples_ms) == TIMING["reps"]


# --- forged verdicts and patched judges
def test_forged_reply_lines_are_not_verdicts(backend, softmax):
    """Lines written to every descriptor reach the judge at most as a reply, which is data: here
    one that claims no outputs. No forged verdict or timing survives."""
    result = judge(backend, softmax, attacks.FORGED_REPLY_LINES, TIMING)
    assert (result.passed, result.timings) == (False, [])
    assert result.reason in ("constant_output", "bad_output_type"), result.message


def test_a_patched_interpreter_reaches_neither_the_judge_nor_the_next_candidate(backend, softmax):
    assert judge(backend, softmax, attacks.PATCHES_THE_INTERPRETER).passed
    zeros = attacks.candidate("return torch.zeros_like(launch(x))")
    assert judge(backend, softmax, zeros).reason == "constant_output"
    mutates = attacks.candidate("x.mul_(2.0)\nreturn launch(x / 2.0)")
    assert judge(backend, softmax, mutates).reason in ("mutates_input", "torch_compute")


def test_malformed_replies_reject_the_candidate_not_the_judge(backend, softmax):
    result = judge(backend, softmax, attacks.MALFORMED_REPLIES)
    assert result.reason in ("protocol_violation", "bad_output_type"), result.message
    assert judge(backend, softmax, attacks.VALID).passed
    assert backend.judge_client.starts == 1  # the judge itself never died


def test_outputs_are_read_only_from_the_exchange_folder(backend, softmax):
    result = judge(backend, softmax, attacks.PATCHES_THE_RUNNER_CHECK)
    assert result.reason == "protocol_violation", result.message


def test_an_output_that_is_a_link_is_not_followed(backend, softmax, tmp_path):
    """A link in the exchange folder could make the judge read any file of its machine."""
    params = softmax.size("tiny").params
    target = tmp_path / "judge_side_file"
    target.write_bytes(b"\0" * 4 * params["batch"] * params["dim"])  # the output's exact size
    result = judge(backend, softmax, fill(attacks.LINKS_ITS_OUTPUT, TARGET=target))
    assert result.reason == "protocol_violation", result.message
    assert "cannot be opened as a plain file" in result.message


# --- the operating-system sandbox
@sandboxed
@pytest.mark.parametrize(
    "attack", ["SPAWNS_A_SHELL", "FORKS", "BUILDS_NATIVE_CODE", "WRITES_INTO_THE_ENGINE"]
)
def test_no_process_program_native_build_or_outside_file(backend, softmax, tmp_path, attack):
    marker = tmp_path / "marker"
    source = fill(getattr(attacks, attack), MARKER=marker, ENGINE_DIR=ENGINE_DIR)
    result = judge(backend, softmax, source)
    assert not marker.exists()
    assert not (ENGINE_DIR / "pwned.py").exists()
    assert not result.passed, "the attack's call should fail inside the sandbox"


@sandboxed
def test_a_candidate_cannot_signal_the_engine(backend, softmax):
    result = judge(backend, softmax, fill(attacks.SIGNALS_THE_ENGINE, ENGINE_PID=os.getpid()))
    assert result.reason in (None, "crash"), result.message  # at worst it ends its own sandbox
    assert judge(backend, softmax, attacks.VALID).passed  # this process and the judge live on


@sandboxed
def test_a_runner_cannot_reach_the_template_it_was_forked_from(backend, softmax):
    result = judge(backend, softmax, attacks.REACHES_FOR_THE_TEMPLATE)
    assert result.passed, result.message
    assert judge(backend, softmax, attacks.VALID).passed


def test_nothing_a_candidate_leaves_behind_reaches_the_next(backend, softmax):
    assert judge(backend, softmax, attacks.LEAVES_NOTES).passed
    result = judge(backend, softmax, attacks.READS_NOTES)
    assert result.passed, result.message


@sandboxed
def test_no_socket_reaches_a_listener(backend, softmax, tmp_path):
    tcp = socket.create_server(("127.0.0.1", 0))
    unix_path = str(tmp_path / "listener.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    abstract_name = f"kb-test-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + abstract_name)
    listeners = (tcp, unix, abstract)
    accepted = []
    for listener in listeners:
        listener.listen()
        listener.settimeout(0.2)

    def accept_all(stop):
        while not stop.is_set():
            for listener in listeners:
                try:
                    accepted.append(listener.accept())
                except OSError:
                    pass

    stop = threading.Event()
    watcher = threading.Thread(target=accept_all, args=(stop,))
    watcher.start()
    try:
        source = fill(
            attacks.CONNECTS_OUT,
            PORT=tcp.getsockname()[1],
            UNIX_PATH=unix_path,
            ABSTRACT=abstract_name,
        )
        result = judge(backend, softmax, source)
    finally:
        stop.set()
        watcher.join()
        for listener in listeners:
            listener.close()
    assert accepted == []
    assert result.passed, result.message  # it swallowed its failures: nothing else to reject


# --- the work happens in Triton
@pytest.mark.parametrize(
    "attack, words",
    [
        ("TORCH_MATH", "torch `"),
        ("ATEN_SOFTMAX", "torch `_softmax`"),
        ("SPECIAL_SOFTMAX", "torch `_softmax`"),
        ("SOFTMAX_IN_A_THREAD", "started a thread"),
        ("POPS_THE_MODES", "mode"),
        ("READS_DATA_INTO_PYTHON", "torch `"),
    ],
)
def test_work_outside_triton_is_rejected(backend, softmax, attack, words):
    result = judge(backend, softmax, getattr(attacks, attack))
    assert result.reason in ("torch_compute", "calls_replaced_operator"), result.message
    assert words in result.message


def test_an_allowed_torch_op_passes_and_others_still_fail(backend, softmax):
    hybrid = attacks.candidate("launch(x)\nreturn torch.softmax(x, 1)")
    request = {"check_seeds": [1, 2], "allowed_torch_ops": ["softmax"]}
    assert backend.judge(softmax, hybrid, [softmax.size("tiny")], **request).passed
    assert not backend.judge(softmax, attacks.TORCH_MATH, [softmax.size("tiny")], **request).passed


# --- no native code
@pytest.fixture(scope="module")
def native_library(tmp_path_factory) -> str:
    """The attacks' C softmax built here (a cpu runner can start no compiler), in base64."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the attack's library")
    folder = tmp_path_factory.mktemp("native")
    (folder / "softmax.c").write_text(attacks.NATIVE_SOFTMAX_C)
    include = sysconfig.get_paths()["include"]
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", f"-I{include}", str(folder / "softmax.c"),
                    "-o", str(folder / "softmax.so"), "-lm"], check=True)  # fmt: skip
    return base64.b64encode((folder / "softmax.so").read_bytes()).decode()


@pytest.mark.parametrize("loader", sorted(attacks.NATIVE_LOADERS))
def test_native_code_doing_the_work_is_rejected(backend, softmax, native_library, loader):
    """A library the candidate wrote, loaded through ctypes (imported, or reached through torch)
    or through Triton's loader, computes the softmax: right, and not a Triton kernel."""
    attack = fill(attacks.LOADS_NATIVE_CODE[loader], SO_B64=native_library)
    result = judge(backend, softmax, attack)
    assert result.reason == "native_code", result.message


def test_tritons_build_helpers_are_refused(backend, softmax):
    attack = fill(attacks.BUILDS_WITH_TRITONS_HELPER, NATIVE_C=repr(attacks.NATIVE_SOFTMAX_C))
    result = judge(backend, softmax, attack)
    assert result.reason == "native_code", result.message
    assert "triton.runtime.build.compile_module_from_src" in result.message


def test_a_refusal_the_candidate_caught_still_rejects_it(backend, softmax):
    result = judge(backend, softmax, attacks.TRIES_NATIVE_CODE_QUIETLY)
    assert result.reason == "native_code", result.message
    assert "ctypes.dlopen" in result.message


# --- timing the candidate cannot flatter
def test_figures_the_judges_clock_does_not_see_are_tampering(backend, softmax):
    result = judge(backend, softmax, fill(attacks.FORGES_ITS_FIGURES, SLEEP_S=SLEEP_S), TIMING)
    assert result.reason == "timing_tampered", result.message
    assert "judge's clock" in result.message


def test_work_deferred_to_the_fetch_is_tampering(backend, softmax):
    result = judge(backend, softmax, fill(attacks.DEFERS_ITS_WORK, SLEEP_S=SLEEP_S), TIMING)
    assert result.reason == "timing_tampered", result.message
    assert "handing over" in result.message


def test_work_deferred_to_the_fetch_is_tampering_where_a_hiccup_would_pass(backend, softmax):
    """With 8 verified fetches one slow fetch is tolerated; deferring every call's work still
    shows on the others."""
    attack = fill(attacks.DEFERS_ITS_WORK, SLEEP_S=SLEEP_S)
    result = judge(backend, softmax, attack, {**TIMING, "reps": 32})
    assert result.reason == "timing_tampered", result.message
    assert "handing over" in result.message


@pytest.mark.parametrize("seed", [24, 26, 28])
def test_a_size_timed_again_verifies_every_call(backend, softmax, seed):
    """Skipping every second call's work escapes 2 verified fetches 21% of the time. At these
    timing seeds the first timing fetches a skipped call; a second timing that fetched 2 calls
    again would miss them all, one that fetches every call cannot."""
    attack = fill(attacks.DEFERS_EVERY_SECOND_CALL, SLEEP_S=SLEEP_S)
    result = judge(backend, softmax, attack, {**TIMING, "seed": seed})
    assert result.reason == "timing_tampered", result.message
    assert "handing over" in result.message


def test_a_first_fetchs_cost_and_one_hiccup_are_not_tampering(backend, softmax):
    """The first fetch (untimed) pays one-time costs; one slow fetch of 8 verified (32 timed
    calls) moves no median; of 2 verified (8 timed calls), the size is timed again, every call
    verified."""
    slow = fill(attacks.SLOW_FIRST_FETCHES, SLEEP_S=SLEEP_S)
    assert judge(backend, softmax, slow, {**TIMING, "reps": 32}).passed
    result = judge(backend, softmax, slow, TIMING)
    assert result.passed, result.message


def test_work_deferred_until_a_fetch_shows_it_is_timed_as_slow_as_it_is(backend, softmax):
    attack = fill(attacks.DEFERS_UNTIL_A_FETCH_SHOWS_IT, SLEEP_S=SLEEP_S)
    result = judge(backend, softmax, attack, TIMING)
    assert result.passed, result.message  # honest from then on: only the second timing counts
    [timing] = result.timings
    assert len(timing.samples_ms) == TIMING["reps"]
    assert min(timing.samples_ms) >= 1000 * float(SLEEP_S)


@pytest.mark.parametrize("seed", [5, 48])
def test_a_timing_stops_early_only_after_verified_fetches_that_were_not_slow(backend, softmax,
                                                                             seed):  # fmt: skip
    """A timing may stop once its speedup is pinned down (engine.timing.sequential), but only
    after two verified fetches, and not while one was slow beyond what the verified ones so far
    tolerate. A candidate deferring its work until a fetch shows it would otherwise stop at 8
    repetitions, most of them deferred (at seed 5 none of the first 8 is verified; at seed 48
    the 7th and 8th are, and 32 repetitions tolerate one slow fetch of 8), and be rejected for
    the median they make; it is timed as slow as it is."""
    attack = fill(attacks.DEFERS_UNTIL_A_FETCH_SHOWS_IT, SLEEP_S=SLEEP_S)
    timing = {**TIMING, "seed": seed, "reps": 32, "precision": 1e9}
    result = judge(backend, softmax, attack, timing)
    assert result.passed, result.message
    [timing] = result.timings
    assert statistics.median(timing.samples_ms) >= 1000 * float(SLEEP_S)


def test_memoising_by_address_gains_nothing(backend, softmax):
    timing = {**TIMING, "reps": 12}
    result = judge(backend, softmax, attacks.MEMOISES_BY_ADDRESS, timing)
    assert result.reason == "stale_output", result.message
    assert "timed call" in result.message


@pytest.mark.parametrize("key", sorted(attacks.IDENTITY_KEYS))
def test_no_timed_call_is_answered_from_a_memo_of_the_inputs_identity(backend, softmax, key):
    """The warm-up's inputs are never timed, and each rotation's are new contents at new
    addresses: a cache keyed on the input's address, storage or object and its version counter
    answers no timed call (it answered those the warm-up covered)."""
    attack = fill(attacks.MEMOISES_BY_IDENTITY, KEY=attacks.IDENTITY_KEYS[key],
                  SLEEP_S=MEMO_SLEEP_S)  # fmt: skip
    result = judge(backend, softmax, attack, {**TIMING, "reps": 4})
    assert result.passed, result.message
    assert min(result.timings[0].samples_ms) >= 1000 * float(MEMO_SLEEP_S)


def test_outputs_computed_outside_the_timed_calls_are_tampering(backend, softmax):
    """Outputs computed while the runner holds the inputs untimed (the warm-up, a change of
    inputs) answer every timed call; calls whose inputs change inside the bracket cannot be."""
    attack = fill(attacks.PRECOMPUTES_OUTSIDE_TIMED_CALLS, SLEEP_S=MEMO_SLEEP_S)
    result = judge(backend, softmax, attack, {**TIMING, "reps": 4})
    assert result.reason == "timing_tampered", result.message
    assert "first saw inside the timed call" in result.message


# --- no leaks
def test_no_environment_reaches_a_rejection(backend, softmax, monkeypatch):
    canary = f"sk-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    monkeypatch.setenv("KB_PLAIN_SETTING", canary)  # not even variables that look harmless
    local = LocalBackend("cpu")  # a judge started with the canary in the engine's environment
    try:
        result = judge(local, softmax, attacks.RAISES_THE_ENVIRONMENT)
    finally:
        local.close()
    assert result.reason == "launch_error"
    assert canary not in result.message


@sandboxed
def test_no_file_outside_the_candidate_reaches_a_rejection(backend, softmax, tmp_path):
    canary = f"canary-{uuid.uuid4().hex}"
    secret = tmp_path / ".env"
    secret.write_text(f"OPENAI_API_KEY={canary}\n")
    source = fill(attacks.RAISES_SECRET_FILES, SECRET_FILE=secret, ENGINE_DIR=ENGINE_DIR)
    result = judge(backend, softmax, source)
    assert result.reason == "launch_error"
    assert canary not in result.message
    assert "FileNotFoundError" in result.message


@sandboxed
def test_a_link_in_the_kept_triton_cache_reaches_no_host_file(backend, softmax, tmp_path):
    canary = f"canary-{uuid.uuid4().hex}"
    secret = tmp_path / "secret.txt"
    secret.write_text(canary)
    source = fill(attacks.PLANTS_A_LINK_IN_ITS_CACHE, SECRET_FILE=secret)
    first, second = judge(backend, softmax, source), judge(backend, softmax, source)
    assert first.passed, first.message
    assert second.passed and canary not in second.message, second.message


def test_messages_are_bounded_and_printable(backend, softmax):
    result = judge(backend, softmax, attacks.FLOODS_THE_MESSAGE)
    assert result.reason == "launch_error"
    assert len(result.message) <= MESSAGE_LIMIT + 200
    assert not any(c in result.message for c in "\x1b\x07\u202e")
