"""`kernelbrain bench`: for each problem a search, then eager, torch.compile and the best kernel
timed at every size against the problem's floor; for the ablation problems also the flat search
over the same candidate stream."""

from __future__ import annotations

import json
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from engine.bench import BenchError
from engine.bench.admission import Admission, footprint
from engine.bench.floors import size_work
from engine.bench.kernelbench import kernelbench_metrics
from engine.bench.measure import measure_ceilings, time_contenders
from engine.bench.report import write_results
from engine.bench.rows import ablation_entry, problem_rows, timing_sources
from engine.bench.searches import SearchOutcome, flat_ladder, run_search
from engine.compose import create_session
from engine.generate.base import GeneratorError
from engine.problems import ProblemError, load_problem
from engine.session.settings import SessionSettings
from engine.session.store import Store
from engine.session_files import SessionPaths


@dataclass(frozen=True)
class BenchPlan:
    problems: tuple[str, ...]  # built-in names or KernelBench files
    ablation: tuple[str, ...]  # a subset of `problems`
    backend: str  # cuda, cpu or sim (auto already resolved)
    limits: dict  # the budget of each search
    seed: int
    out: Path
    command: str  # how it was invoked, for the report
    precision_policy: str = "strict"  # of every search and of eager's timing
    # Problems from KernelBench folders: one that fails to load or to start is reported, not
    # fatal, and KernelBench's metrics are written over them.
    kernelbench: tuple[str, ...] = ()
    # The devices each search evaluates on; eager, torch.compile and the best kernel are timed
    # on the first.
    gpus: tuple[int, ...] = (0,)
    # Problems benched at a time, at most: their GPU work takes turns, their compiling overlaps;
    # `memory` (host and GPU bytes, None: not limited) admits fewer where their estimates
    # (engine.bench.admission) would not fit together.
    jobs: int = 1
    memory: tuple[int | None, int | None] = (None, None)

    def tag(self, problem: str) -> str:
        """A problem's name in session folders and search keys: tf32 benches apart from strict."""
        policy = self.precision_policy
        return problem if policy == "strict" else f"{problem}-{policy}"

    def session(self, problem: str, kind: str) -> SessionPaths:
        return SessionPaths(self.out / "sessions" / f"{self.tag(problem)}-{kind}")

    def settings(self, spec: str) -> SessionSettings:
        """The settings of a ladder search of problem `spec`."""
        return SessionSettings(spec, self.backend, self.seed, self.limits,
                               precision_policy=self.precision_policy, gpus=self.gpus)  # fmt: skip


def _summary(search: SearchOutcome) -> dict:
    return {
        "session": search.session,
        "best_candidate": search.best_id,
        "stop_reason": search.stop_reason,
        "rejections": search.rejections,
        "gpu_seconds_total": search.gpu_seconds_total,
        "gpu_seconds_by_activity": search.gpu_seconds_by_activity,
        "cpu_seconds_by_activity": search.cpu_seconds_by_activity,
        "wall_seconds": search.wall_seconds,
        "evaluations_per_gpu_second": search.evaluations / max(search.gpu_seconds_total, 1e-9),
        "gpu_seconds_by_rung": search.gpu_seconds_by_rung,
        "gpu_seconds_to_best": search.gpu_seconds_to_best,
        "evaluations": search.evaluations,
        "candidates": search.candidates,
        "progress": search.progress,
    }


def load_problems(plan: BenchPlan, skipped: dict[str, str]) -> dict:
    """Every problem loaded and its session folders free, before anything runs; a KernelBench
    file that does not load goes to `skipped` with why."""
    missing = sorted(set(plan.ablation) - set(plan.problems))
    if missing:
        raise BenchError(
            f"--ablation {' '.join(missing)}: not among the benched problems; add them to "
            "PROBLEM or leave PROBLEM empty to bench all built-ins"
        )
    problems, names = {}, set()
    for spec in plan.problems:
        try:
            problems[spec] = load_problem(spec, plan.precision_policy)
        except ProblemError as exc:
            if spec not in plan.kernelbench:
                raise
            skipped[spec] = str(exc)
            continue
        if problems[spec].name in names:
            raise BenchError(f"two problems named {problems[spec].name}: bench each once")
        names.add(problems[spec].name)
        for kind in ("ladder", "flat"):
            check_resumable(plan, spec, plan.session(problems[spec].name, kind))
    return problems


# What a session kept from an earlier bench must share with this one for the bench to resume it.
RESUMED_SETTINGS = ("backend", "seed", "limits", "precision_policy", "gpus")


def check_resumable(plan: BenchPlan, spec: str, paths: SessionPaths) -> None:
    """A session folder an earlier bench into the same --out left (one cut short, say) is resumed:
    its search goes on from its checkpoint, or not at all when it had finished. It must have been
    made with this bench's budget, seed, backend, precision and devices."""
    if not paths.root.exists():
        return
    if not paths.database.exists():
        raise BenchError(f"{paths.root} holds no session: remove it or choose another --out")
    store = Store(paths.database, read_only=True)
    try:
        kept = store.settings()
    finally:
        store.close()
    wanted = plan.settings(spec)
    differ = [
        f"{name} {getattr(kept, name)!r} (now {getattr(wanted, name)!r})"
        for name in RESUMED_SETTINGS
        if getattr(kept, name) != getattr(wanted, name)
    ]
    if differ:
        raise BenchError(
            f"{paths.root} is from an earlier bench with other settings: {'; '.join(differ)}. "
            "Rerun with that bench's options to resume it, or choose another --out"
        )


