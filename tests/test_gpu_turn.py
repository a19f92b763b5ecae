"""An evaluation takes the GPU's turn (engine.backends.local.gpu_turn) once its runner has started:
the runner's start overlaps other searches' work on the GPU, the candidate's code does not, and
the wait for the turn counts in no activity of the ledger."""

import threading
import time

from engine.backends.local import LocalBackend
from engine.problems import load_problem
from tests.adversarial.softmax import VALID
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
    request = backend.judge_request(softmax, VALID, [softmax.smallest], check_seeds=[1, 2])
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
            assert judging.is_alive()  # nothing of the candidate's runs before its turn
        judging.join(180)
    finally:
        backend.close()
    assert outcome["passed"], outcome
    assert sum(outcome["gpu_seconds"].values()) < time.monotonic() - began - 1.0
