"""The search loop: pop, gate, benchmark, score, promote or prune, mutate; one checkpoint a step.

Every decision is a function of the stored state (population, queue, ledger, random state), so a
run killed at any moment and resumed continues exactly as if it had never stopped.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field, replace

from engine.backends.base import Backend
from engine.backends.devices import Slot, devices_for
from engine.generate.base import GenerationRequest, Generator, ParentInfo
from engine.generate.composite import ORIGIN as COMPOSITE
from engine.jobs import EvalResult, RungSpec, source_sha256
from engine.problems import Problem
from engine.records import Candidate, RungResult
from engine.search import fidelity, report, scheduler, specialists
from engine.search.budget import Ledger
from engine.search.commands import apply_command
from engine.search.score import per_shape, score, speedup_summary
from engine.session import publish
from engine.session.lock import EngineLock
from engine.session.settings import SessionSettings
from engine.session.store import ReplyTable, StepWrite, Store
from engine.session_files import SessionPaths

CHILDREN_PER_PROMOTION = 3  # mutations asked for each time a candidate climbs a rung
# A profile guides mutations but costs as much GPU time as many timed evaluations: a rung that
# asks for one gets it only while profiling stays within this share of all GPU-seconds spent,
# counting the profile about to run. Short searches spend their budget on timing instead.
PROFILE_SHARE = 0.25
PAUSE_POLL_SECONDS = 0.2
# Candidates at the head of the queue whose kernels the backend may compile ahead, beside the
# evaluation at hand (the few that a step or two will reach, not the whole queue).
COMPILE_AHEAD = 8
CENSUS_TRIES = 3  # answers censused at the end of a search, at most, before it gives up


@dataclass
class SearchState:
    """The scheduler's own state, stored as one JSON blob each step."""

    step: int = 0
    next_seq: int = 1
    event_seq: int = 0
    queue: list[str] = field(default_factory=list)  # rung-0 candidates, in order
    # the evaluations whose intent is stored: [candidate id, rung, device, start] (Slot)
    inflight: list = field(default_factory=list)
    device_clock: list = field(default_factory=list)  # when each device is free (Clocked)
    coarse_done: bool = False
    exhausted: list[str] = field(default_factory=list)  # parents whose mutations yield nothing new
    state: str = "running"  # one of engine.session_files.SEARCH_STATES
    stop_reason: str | None = None
    progress: list = field(default_factory=list)  # [gpu_seconds, best speedup] when best improves
    rung0_level: int = 0  # how often rung 0's fidelity was raised (engine.search.fidelity)
    agreement: list = field(default_factory=lambda: [0, 0])  # [agreeing, decided] pairs
    rung0_promotions: int = 0  # promotions out of rung 0: every AUDIT_EVERY-th is an audit


