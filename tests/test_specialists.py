"""Per-shape specialists: results kept per shape, shape leaders that climb, and the composite of
the per-shape winners, on real records, real DuckDB sessions, the sim backend and, for the
composite's kernels, the cpu backend (the Triton interpreter)."""

import importlib.util
import json
from pathlib import Path

import duckdb
import pytest
import torch
from cli import kernelbrain

from engine.backends.local import LocalBackend
from engine.compose import create_session, resume_session
from engine.gate.static import static_check
from engine.generate.composite import Member, Route, composite_source, input_key, routed_members
from engine.problems import load_problem
from engine.records import Candidate, RungResult
from engine.search import scheduler
from engine.search.scheduler import RungIndex
from engine.session.settings import SessionSettings
from engine.session.store import Store
from engine.session_files import SessionPaths, read_events
from tests.test_sessions_sim import kb, show, stable

CANDIDATES = Path(__file__).parent / "candidates"


def source(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


def record(seq, speedup, shapes, status="alive"):
    """A candidate measured at rung 0 with a geometric mean `speedup` and per-shape speedups."""
    c = Candidate(f"c{seq:04d}", seq, str(seq), None, "s", {}, "", "", 0, status=status)
    per_shape = {label: [s, s * 0.99, s * 1.01] for label, s in shapes.items()}
    c.results[0] = RungResult(speedup, speedup, speedup * 0.99, speedup * 1.01, 0.01, 5, per_shape)
    return c


# -- the scheduler -----------------------------------------------------------------------------


def test_a_shape_leader_outside_the_quota_climbs_and_is_not_pruned():
    """Six candidates: the quota (6 // 3 = 2) holds the two best geometric means; c0006 is
    confidently below the cutoff by geomean, but the fastest at `big`: it may climb, and is not
    pruned while it leads."""
    pop = [
        record(i, 3.0 - 0.1 * i, {"small": 3.0 - 0.1 * i, "big": 3.0 - 0.1 * i})
        for i in range(1, 6)
    ]
    specialist = record(6, 1.5, {"small": 0.5, "big": 4.5})
    index = RungIndex([*pop, specialist])
    assert index.leaders[0] == {"small": pop[0], "big": specialist}
    assert [c.id for c in scheduler.promotable(index, 0)] == ["c0001", "c0002", "c0006"]
    assert specialist not in scheduler.prunable(index, 0)
    assert "leads at big" in scheduler.specialty(index, specialist, 0)
    assert scheduler.specialty(index, pop[0], 0) == ""  # the quota holds it
    # The same candidate without its shape lead dies by geomean, as before.
    plain = record(6, 1.5, {"small": 0.5, "big": 0.5})
    index = RungIndex([*pop, plain])
    assert plain not in scheduler.promotable(index, 0) and plain in scheduler.prunable(index, 0)


def test_leaders_tie_to_the_older_and_one_shape_has_no_specialists():
    a, b = record(1, 2.0, {"x": 2.0, "y": 1.0}), record(2, 2.0, {"x": 2.0, "y": 3.0})
    index = RungIndex([b, a])
    assert index.leaders[0] == {"x": a, "y": b}
    index.remove(a)
    assert index.leaders[0] == {"x": b, "y": b}
    single = [record(i, 1.0 + i, {"only": 1.0 + i}) for i in range(1, 7)]
    assert scheduler.specialists(RungIndex(single), 0) == []


# -- the composite's source ----------------------------------------------------------------------


def softmax_composite(problem, tiny_member=1):
    """softmax_valid (the default) and softmax_online; `tiny` goes to `tiny_member`, the full
    sizes to the default."""
    members = [Member("c0001", source("softmax_valid")), Member("c0002", source("softmax_online"))]
    routes = [
        Route(
            s.label, input_key(problem.input_specs[s.label]), tiny_member if s.tier == "tiny" else 0
        )
        for s in problem.sizes
    ]
    return composite_source(members, routes)


def load_module(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


@pytest.fixture(scope="module")
def cpu():
    backend = LocalBackend("cpu")
    yield backend
    backend.close()


def test_members_names_are_renamed_apart_and_the_static_gate_passes(softmax):
    text = softmax_composite(softmax)
    assert static_check(softmax, text) is None
    assert "def softmax_kernel_kb0(" in text and "def softmax_online_kernel_kb1(" in text
    assert "class ModelNew(ModelNew_kb0):" in text
    for banned in ("exec(", "eval(", "importlib", "__import__"):
        assert banned not in text
    default, winners = routed_members(text)
    assert winners["tiny"] != default and winners["full0"] == default


def test_renaming_keeps_locals_that_share_a_global_name():
    """A kernel parameter named like a module constant stays the parameter; the constant and
    every use of it at module level are renamed."""
    member = (
        source("softmax_valid")
        .replace("@triton.jit", "BLOCK = 128\nrow = 0\n\n\n@triton.jit", 1)
        .replace("return y", "return y * (BLOCK // BLOCK)")
    )
    text = composite_source([Member("a", member), Member("b", source("softmax_online"))], [])
    assert "BLOCK_kb0 = 128" in text and "row_kb0 = 0" in text
    kernel = text.split("def softmax_kernel_kb0(")[1].split("class ")[0]
    assert "BLOCK: tl.constexpr" in kernel and "BLOCK_kb0" not in kernel
    assert "row = tl.program_id(0)" in kernel  # a local that shares a global's name
    assert "y * (BLOCK_kb0 // BLOCK_kb0)" in text  # forward reads the module's constant


def test_the_composite_dispatches_exact_then_nearest_then_default(softmax, tmp_path):
    path = tmp_path / "composite_softmax.py"
    path.write_text(softmax_composite(softmax))
    module = load_module(path)
    for size in softmax.sizes:  # exact shapes: the table
        key = input_key(softmax.input_specs[size.label])
        assert module.composite_member(key) == (1 if size.tier == "tiny" else 0)
    assert module.composite_member(((2, 100),)) == 1  # nearest: tiny (4x300)
    assert module.composite_member(((8, 8192),)) == 0  # nearest: full2 (16x16384)
    assert module.composite_member(((2, 3, 4),)) == 0  # no known shape of its rank: default
    model = module.ModelNew()
    calls = []
    other = model.composite_members[0]
    original = other.forward
    other.forward = lambda x: calls.append(tuple(x.shape)) or original(x)
    for shape in [(4, 300), (8, 8192)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(model(x), torch.softmax(x, dim=1))
    assert calls == [(4, 300)]  # only the tiny shape went to member 1


def test_the_composite_passes_the_gate_on_the_cpu_backend(cpu, softmax):
    for tiny_member in (0, 1):  # the tiny size served by the default, then by the other member
        result = cpu.check(softmax, softmax_composite(softmax, tiny_member))
        assert result.passed, (result.reason, result.message)


def test_every_member_gets_models_weights(cpu, tmp_path):
    """linear_relu_div has weights: the composite's state_dict is the default member's, so the
    judge loads Model's weights into it, and the member that serves the tiny size gets the same
    weights; it passes only if it does."""
    problem = load_problem("linear_relu_div")
    base = source("linear_relu_div_valid")
    other = base.replace("BM=16, BN=32, BK=32", "BM=32, BN=16, BK=16")
    other = other.replace("cdiv(m, 16), triton.cdiv(n, 32)", "cdiv(m, 32), triton.cdiv(n, 16)")
    assert other != base
    routes = [
        Route(s.label, input_key(problem.input_specs[s.label]), int(s.tier == "tiny"))
        for s in problem.sizes
    ]
    text = composite_source([Member("c0001", base), Member("c0002", other)], routes)
    result = cpu.check(problem, text)
    assert result.passed, (result.reason, result.message)
    path = tmp_path / "composite_linear.py"
    path.write_text(text)
    model = load_module(path).ModelNew(48, 40)
    reference = torch.nn.Linear(48, 40)
    model.load_state_dict({f"linear.{k}": v for k, v in reference.state_dict().items()})
    member = model.composite_members[0]
    assert torch.equal(member.linear.weight, reference.weight)
    assert set(model.state_dict()) == {"linear.weight", "linear.bias"}
    model.to(torch.float64)  # .to, .cuda and .eval reach every member
    assert member.linear.weight.dtype == torch.float64


# -- the search, on sim ----------------------------------------------------------------------------


def run_session(paths: SessionPaths, problem: str, seed: int, evals: int):
    create_session(paths, SessionSettings(problem, "sim", seed=seed, limits={"evaluations": evals}))
    engine = resume_session(paths)
    engine.run()
    engine.store.close()
    return engine


# Its shapes' winners differ enough on sim that a composite pays for its dispatch (the offline
# groupconv stream, which once did, now has one kind of kernel win everywhere).
COMPOSED = "matvec"


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """A search on sim whose per-shape winners differ at the top rung, so that its end composes
    them, and the composite measures best (the first seed that does)."""
    root = tmp_path_factory.mktemp("sessions")
    for seed in range(1, 16):
        paths = SessionPaths(root / f"g{seed}")
        engine = run_session(paths, COMPOSED, seed, 100)
        best = engine.search.best()
        if best.origin == "composite":
            return root, paths, engine.search, seed
    pytest.fail("no seed gave a composite that measures best")


def test_a_specialist_climbs_in_a_search(composed):
    _, paths, _, _ = composed
    climbs = [e for e in read_events(paths) if "a specialist: leads at" in e["message"]]
    assert climbs and all(e["kind"] == "promoted" for e in climbs)


def test_the_composite_is_gated_timed_and_censused_as_the_answer(composed):
    _, paths, search, _ = composed
    [composite] = [c for c in search.population if c.origin == "composite"]
    rung = composite.params["rung"]
    assert rung == search.top_rung and composite.status == "done"
    winners = {label: c.id for label, c in search.index.leaders[rung].items()}
    assert composite.params["winners"] == winners and len(set(winners.values())) > 1
    assert set(composite.results) == {rung}  # timed at its members' rung, nowhere else
    assert search.ledger.evaluations == 100  # charged like the census: not a budget evaluation
    kinds = [(e["kind"], e["candidate"]) for e in read_events(paths)][-4:]
    assert kinds == [
        ("generated", composite.id),
        ("evaluated", composite.id),
        ("census", composite.id),
        ("finished", None),
    ]


def test_show_json_gives_the_per_shape_winners(composed):
    root, paths, search, _ = composed
    data = show(paths.name, root)
    winners = data["shape_winners"]
    assert winners["rung"] == search.top_rung
    assert list(winners["sizes"]) == ["full0", "full1", "full2"]
    top = [c for c in search.population if search.top_rung in c.results]
    for label, w in winners["sizes"].items():
        assert w["speedup_ci"][0] <= w["speedup"] <= w["speedup_ci"][1]
        fastest = max(
            (c for c in top if c.origin != "composite"),
            key=lambda c: c.results[search.top_rung].shapes[label][0],
        )
        assert (w["id"], w["speedup"]) == (fastest.id, fastest.results[2].shapes[label][0])
    assert data["best"]["id"] == next(c.id for c in search.population if c.origin == "composite")
    text = kb("show", paths.name, sessions=root).stdout
    assert f"per-size winners at rung {search.top_rung}:" in text


def test_export_writes_the_composite(composed, softmax):
    root, paths, search, _ = composed
    out = root / "answer.py"
    kb("export", paths.name, "-o", str(out), sessions=root)
    text = out.read_text()
    best = search.best()
    assert f"candidate {best.id} for problem {COMPOSED}" in text and best.source in text
    assert "COMPOSITE_ROUTES = {" in text and "class ModelNew(ModelNew_kb0):" in text
    compile(text, str(out), "exec")


def test_resume_is_exact_around_the_composite(composed, tmp_path):
    """Stopped after each of the last steps (a kill after a commit: a step commits at once or
    not at all) and resumed, the search ends exactly as the uninterrupted one did."""
    root, straight, search, seed = composed
    total = search.schedule.step
    for stop_at in (total - 2, total - 1):  # the composite planned, then evaluated
        paths = SessionPaths(tmp_path / f"k{stop_at}")
        create_session(
            paths, SessionSettings(COMPOSED, "sim", seed=seed, limits={"evaluations": 100})
        )
        partial = resume_session(paths)
        partial.start()
        while partial.search.schedule.step < stop_at and partial.step():
            pass
        partial.lock.release()
        partial.store.close()
        assert kernelbrain("resume", paths.name, "--headless", "--sessions-dir", tmp_path
                           ).returncode == 0  # fmt: skip
        a, b = show(paths.name, tmp_path), show(straight.name, root)
        assert stable(a)["candidates"] == stable(b)["candidates"]
        assert stable(a)["shape_winners"] == stable(b)["shape_winners"]
        assert a["best"] == b["best"] and a["ledger"]["evaluations"] == 100


def test_a_session_stored_without_per_shape_results_gets_them_from_its_evaluations(tmp_path):
    paths = SessionPaths(tmp_path / "old")
    run_session(paths, "softmax", 0, 12)
    store = Store(paths.database, read_only=True)
    kept = {c.id: c.results for c in store.candidates()}
    store.close()
    db = duckdb.connect(str(paths.database))
    for cid, record_json in db.execute("SELECT id, record FROM candidates").fetchall():
        row = json.loads(record_json)
        for result in row["results"].values():
            del result["shapes"]  # as sessions were stored before
        db.execute("UPDATE candidates SET record = ? WHERE id = ?", [json.dumps(row), cid])
    db.close()
    store = Store(paths.database, read_only=True)
    assert {c.id: c.results for c in store.candidates()} == kept
    store.close()
    assert any(r.shapes for results in kept.values() for r in results.values())
