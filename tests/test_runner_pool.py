"""Runners that live across evaluations (engine.worker.runner_pool), through the real judge and
sandboxed runners: the project's candidates share one runner, other code never shares its
runner with other code, and a runner that a candidate crashed or whose process-wide state it
changed is replaced before the next candidate, whose verdict it does not touch."""

from dataclasses import replace

from engine.backends.devices import Slot
from engine.backends.local import runner_owner
from engine.compose import create_session, resume_session
from engine.session.settings import SessionSettings
from engine.session_files import SessionPaths
from engine.worker.protocol import SHARED
from tests.adversarial import softmax as attacks

# Fails every call with the runner's process id in its message (a launch_error, after which a
# runner is lent again): how a test sees which runner served an evaluation. NAME tells sources
# apart.
SHOWS_ITS_RUNNER = attacks.candidate("""
    import os
    raise RuntimeError(f"NAME ran in runner {os.getpid()} ;")
""")
# Leaves torch.nn.Module.__call__ wrapped so that every other model's output is zeroed: a valid
# candidate evaluated after it in the same runner would be rejected.
POISONS_THE_NEXT = attacks.candidate(
    "return launch(x)",
    prelude="""
    _call = torch.nn.Module.__call__

    def _zeroing(self, *args, **kwargs):
        out = _call(self, *args, **kwargs)
        return out if type(self).__name__ == "ModelNew" and _mine(self) else out * 0

    def _mine(model):
        return type(model).forward.__code__.co_filename == __file__

    torch.nn.Module.__call__ = _zeroing
""",
)
# Turns TF32 on for every later matmul of the process.
SETS_TF32 = attacks.candidate(
    "return launch(x)", prelude="torch.backends.cuda.matmul.allow_tf32 = True\n"
)
CRASHES = attacks.candidate("""
    import os
    os.abort()
""")
TIMING = {"seed": 5, "recheck_seed": 6, "warmup": 1, "reps": 4, "input_sets": 1,
          "interleave": True}  # fmt: skip


def judge(backend, problem, source: str, owner: str, timing: dict | None = TIMING):
    return backend.judge(problem, source, [problem.size("tiny")], check_seeds=[101],
                         timing=timing, runner=owner)  # fmt: skip


def runner_of(backend, problem, owner: str, name: str, timing: dict | None = TIMING) -> int:
    result = judge(backend, problem, SHOWS_ITS_RUNNER.replace("NAME", name), owner, timing)
    assert result.reason == "launch_error", result.message
    return int(result.message.split(f"{name} ran in runner ")[1].split()[0])


def test_the_projects_candidates_share_one_runner(backend, softmax):
    first = runner_of(backend, softmax, SHARED, "first")
    assert judge(backend, softmax, attacks.VALID, SHARED).passed
    assert runner_of(backend, softmax, SHARED, "second") == first


def test_other_code_shares_a_runner_only_with_its_own_evaluations(backend, softmax):
    mine = runner_of(backend, softmax, "candidate-a", "a")
    assert runner_of(backend, softmax, "candidate-a", "a") == mine
    assert runner_of(backend, softmax, "candidate-b", "b") != mine
    assert runner_of(backend, softmax, "candidate-a", "a") != mine  # b's runner ended a's


def test_a_runner_changed_by_a_candidate_is_replaced_and_the_next_verdict_holds(backend, softmax):
    before = runner_of(backend, softmax, SHARED, "before")
    poisoner = judge(backend, softmax, POISONS_THE_NEXT, SHARED)
    assert (poisoner.passed, poisoner.reason) == (False, "runner_tampered"), poisoner.message
    assert "Module.__call__" in poisoner.message
    after = judge(backend, softmax, attacks.VALID, SHARED)
    assert after.passed, after.message  # in the poisoned runner: rejected (torch_compute)
    assert runner_of(backend, softmax, SHARED, "after") != before


def test_a_changed_torch_setting_is_named(backend, softmax):
    result = judge(backend, softmax, SETS_TF32, SHARED)
    assert result.reason == "runner_tampered"
    assert "torch.backends.cuda.matmul.allow_tf32" in result.message


def test_a_runner_a_candidate_crashed_is_replaced(backend, softmax):
    before = runner_of(backend, softmax, SHARED, "before")
    crashed = judge(backend, softmax, CRASHES, SHARED)
    assert crashed.reason == "crash", crashed.message
    assert judge(backend, softmax, attacks.VALID, SHARED).passed
    assert runner_of(backend, softmax, SHARED, "after") != before


def test_a_check_request_leaves_a_runner_that_timing_cannot_use(backend, softmax):
    """A runner's calibration is measured before any candidate is in it: a runner that served
    only checks has none, so a timed request of its owner gets a fresh one."""
    checked = runner_of(backend, softmax, "candidate-c", "c", timing=None)
    timed = runner_of(backend, softmax, "candidate-c", "c")
    assert timed != checked
    assert runner_of(backend, softmax, "candidate-c", "c", timing=None) == timed


def test_only_the_candidates_of_an_offline_search_share_a_runner(tmp_path):
    """The search marks its jobs: an offline session's candidates are the hint library's code,
    which shares a runner; an LLM session's share only with their own evaluations."""
    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("softmax", "sim", seed=1, limits={"evaluations": 2}))
    engine = resume_session(paths)
    engine.run()
    engine.store.close()
    search = engine.search
    c = search.population[0]
    offline = Slot(c.id, 0, job=search.job_spec(c, 0)).eval_job(c.source)
    search.settings = replace(search.settings, generator="llm")
    llm = Slot(c.id, 0, job=search.job_spec(c, 0)).eval_job(c.source)
    assert runner_owner(offline) == SHARED
    assert runner_owner(llm) == c.sha256 != SHARED
