"""The ladder watches itself: rung 0 against rung 1 over the pairs rung 1 decides, rung 0's
fidelity raised while they disagree (up to a flat search), and audit promotions from outside
rung 0's quota."""

from dataclasses import replace

from engine.backends.local import _shape_timing
from engine.compose import create_session, resume_session
from engine.generate.base import Proposal
from engine.jobs import EvalResult, RungSpec
from engine.search import fidelity
from engine.session.settings import SessionSettings
from engine.session.store import StepWrite
from engine.session_files import SessionPaths, read_events
from tests.test_sessions_sim import kb, run_args

BASE = RungSpec(0, ("a", "b"), warmup=1, reps=5, input_sets=1)
TOP = RungSpec(2, ("a", "b"), warmup=10, reps=100, input_sets=4)


def test_rung0_fidelity_doubles_its_repetitions_up_to_the_top_rungs():
    levels = [fidelity.rung0_spec(BASE, TOP, level) for level in range(6)]
    assert [s.reps for s in levels] == [5, 10, 20, 40, 80, 100]
    assert [s.input_sets for s in levels] == [1, 2, 3, 4, 4, 4]
    assert fidelity.max_level(BASE, TOP) == 5
    assert levels[-1] == replace(TOP, index=0)  # at the last level: a flat search
    assert all(s.index == 0 and s.size_labels == ("a", "b") for s in levels)


def measured(speedup: float, reps: int = 20) -> EvalResult:
    """A passed result at both shapes with a tight interval around `speedup`."""
    wobble = [1.0 + 0.001 * (i % 3) for i in range(reps)]
    timings = [_shape_timing(label, [w / speedup for w in wobble], wobble) for label in ("x", "y")]
    return EvalResult(True, timings=timings, gpu_seconds={"time": 0.1})


def test_a_proxy_that_ranks_backwards_raises_rung0_fidelity_and_the_state_keeps_it(tmp_path):
    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("softmax", "sim", seed=1, limits={"evaluations": 99}))
    engine = resume_session(paths)
    search, write = engine.search, StepWrite()
    sources = [f"# candidate {i}\nclass ModelNew: pass\n" for i in range(6)]
    search.admit(write, [Proposal(s, "test") for s in sources], None)
    candidates = [search.by_id[cid] for cid in search.schedule.queue]
    for i, c in enumerate(candidates):  # rung 0 ranks them 1..6, rung 1 the other way round
        search.record_result(write, c, 0, measured(1.0 + i))
    assert search.spec(0).reps == 5
    for i, c in enumerate(candidates):
        search.record_result(write, c, 1, measured(7.0 - i))
    # 15 pairs, all decided at rung 1 and all ranked backwards at rung 0: raised after 10
    [raised] = [e for e in write.events if e["kind"] == "fidelity"]
    assert "in only 0 of 10 pairs" in raised["message"]
    assert "rung 0 now times 10 repetitions over 2 input sets" in raised["message"]
    assert search.spec(0).reps == 10 and search.schedule.agreement == [0, 5]
    engine.commit(write)
    engine.lock.release()
    engine.store.close()
    again = resume_session(paths)
    assert again.search.spec(0).reps == 10 and again.search.schedule.rung0_level == 1
    assert again.snapshot()["rungs"][0]["reps"] == 10
    assert again.snapshot()["agreement"] == {
        "agreement": 0.0, "decided_pairs": 5, "rung0_level": 1,
    }  # fmt: skip
    again.lock.release()
    again.store.close()


def test_a_proxy_that_agrees_leaves_rung0_alone(tmp_path):
    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("softmax", "sim", seed=1, limits={"evaluations": 99}))
    engine = resume_session(paths)
    search, write = engine.search, StepWrite()
    search.admit(write, [Proposal(f"# {i}\nclass ModelNew: pass\n", "t") for i in range(6)], None)
    candidates = [search.by_id[cid] for cid in search.schedule.queue]
    for i, c in enumerate(candidates):
        search.record_result(write, c, 0, measured(1.0 + i))
        search.record_result(write, c, 1, measured(1.1 + i))
    assert search.schedule.agreement == [15, 15] and search.spec(0).reps == 5
    assert not [e for e in write.events if e["kind"] == "fidelity"]
    engine.lock.release()
    engine.store.close()


def test_every_sixth_promotion_out_of_rung0_is_an_audit_from_outside_the_quota(tmp_path):
    kb(*run_args("audits", 2, "150evals", problem="matvec"), sessions=tmp_path)
    events = read_events(SessionPaths(tmp_path / "audits"))
    out_of_rung0 = [e for e in events if e["kind"] == "promoted" and "to rung 1" in e["message"]]
    audits = [i for i, e in enumerate(out_of_rung0) if "(audit" in e["message"]]
    assert audits and all((i + 1) % fidelity.AUDIT_EVERY == 0 for i in audits)
    audited = {out_of_rung0[i]["candidate"] for i in audits}
    at_rung1 = {e["candidate"] for e in events if " at rung 1:" in e["message"]}
    assert audited <= at_rung1
