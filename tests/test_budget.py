import pytest

from engine.compose import create_session, resume_session
from engine.search.budget import BudgetError, Ledger, parse_budget, parse_budget_increase
from engine.session.settings import SessionSettings
from engine.session.store import Store
from engine.session_files import SessionPaths


def test_parse_each_kind_and_several_at_once():
    assert parse_budget(["30m", "2h"]) == {"wall_seconds": 7200}
    assert parse_budget(["600gpu-s,200evals", "$5"]) == {
        "gpu_seconds": 600,
        "evaluations": 200,
        "llm_usd": 5,
    }
    assert parse_budget(["90s"]) == {"wall_seconds": 90}


@pytest.mark.parametrize("bad", ["30x", "gpu", "-5m", "$", ""])
def test_bad_budget_says_what_is_accepted(bad):
    with pytest.raises(BudgetError, match="30m"):
        parse_budget([bad or "  ,x"])


def test_increase_needs_plus():
    assert parse_budget_increase("+10m") == ("wall_seconds", 600)
    with pytest.raises(BudgetError, match=r"\+"):
        parse_budget_increase("10m")


def test_ledger_stops_at_first_limit_spent():
    ledger = Ledger()
    limits = {"evaluations": 2, "gpu_seconds": 100}
    assert ledger.charge_evaluation(0, {"reference": 0.5, "time": 2.0}) == 2.5
    assert ledger.exhausted(limits) is None
    ledger.charge_evaluation(1, {"time": 3.0, "profile": 1.5})
    assert ledger.exhausted(limits) == "evaluations"
    assert ledger.gpu_seconds == 7.0
    assert ledger.gpu_seconds_by_rung == {"0": 2.5, "1": 4.5}
    assert ledger.share(4.5) == pytest.approx(4.5 / 7)
    assert ledger.left(limits)["gpu_seconds"] == 93


def test_compiling_counts_against_wall_time_not_gpu_seconds():
    """The GPU is not held while Triton compiles: compile seconds are CPU seconds; idle is the
    wall time that went to neither."""
    ledger = Ledger()
    assert ledger.charge_evaluation(0, {"compile": 4.0, "check": 1.0, "time": 2.0}) == 3.0
    assert ledger.gpu_seconds == 3.0 and ledger.cpu_seconds_by_activity == {"compile": 4.0}
    assert ledger.exhausted({"gpu_seconds": 3.5}) is None
    ledger.wall_seconds = 10.0
    assert ledger.idle_seconds == pytest.approx(3.0)
    assert ledger.exhausted({"gpu_seconds": 3.5, "wall_seconds": 10.0}) == "wall_seconds"


def test_a_ledger_stored_before_the_split_moves_its_compile_seconds_off_the_gpu():
    stored = {**Ledger().to_dict(), "gpu_seconds_by_activity": {"compile": 5.0, "time": 2.0}}
    del stored["cpu_seconds_by_activity"]
    ledger = Ledger.from_dict(stored)
    assert ledger.gpu_seconds == 2.0 and ledger.cpu_seconds_by_activity == {"compile": 5.0}


def test_a_ledger_stored_before_devices_were_counted_spent_everything_on_device_0():
    ledger = Ledger()
    ledger.charge_evaluation(0, {"check": 1.0, "time": 2.0})
    stored = ledger.to_dict()
    del stored["gpu_seconds_by_device"]
    assert Ledger.from_dict(stored).gpu_seconds_by_device == {"0": 3.0}


@pytest.mark.parametrize("nothing", ["0evals", "0m", "0.0h", "$0", "0gpu-s"])
def test_a_limit_of_nothing_is_refused(nothing):
    with pytest.raises(BudgetError, match="above zero"):
        parse_budget([nothing])
    with pytest.raises(BudgetError, match="above zero"):
        parse_budget_increase(f"+{nothing}")


def test_an_empty_budget_is_refused_not_unlimited():
    with pytest.raises(BudgetError, match="empty"):
        parse_budget([""])
    with pytest.raises(BudgetError, match="empty"):
        parse_budget([" , "])


def test_the_ledgers_gpu_seconds_and_evaluations_are_sums_over_the_stored_evaluations(tmp_path):
    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("matvec", "sim", seed=1, limits={"evaluations": 30}))
    engine = resume_session(paths)
    engine.run()
    engine.store.close()
    store = Store(paths.database, read_only=True)
    ledger = Ledger.from_dict(store.state()["ledger"])
    evaluations = [e for c in store.candidates() for e in store.evaluations(c.id)]
    # and the census of the answer, as the search ended (GPU time, not an evaluation)
    [answer] = [c for c in store.candidates() if c.census]
    store.close()
    by_rung, by_activity = {str(answer.rung): answer.census["gpu_seconds"]}, {}
    for e in evaluations:
        key = str(e["rung"])
        held = {a: s for a, s in e["gpu_seconds"].items() if a != "compile"}
        by_rung[key] = by_rung.get(key, 0.0) + sum(held.values())
        for activity, seconds in e["gpu_seconds"].items():
            by_activity[activity] = by_activity.get(activity, 0.0) + seconds
    assert ledger.evaluations == len(evaluations) == 30
    assert ledger.gpu_seconds_by_rung == pytest.approx(by_rung)
    by_activity["check"] += answer.census["gpu_seconds"]
    books = {**ledger.gpu_seconds_by_activity, **ledger.cpu_seconds_by_activity}
    assert {k: v for k, v in books.items() if v} == pytest.approx(
        {k: v for k, v in by_activity.items() if v}
    )
    assert by_activity["compile"] > 0 and "compile" not in ledger.gpu_seconds_by_activity