class Engine:
    def __init__(
        self,
        paths: SessionPaths,
        store: Store,
        problem: Problem,
        backend: Backend,
        generator: Generator,
        settings: SessionSettings,
        lock: EngineLock | None = None,
        devices: list | None = None,
    ):
        self.lock = lock  # held by a running engine; None for a read-only view
        self.engine_pid = os.getpid() if lock else None
        self.paths = paths
        self.store = store
        self.problem = problem
        self.backend = backend  # device 0's: the census and compiling ahead go through it
        backends = devices or [backend]
        self.devices = devices_for(backends) if backend is not None else None
        self.device_count = len(backends)
        self._submitted: set[tuple] = set()  # keys of the slots handed to the devices here
        self.generator = generator
        self.ladder = settings.ladder
        self.settings = settings
        saved = store.state()
        self.search = SearchState(**saved.get("search", {}))
        stored_ledger = saved.get("ledger")
        self.ledger = Ledger.from_dict(stored_ledger) if stored_ledger else Ledger()
        if stored_ledger and "evaluations_by_device" not in stored_ledger:
            # stored before evaluations were counted by device: count them in the store
            self.ledger.evaluations_by_device = store.evaluations_by_device(COMPOSITE)
        self.limits: dict = saved.get("limits", dict(settings.limits))
        self.rng = random.Random()
        if "rng" in saved:
            version, internal, gauss = saved["rng"]
            self.rng.setstate((version, tuple(internal), gauss))
        else:
            self.rng.seed(settings.seed)
        self.replies = ReplyTable(store)
        self.population: list[Candidate] = store.candidates()
        self.by_id = {c.id: c for c in self.population}
        self.index = scheduler.RungIndex(self.population)
        self.pinned = {c.id: c for c in self.population if c.pinned}
        self.profiled_origins: dict[str, dict] = {}
        for c in self.population:
            if c.profile:
                self.profiled_origins.setdefault(c.origin, c.profile)
        self.children: dict[str, list[Candidate]] = {}
        for c in self.population:
            if c.parent:
                self.children.setdefault(c.parent, []).append(c)
        self.known_sha = {c.sha256 for c in self.population}
        self.command_log = store.commands()
        self.applied_commands = {c["id"] for c in self.command_log}
        self._clock = time.monotonic()
        self._consumed_inbox: list = []  # inbox files applied this step, deleted once committed
        self.last_snapshot: dict | None = None  # what after_commit last published
        stored = self.search.inflight
        if stored and not isinstance(stored[0], list):  # [cid, rung]: before devices counted
            c, rung = self.by_id[stored[0]], stored[1]
            self.search.inflight = [Slot(c.id, rung, 0, 0.0, self.job_spec(c, rung)).to_list()]
        self.search.inflight = self.search.inflight or []
        if len(self.search.device_clock) != self.device_count:
            self.search.device_clock = [0.0] * self.device_count

    @property
    def top_rung(self) -> int:
        return len(self.ladder) - 1

    # -- events, state -------------------------------------------------------------------------

    def event(self, write: StepWrite, kind: str, message: str, candidate=None, command=None):
        write.events.append(
            {
                "seq": self.search.event_seq,
                "ts": time.time(),
                "step": self.search.step,
                "kind": kind,
                "message": message,
                "candidate": candidate,
                "command": command,
            }
        )
        self.search.event_seq += 1

    def _tick_wall_clock(self) -> None:
        now = time.monotonic()
        self.ledger.wall_seconds += now - self._clock
        self._clock = now

    def commit(self, write: StepWrite) -> None:
        self._tick_wall_clock()
        write.state.update(
            search=self.search.__dict__,
            ledger=self.ledger.to_dict(),
            limits=self.limits,
            rng=list(self.rng.getstate()),
        )
        self.store.commit(write)
        self.command_log += write.commands
        publish.append_events(self.paths, write.events)
        publish.write_candidate_details(self.paths, write.candidates, write.evaluations)

    # -- generation --------------------------------------------------------------------------------

    def parent_info(self, c: Candidate) -> ParentInfo:
        measurements = [
            {"rung": r, "speedup": res.speedup, "speedup_ci": [res.low, res.high], "cv": res.cv}
            for r, res in sorted(c.results.items())
        ]
        diagnosis = c.profile or self.strategy_profile(c.origin)
        return ParentInfo(c.id, c.source, c.origin, c.params, measurements, diagnosis)

    def generate(self, write: StepWrite, kind: str, parent: Candidate | None, count: int) -> int:
        """Ask the generator, store what is new, queue it at rung 0; returns how many."""
        failures = [
            {"id": c.id, "reason": c.reason, "message": c.message}
            for c in self.population[-50:]
            if c.status == "rejected"
        ]
        siblings = []
        if parent is not None:
            siblings = [
                {"id": c.id, "speedup": c.best_result.speedup, "source": c.source}
                for c in self.children.get(parent.id, [])
                if c.best_result
                and parent.best_result
                and c.best_result.speedup < parent.best_result.speedup
            ][-3:]
        request = GenerationRequest(
            problem=self.problem,
            kind=kind,
            count=count,
            rng=self.rng,
            parent=self.parent_info(parent) if parent else None,
            failures=failures,
            slower_siblings=siblings,
            known_sha256=self.known_sha,
            replies=self.replies,
            budget_usd_left=self.ledger.left(self.limits)["llm_usd"],
        )
        outcome = self.generator.propose(request)
        self.ledger.charge_generation(
            outcome.tokens_in, outcome.tokens_out, outcome.cost_usd, outcome.requests
        )
        for rejection in outcome.rejections:
            self.event(
                write, "generation_rejected", f"{rejection['reason']}: {rejection['message']}"
            )
        for line in outcome.repairs + outcome.notes:
            self.event(write, "generation_note", line)
        return self.admit(write, outcome.proposals, parent)

    def admit(self, write: StepWrite, proposals, parent: Candidate | None) -> int:
        """Store new proposals (duplicates of known sources dropped) and queue them at rung 0."""
        added = 0
        for proposal in proposals:
            sha = source_sha256(proposal.source)
            if sha in self.known_sha:
                continue
            seq = self.search.next_seq
            self.search.next_seq += 1
            c = Candidate(
                id=f"c{seq:04d}",
                seq=seq,
                sha256=sha,
                parent=parent.id if parent else None,
                origin=proposal.origin,
                params=proposal.params,
                note=proposal.note,
                source=proposal.source,
                created_step=self.search.step,
            )
            self.population.append(c)
            self.by_id[c.id] = c
            if parent is not None:
                self.children.setdefault(parent.id, []).append(c)
            self.known_sha.add(sha)
            self.search.queue.append(c.id)
            write.candidates.append(c)
            self.event(write, "generated", f"{c.id} from {c.origin}: {c.note}", candidate=c.id)
            added += 1
        return added

    # -- scheduling --------------------------------------------------------------------------------

    def spec(self, rung: int) -> RungSpec:
        """The rung as it is measured now: rung 0 at its current fidelity."""
        if rung or self.top_rung == 0:
            return self.ladder[rung]
        return fidelity.rung0_spec(self.ladder[0], self.ladder[-1], self.search.rung0_level)

    def next_job(self, write: StepWrite) -> tuple[Candidate, int] | None:
        promotion = scheduler.next_promotion(self.index, list(self.pinned.values()), self.top_rung)
        if promotion:
            c, rung = promotion
            why = scheduler.specialty(self.index, c, rung - 1)
            if rung == 1:
                self.search.rung0_promotions += 1
                audit = self.search.rung0_promotions % fidelity.AUDIT_EVERY == 0 and self.audit()
                if audit:
                    c, why = audit, " (audit: from outside rung 0's quota)"
            c.promoted_from.append(c.rung)
            self.event(write, "promoted", f"{c.id} climbs to rung {rung}{why}", candidate=c.id)
            self.generate(write, "mutate", c, CHILDREN_PER_PROMOTION)
            return c, rung
        while not self.search.queue:
            if not self.search.coarse_done:
                self.search.coarse_done = True
                if self.generate(write, "coarse", None, count=0) == 0:
                    return None
                continue
            parent = self.next_parent()
            if parent is None:
                return None
            if self.generate(write, "mutate", parent, CHILDREN_PER_PROMOTION) == 0:
                self.search.exhausted.append(parent.id)
        cid = self.search.queue.pop(0)
        return self.by_id[cid], 0

    def audit(self) -> Candidate | None:
        """A candidate waiting at rung 0 outside its quota, drawn at random."""
        quota = set(map(id, scheduler.promotable(self.index, 0)))
        outside = [c for c in self.index.measured(0)
                   if scheduler.waiting(c, 0) and id(c) not in quota]  # fmt: skip
        return self.rng.choice(sorted(outside, key=lambda c: c.seq)) if outside else None

    def next_parent(self) -> Candidate | None:
        """With nothing queued or promotable: the best survivor whose neighbourhood may still hold
        something new (highest rung first), to mutate again."""
        for rung in range(self.top_rung, -1, -1):
            for c in self.index.measured(rung):
                if c.id not in self.search.exhausted and c.status in ("alive", "done"):
                    return c
        return None

    def best(self) -> Candidate | None:
        """The best score at the highest rung reached: rung bonuses make that the best overall."""
        for rung in range(self.top_rung, -1, -1):
            measured = self.index.measured(rung)
            if measured:
                return measured[0]
        return None

    def stop_reason(self) -> str | None:
        spent = self.ledger.exhausted(self.limits)
        if spent:
            return f"budget spent: {spent}"
        target = self.limits.get("target_speedup")
        confirmed = self.index.measured(self.top_rung)
        if target and any(c.results[self.top_rung].speedup >= target for c in confirmed):
            return f"target speedup {target}x reached"
        return None

    def evaluations_unplanned(self) -> float:
        """Evaluations the budget allows beyond those recorded and those in flight."""
        limit = self.limits.get("evaluations", math.inf)
        return limit - self.ledger.evaluations - len(self.search.inflight)

    # -- evaluation --------------------------------------------------------------------------------

    def record_result(self, write: StepWrite, c: Candidate, rung: int, result: EvalResult,
                      device: int = 0):  # fmt: skip
        # A composite of per-shape winners is part of the search's answer, as its census is:
        # its GPU-seconds are charged, but it is not one of the budget's evaluations.
        if c.origin == COMPOSITE:
            spent = self.ledger.charge_census(rung, result.gpu_seconds)
        else:
            spent = self.ledger.charge_evaluation(rung, result.gpu_seconds, device)
        c.gpu_seconds += spent
        self.ledger.charge_device(device, spent)
        stored = {**result.to_dict(), "device": device}
        write.evaluations.append((c.id, rung, self.search.step, result.passed, stored))
        write.candidates.append(c)
        c.rung = rung
        if result.error is not None:
            c.error = result.error
        c.precision = result.precision
        if not result.passed:
            c.status, c.reason, c.message = "rejected", result.reason, result.message
            self.event(write, "rejected", f"{c.id}: {result.reason}: {result.message}", c.id)
            return
        speedup, low, high, cv = speedup_summary(result)
        samples = sum(len(t.samples_ms) for t in result.timings)
        c.results[rung] = RungResult(
            score(speedup, cv, rung), speedup, low, high, cv, samples, per_shape(result)
        )
        self.index.add(c, rung)
        c.status = "done" if rung == self.top_rung or c.origin == COMPOSITE else "alive"
        if rung == 1 and 0 in c.results:
            self.watch_agreement(write, c)
        if result.profile is not None:
            c.profile = result.profile
            self.profiled_origins.setdefault(c.origin, result.profile)
        self.event(
            write,
            "evaluated",
            f"{c.id} at rung {rung}: {speedup:.3f}x [{low:.3f}, {high:.3f}], cv {cv:.3f}",
            c.id,
        )
        self.prune(write, rung)
        best = self.best()
        if best is not None:
            top = best.best_result.speedup
            if not self.search.progress or self.search.progress[-1][1] != top:
                self.search.progress.append([round(self.ledger.gpu_seconds, 6), top])

    def watch_agreement(self, write: StepWrite, c: Candidate) -> None:
        """Count `c`'s pairs decided at rung 1; raise rung 0's fidelity while it disagrees."""
        agree, decided = fidelity.decided_pairs(c, self.index.measured(1))
        self.search.agreement = [self.search.agreement[0] + agree,
                                 self.search.agreement[1] + decided]  # fmt: skip
        agree, decided = self.search.agreement
        top = fidelity.max_level(self.ladder[0], self.ladder[-1])
        if (decided < fidelity.MIN_DECIDED_PAIRS or agree >= fidelity.AGREEMENT_FLOOR * decided
                or self.search.rung0_level >= top):  # fmt: skip
            return
        self.search.rung0_level += 1
        self.search.agreement = [0, 0]
        now = self.spec(0)
        flat = " (the top rung's: a flat search)" if self.search.rung0_level >= top else ""
        self.event(write, "fidelity",
                   f"rung 0 ranks as rung 1 does in only {agree} of {decided} pairs that rung 1 "
                   f"decides: rung 0 now times {now.reps} repetitions over {now.input_sets} "
                   f"input sets{flat}")  # fmt: skip

    def prune(self, write: StepWrite, rung: int) -> None:
        for p in scheduler.prunable(self.index, rung):
            p.status = "pruned"
            write.candidates.append(p)
            self.event(write, "pruned", f"{p.id} is confidently below rung {rung}'s cutoff", p.id)

    def strategy_profile(self, origin: str) -> dict | None:
        """The profile of the first profiled candidate of a strategy (or why there is none): its
        neighbours differ in tile sizes and warps, rarely in what bounds them, and a profile
        costs as much GPU time as many timed evaluations (about 15 s of ncu on the H200)."""
        return self.profiled_origins.get(origin)

    def profile_affordable(self) -> bool:
        """Whether one more profile keeps profiling within PROFILE_SHARE of the GPU-seconds."""
        spent = self.ledger.gpu_seconds_by_activity.get("profile", 0.0)
        profiles = len(self.profiled_origins)
        expected = spent / profiles if spent and profiles else self.backend.profile_seconds
        return spent + expected <= PROFILE_SHARE * (self.ledger.gpu_seconds + expected)

    def job_spec(self, c: Candidate, rung: int) -> dict:
        """What evaluating `c` at `rung` means now: EvalJob's fields but its id and source."""
        spec = self.spec(rung)
        if spec.profile and (
            self.strategy_profile(c.origin) is not None or not self.profile_affordable()
        ):
            spec = replace(spec, profile=False)
        return {
            "rung": asdict(spec),
            "seed": self.settings.seed * 1_000_003 + c.seq * 101 + rung,
            "check": not c.results,
            "session_seed": self.settings.seed,
        }

    # -- the loop ----------------------------------------------------------------------------------

    def apply_inbox(self, write: StepWrite) -> None:
        files = sorted(self.paths.inbox.glob("*.json")) if self.paths.inbox.exists() else []
        for path in files:
            command = json.loads(path.read_text())
            if command["id"] not in self.applied_commands:
                status, message, changed = apply_command(self, command)
                if changed is not None:
                    write.candidates.append(changed)
                record = {
                    **command,
                    "applied_at": time.time(),
                    "step": self.search.step,
                    "status": status,
                    "message": message,
                }
                write.commands.append(record)
                self.applied_commands.add(command["id"])
                kind = "command_applied" if status == "applied" else "command_rejected"
                self.event(write, kind, message, command.get("candidate"), command["id"])
        self._consumed_inbox = files

    def plan(self, write: StepWrite) -> bool:
        """The step boundary: apply the inbox, then choose a job for each free device and store
        their intent in the same transaction as the step that ends here. False when the search
        is over."""
        self.apply_inbox(write)
        self.search.inflight = [s for s in self.search.inflight
                                if not self.by_id[s[0]].vetoed]  # fmt: skip
        if self.search.state == "paused":
            return True
        reason = None if self.search.state == "stopped" else self.stop_reason()
        busy = {Slot.from_list(s).device for s in self.search.inflight}
        for device in range(self.device_count):
            if self.search.state != "running" or reason is not None:
                break
            if device in busy:
                continue
            if self.evaluations_unplanned() <= 0:
                break  # the evaluations in flight spend what is left: none overshoots
            job = self.next_job(write)
            if job is None:
                reason = None if self.search.inflight else "search space exhausted"
                break
            self.start_job(write, *job, device)
        if not self.search.inflight and self.search.state == "running":
            composite = specialists.compose(self, write)  # not on a stop: compose the answer
            if composite is not None:
                self.start_job(write, *composite, 0)
        if self.search.inflight:
            return True
        self.finish(write, reason)
        return False

    def start_job(self, write: StepWrite, c: Candidate, rung: int, device: int) -> None:
        """Store the intent to evaluate `c` at `rung` on `device`, with the job as it is decided
        now (the rung's fidelity, whether it profiles): a resume hands the device the same."""
        slot = Slot(c.id, rung, device, self.search.device_clock[device], self.job_spec(c, rung))
        self.search.inflight.append(slot.to_list())
        c.status = "evaluating"
        write.candidates.append(c)

    def dispatch(self) -> None:
        """Hand the devices the planned evaluations they do not have yet (after the commit that
        stored their intent: a run killed meanwhile plans them again)."""
        for stored in self.search.inflight:
            slot = Slot.from_list(stored)
            if slot.key not in self._submitted:
                self._submitted.add(slot.key)
                c = self.by_id[slot.cid]
                self.devices.submit(slot, self.problem, slot.eval_job(c.source))

    def step(self) -> bool:
        """Record the next evaluation to complete, plan the next for its device; one
        transaction. False when the search is over."""
        if not self.search.inflight:  # paused, or nothing planned yet
            write = StepWrite()
            going = self.plan(write)
            if write.events or write.candidates:
                self.commit(write)
                self.after_commit()
            if going and not self.search.inflight:
                time.sleep(PAUSE_POLL_SECONDS)
                self._tick_wall_clock()
            return going
        self.dispatch()
        done = self.devices.next_done()
        self._submitted.discard(done.slot.key)
        write = StepWrite()
        for note in done.notes:
            self.event(write, "rerun", note, done.slot.cid)
        stored = done.slot.to_list()
        if stored in self.search.inflight:  # else vetoed while it ran: nothing to record
            self.search.inflight.remove(stored)
            self.search.device_clock[done.slot.device] = done.finish
            c = self.by_id[done.slot.cid]
            self.record_result(write, c, done.slot.rung, done.result, done.slot.device)
            self.search.step += 1
        going = self.plan(write)
        self.commit(write)
        self.after_commit()
        return going

    def census_answer(self, write: StepWrite) -> None:
        """Before the search ends, its answer is censused: every kernel that its forward calls
        launch at every target size, seen in the GPU's launch records (one ncu run costs about
        as much as dozens of timed evaluations: the answer gets it, not every passing leader). A
        candidate the census rejects leaves the ranking, and the next best is censused."""
        for _ in range(CENSUS_TRIES):
            best = self.best()
            if best is None or best.census is not None:
                return
            found = EvalResult(True)
            labels = self.ladder[-1].size_labels
            self.backend.census(self.problem, best.source, labels, found)
            best.census = found.census or {"status": "unavailable", "sizes": list(labels),
                                           "why": f"no census on {self.backend.name}"}  # fmt: skip
            spent = self.ledger.charge_census(best.rung, found.gpu_seconds)
            self.ledger.charge_device(0, spent)  # the census runs on device 0's backend
            best.census["gpu_seconds"] = spent
            best.gpu_seconds += spent
            write.candidates.append(best)
            why = f" ({best.census['why']})" if best.census.get("why") else ""
            line = f"{best.id}: kernel census at {', '.join(labels)}: {best.census['status']}"
            self.event(write, "census", line + why, best.id)
            if found.passed:
                return
            best.status, best.reason, best.message = "rejected", found.reason, found.message
            self.index.remove(best)
            self.event(write, "rejected", f"{best.id}: {found.reason}: {found.message}", best.id)

    def finish(self, write: StepWrite, reason: str | None) -> None:
        self.census_answer(write)
        if self.search.state != "stopped":
            self.search.state = "finished"
        self.search.stop_reason = reason or self.search.stop_reason
        self.event(
            write, self.search.state, f"search {self.search.state}: {self.search.stop_reason}"
        )

    def after_commit(self) -> None:
        for path in self._consumed_inbox:
            path.unlink(missing_ok=True)
        self._consumed_inbox = []
        ahead = [self.by_id[cid].source for cid in self.search.queue[:COMPILE_AHEAD]]
        self.backend.prepare(self.problem, ahead, self.ladder[-1].size_labels)
        self.lock.heartbeat()
        self.last_snapshot = self.snapshot()
        publish.write_snapshot(self.paths, self.last_snapshot)

    def start(self) -> None:
        """Restore the published files and log the (re)start."""
        publish.rewrite_events(self.paths, self.store.events())
        since = self.search.step - 1  # what the last step committed may not have been published
        recent = set(self.store.evaluated_since(since))
        recent |= {c.id for c in self.population[-50:] if c.created_step >= since}
        publish.republish_details(self.paths, self.store, [self.by_id[i] for i in sorted(recent)])
        self.paths.reference.write_text(self.problem.source)
        write = StepWrite()
        if self.search.state in ("finished", "stopped"):
            self.search.state = "running"  # it finishes again at once if nothing is left
        kind = "resumed" if self.search.step or self.population else "started"
        note = " (took over the lock of a killed engine)" if self.lock.was_stale else ""
        sizes = self.problem.interpreter_note(self.backend.name)
        note += f"; {sizes}" if sizes else ""
        self.event(write, kind, f"engine {kind} on {self.backend.name}{note}")
        self.commit(write)
        self.after_commit()

    def run(self, on_step=None) -> str:
        self.start()
        try:
            while self.step():
                if on_step:
                    on_step(self)
        finally:
            self.lock.release()
        return self.search.state

    def close(self) -> None:
        """End every device's backend (and the evaluations still running there)."""
        self.devices.close()

    def snapshot(self) -> dict:
        return report.snapshot(self)

    def commands(self) -> list[dict]:
        return self.command_log