def create_ladder_sessions(plan: BenchPlan, problems: dict, skipped: dict[str, str]) -> None:
    """Write every ladder session (the generator's checks run here); all or none, but for a
    KernelBench file that no generator can start on, which goes to `skipped`."""
    created = []
    try:
        for spec, problem in list(problems.items()):
            paths = plan.session(problem.name, "ladder")
            if paths.root.exists():
                continue  # resumed (check_resumable)
            try:
                create_session(paths, plan.settings(spec))
            except GeneratorError as exc:
                if spec not in plan.kernelbench:
                    raise
                shutil.rmtree(paths.root, ignore_errors=True)
                skipped[spec] = str(exc)
                del problems[spec]
                continue
            created.append(paths.root)
    except Exception:
        for root in created:
            shutil.rmtree(root, ignore_errors=True)
        raise


def earlier_results(plan: BenchPlan) -> dict:
    """What an earlier bench into the same folder measured: a bench too long for one sitting runs
    as several commands into one results file. (Rows from before there were policies are
    strict.)"""
    path = plan.out / f"{plan.backend}.json"
    if not path.exists():
        return {"runs": [], "rows": [], "ablation": [], "searches": {}}
    earlier = json.loads(path.read_text())
    return {
        "runs": earlier["runs"],
        "rows": [{"precision_policy": "strict", **e} for e in earlier["rows"]],
        "ablation": [{"precision_policy": "strict", **e} for e in earlier["ablation"]],
        "searches": earlier["searches"],
    }


def without(earlier: dict, plan: BenchPlan, names: set[str]) -> dict:
    """`earlier` less what this bench measured again (problems `names`, under its policy): an
    earlier figure stands until a newer one replaces it, so a bench cut short loses none."""
    replaced = {(name, plan.precision_policy) for name in names}
    tags = {plan.tag(name) for name in names}

    def kept(entries: list[dict]) -> list[dict]:
        return [e for e in entries if (e["problem"], e["precision_policy"]) not in replaced]

    return {
        "rows": kept(earlier["rows"]),
        "ablation": kept(earlier["ablation"]),
        "searches": {k: v for k, v in earlier["searches"].items() if k.split("/")[0] not in tags},
    }


def run_bench(plan: BenchPlan, log=lambda line: None, on_step=None) -> dict:
    """Run the whole bench; the results are rewritten after each problem, so a bench cut short
    keeps what it finished (and an earlier bench's figures for the problems it did not)."""
    skipped: dict[str, str] = {}
    problems = load_problems(plan, skipped)
    device = measure_ceilings(plan.backend, plan.gpus[0])
    create_ladder_sessions(plan, problems, skipped)
    for spec, why in skipped.items():
        log(f"{spec}: skipped: {why}")
    earlier = earlier_results(plan)
    results = {"backend": plan.backend, "timings_meaningful": plan.backend != "cpu", **earlier}
    run = len(results["runs"])  # rows name the run (command, ceilings) that measured them
    ceilings = device.pop("ceilings")
    results["runs"].append({
        "command": plan.command, "limits": plan.limits, "seed": plan.seed,
        "precision_policy": plan.precision_policy, "device": device, "ceilings": ceilings,
        "gpus": list(plan.gpus),
        "problems": [p.name for p in problems.values()],
    })  # fmt: skip
    finished: dict[str, ProblemOutcome] = {}
    written = threading.Lock()

    def finish(spec: str, outcome: ProblemOutcome) -> None:
        """Keep one problem's outcome and rewrite the results, problems in the plan's order."""
        with written:
            finished[spec] = outcome
            done = [finished[s] for s in problems if s in finished]
            kept = without(earlier, plan, {problems[s].name for s in finished})
            searches = {k: v for o in done for k, v in o.searches.items()}
            results["searches"] = {**kept["searches"], **searches}
            results["rows"] = kept["rows"] + [{**r, "run": run} for o in done for r in o.rows]
            results["ablation"] = kept["ablation"] + [o.ablation for o in done if o.ablation]
            write_results(with_metrics(plan, results, problems, skipped), plan.out)

    bench = partial(bench_problem, plan, log=log, ceilings=ceilings)
    if plan.jobs == 1 or len(problems) == 1:
        for spec, problem in problems.items():
            finish(spec, bench(spec, problem, on_step=on_step))
    else:
        footprints = {spec: footprint(p, admitted_labels(p, plan.backend), plan.backend)
                      for spec, p in problems.items()}  # fmt: skip
        for spec, wanted in footprints.items():
            log(f"{problems[spec].name}: estimated {wanted}")
        admission = Admission(plan.jobs, *plan.memory)
        run_concurrently(bench, problems, admission, footprints, finish, on_step)
    write_results(with_metrics(plan, results, problems, skipped), plan.out)
    return results


