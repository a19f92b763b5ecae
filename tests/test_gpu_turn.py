"""An evaluation takes the GPU's turn (engine.backends.local.gpu_turn) once its runner has started:
the runner's start overlaps other searches' work on the GPU, the candidate's code does not, and
the wait for the turn counts in no activity of the ledger."""

import glob
import tempfile
import threading
import time
import uuid

import pytest

from engine.backends.local import LocalBackend
from engine.problems import load_problem
from engine.worker.sandbox import EXCHANGE_PARENT
from tests.adversarial import softmax as attacks
from tests.processes import command_line, descendants


class NotedLock:
    """A lock that notes when it is first asked for."""

    def __init__(self):
        self.lock, self.asked = threading.Lock(), threading.Event()

    def __enter__(self):
        self.asked.set()
        self.lock.acquire()

    def __exit__(self, *exc):
        self.lock.release()


def test_an_evaluation_waits_for_the_gpu_only_once_its_runner_has_started():
    backend = LocalBackend("cpu")
    softmax = load_problem("softmax")
    marker = f"imported-{uuid.uuid4().hex}"  # the candidate leaves it when its module runs
    source = attacks.candidate("return launch(x)", prelude=f"""
        import os
        open(os.path.join(os.environ["KB_EXCHANGE"], "{marker}"), "w").close()
    """)  # fmt: skip
    left = f"{EXCHANGE_PARENT or tempfile.gettempdir()}/kb-runner-*/**/{marker}"
    request = backend.judge_request(softmax, source, [softmax.smallest], check_seeds=[1, 2])
    turn, outcome = NotedLock(), {}
    try:
        with turn.lock:  # another search's work on the GPU
            began = time.monotonic()
            judging = threading.Thread(
                target=lambda: outcome.update(backend.judge_client.run(request, turn=turn))
            )
            judging.start()
            assert turn.asked.wait(180), "the judge never asked for the GPU"
            family = [command_line(p) for p in descendants(backend.judge_client.proc.pid)]
            runners = [c for c in family if "kbrunner" in c and "bwrap" not in c.split()[0]]
            assert len(runners) == 2, family  # the template, and the runner forked from it
            time.sleep(1.0)
            assert judging.is_alive()
            assert not glob.glob(left, recursive=True)  # none of the candidate's code has run
        judging.join(180)
        assert glob.glob(left, recursive=True)  # it ran once the turn was the evaluation's
    finally:
        backend.close()
    assert outcome["passed"], outcome
    assert sum(outcome["gpu_seconds"].values()) < time.monotonic() - began - 1.0


class Interrupted(Exception):
    pass


class InterruptingTurn:
    """The wait for the GPU ends by an exception, as a Ctrl-C or a test's timeout ends it."""

    def __enter__(self):
        raise Interrupted

    def __exit__(self, *exc):
        pass


def test_a_request_interrupted_mid_protocol_leaves_the_client_usable():
    backend = LocalBackend("cpu")
    softmax = load_problem("softmax")
    source = attacks.candidate("return launch(x)")
    request = backend.judge_request(softmax, source, [softmax.smallest], check_seeds=[1])
    try:
        with pytest.raises(Interrupted):
            backend.judge_client.run(request, turn=InterruptingTurn())
        assert backend.judge_client.run(request)["passed"]  # was: "the engine stopped before..."
    finally:
        backend.close()