@dataclass
class ProblemOutcome:
    searches: dict  # "name/ladder" (and "name/flat"): the search's summary
    rows: list[dict]
    ablation: dict | None


def bench_problem(plan: BenchPlan, spec: str, problem, log, ceilings: dict, on_step
                  ) -> ProblemOutcome:  # fmt: skip
    """One problem's searches (the ladder's, and the flat one for the ablation), then eager,
    torch.compile and the best kernel timed at every size."""
    log(f"{problem.name}: searching (ladder)")
    ladder = run_search(plan.session(problem.name, "ladder"), on_step, log)
    searches = {f"{plan.tag(problem.name)}/ladder": _summary(ladder)}
    flat = None
    if spec in plan.ablation:
        log(f"{problem.name}: searching (flat, replaying the ladder's candidates)")
        flat_paths = plan.session(problem.name, "flat")
        replayed = plan.session(problem.name, "ladder").root.resolve()
        flat_settings = replace(
            plan.settings(spec),
            generator="replay",
            replay_from=str(replayed),
            ladder=flat_ladder(ladder.ladder),
        )
        if not flat_paths.root.exists():
            create_session(flat_paths, flat_settings)
        flat = run_search(flat_paths, on_step, log)
        searches[f"{plan.tag(problem.name)}/flat"] = _summary(flat)
    labels = list(ladder.ladder[-1].size_labels)
    log(f"{problem.name}: timing eager, torch.compile and the best kernel at {len(labels)} "
        "size(s)")  # fmt: skip
    sources = timing_sources(ladder, flat)
    start = time.monotonic()
    times = time_contenders(problem, labels, sources, plan.backend, plan.seed,
                            gpu=plan.gpus[0])  # fmt: skip
    log(f"{problem.name}: timed in {time.monotonic() - start:.0f} s of wall")
    work = {label: size_work(problem, problem.size(label)) for label in labels}
    rows = problem_rows(problem, ladder, work, times, ceilings)
    ablation = None
    if flat is not None:
        ablation = ablation_entry(problem, ladder, flat, sources, times)
    return ProblemOutcome(searches, rows, ablation)


class BenchStopped(Exception):
    """Raised in a search's step once the bench is interrupted: the search stops at its last
    checkpoint, for a later bench into the same --out to resume."""


def admitted_labels(problem, backend: str) -> list[str]:
    """The sizes a problem's bench works at: every size on a GPU, the tiny ones on cpu."""
    if backend == "cpu":
        return [s.label for s in problem.tier("tiny") or [problem.smallest]]
    return [s.label for s in problem.sizes]


def run_concurrently(bench, problems: dict, admission: Admission, footprints: dict, finish,
                     on_step) -> None:  # fmt: skip
    """Problems at a time as `admission` admits them by their `footprints`, each in a thread:
    their GPU work takes turns on each device (engine.backends.local.gpu_turn), their compiling
    overlaps. Ctrl-C stops every search at its next step."""
    stopping = threading.Event()

    def step(engine) -> None:
        if stopping.is_set():
            raise BenchStopped()
        if on_step is not None:
            on_step(engine)

    def admitted(spec: str, problem):
        with admission.admitted(footprints[spec]):
            if stopping.is_set():
                raise BenchStopped()
            return bench(spec, problem, on_step=step)

    pool = ThreadPoolExecutor(admission.jobs, thread_name_prefix="bench")
    futures = {pool.submit(admitted, spec, problem): spec
               for spec, problem in problems.items()}  # fmt: skip
    try:
        for future in as_completed(futures):
            finish(futures[future], future.result())
    except BaseException:
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()


def with_metrics(plan: BenchPlan, results: dict, problems: dict, skipped: dict) -> dict:
    """`results` with KernelBench's metrics over every KernelBench file benched into this --out
    under this precision, by this command or earlier ones (a set too large for one sitting is
    benched by several commands); a problem not timed yet (the bench is still on it, or was cut
    short) is listed as unfinished, not counted."""
    run = results["runs"][-1]
    run["kernelbench"] = [p.name for spec, p in problems.items() if spec in plan.kernelbench]
    run["kernelbench_skipped"] = dict(skipped)  # only KernelBench files are ever skipped
    policy = plan.precision_policy
    runs = [r for r in results["runs"] if r.get("precision_policy", "strict") == policy]
    names = list(dict.fromkeys(n for r in runs for n in r.get("kernelbench", ())))
    if not names and not any(r.get("kernelbench_skipped") for r in runs):
        return results
    not_loaded = {f: why for r in runs for f, why in r.get("kernelbench_skipped", {}).items()}
    rows = [r for r in results["rows"] if r["precision_policy"] == policy]
    timed = {r["problem"] for r in rows}
    searches = {n: results["searches"].get(f"{plan.tag(n)}/ladder", {}) for n in names}
    done = [n for n in names if n in timed]
    results["kernelbench"] = {
        **kernelbench_metrics(done, not_loaded, rows, searches),
        "unfinished": [n for n in names if n not in timed],
    }
    return results
