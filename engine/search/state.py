"""The search's state and every decision computable from it: candidates, rung index, queue,
ledger, limits, random state and applied commands, restored exactly from the stored rows.

Nothing here talks to a device, a generator or the store's file: engine.search.engine drives a
Search through its steps, and the store keeps what `stored` returns with each step.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, field, replace

from engine.backends.devices import Slot
from engine.generate.base import GenerationRequest, ParentInfo
from engine.generate.composite import ORIGIN as COMPOSITE
from engine.jobs import REFERENCE_FAILED, EvalResult, RungSpec, source_sha256
from engine.records import Candidate, RungResult
from engine.search import fidelity, scheduler
from engine.search.budget import Ledger
from engine.search.commands import apply_command
from engine.search.score import per_shape, score, speedup_summary
from engine.session.settings import SessionSettings
from engine.session.store import StepWrite, Store
from engine.session_files import limit_name

# A profile guides mutations but costs as much GPU time as many timed evaluations: a rung that
# asks for one gets it only while profiling stays within this share of all GPU-seconds spent,
# counting the profile about to run. Short searches spend their budget on timing instead.
PROFILE_SHARE = 0.25
# Evaluations in a row that the machine failed (each after the backend's own tries with backoff,
# engine.backends.faults) before the search pauses: by then the fault has lasted long enough that
# going on would only wait on a broken machine, and the user has something to fix.
MACHINE_FAULTS_BEFORE_PAUSE = 3


@dataclass
class Schedule:
    """The scheduler's own state (queue, evaluations in flight, counters), stored as one JSON
    blob each step."""

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
    machine_faults: int = 0  # evaluations in a row that the machine failed
    pause_reason: str | None = None  # why the engine paused the search itself (machine faults)
    progress: list = field(default_factory=list)  # [gpu_seconds, best speedup] when best improves
    rung0_level: int = 0  # how often rung 0's fidelity was raised (engine.search.fidelity)
    agreement: list = field(default_factory=lambda: [0, 0])  # [agreeing, decided] pairs
    rung0_promotions: int = 0  # promotions out of rung 0: every AUDIT_EVERY-th is an audit


class Search:
    """A session's search state, and what it decides: the next promotion or queued candidate,
    what a result changes (ranking, pruning, rung 0's fidelity), the best, when to stop."""

    def __init__(self, settings: SessionSettings, saved: dict, population: list[Candidate],
                 devices: int = 1, commands: list[dict] | None = None,
                 profile_seconds: float = 0.0):  # fmt: skip
        self.settings = settings
        self.profile_seconds = profile_seconds  # a profile's GPU-seconds before one has run
        self.ladder = settings.ladder
        self.schedule = Schedule(**saved.get("search", {}))
        stored_ledger = saved.get("ledger")
        self.ledger = Ledger.from_dict(stored_ledger) if stored_ledger else Ledger()
        self.limits: dict = saved.get("limits", dict(settings.limits))
        self.rng = random.Random()
        if "rng" in saved:
            version, internal, gauss = saved["rng"]
            self.rng.setstate((version, tuple(internal), gauss))
        else:
            self.rng.seed(settings.seed)
        self.population = population
        self.by_id = {c.id: c for c in population}
        self.index = scheduler.RungIndex(population)
        self.pinned = {c.id: c for c in population if c.pinned}
        self.profiled_origins: dict[str, dict] = {}
        self.children: dict[str, list[Candidate]] = {}
        for c in population:
            if c.profile:
                self.profiled_origins.setdefault(c.origin, c.profile)
            if c.parent:
                self.children.setdefault(c.parent, []).append(c)
        self.known_sha = {c.sha256 for c in population}
        self.command_log = commands or []
        self.applied_commands = {c["id"] for c in self.command_log}
        schedule = self.schedule
        schedule.inflight = schedule.inflight or []
        if schedule.inflight and not isinstance(schedule.inflight[0], list):  # [cid, rung]: older
            c, rung = self.by_id[schedule.inflight[0]], schedule.inflight[1]
            schedule.inflight = [Slot(c.id, rung, 0, 0.0, self.job_spec(c, rung)).to_list()]
        if len(schedule.device_clock) != devices:
            schedule.device_clock = [0.0] * devices

    @classmethod
    def from_store(cls, store: Store, settings: SessionSettings, devices: int = 1,
                   profile_seconds: float = 0.0) -> Search:  # fmt: skip
        """The search as the store's last committed step left it."""
        saved = store.state()
        commands = store.commands()
        search = cls(settings, saved, store.candidates(), devices, commands, profile_seconds)
        if "ledger" in saved and "evaluations_by_device" not in saved["ledger"]:
            # stored before evaluations were counted by device: count them in the store
            search.ledger.evaluations_by_device = store.evaluations_by_device(COMPOSITE)
        return search

    def stored(self) -> dict:
        """What the store keeps of this state beside the candidate rows, as of now."""
        return {
            "search": self.schedule.__dict__,
            "ledger": self.ledger.to_dict(),
            "limits": self.limits,
            "rng": list(self.rng.getstate()),
        }

    @property
    def top_rung(self) -> int:
        return len(self.ladder) - 1

    def event(self, write: StepWrite, kind: str, message: str, candidate=None, command=None):
        write.events.append(
            {
                "seq": self.schedule.event_seq,
                "ts": time.time(),
                "step": self.schedule.step,
                "kind": kind,
                "message": message,
                "candidate": candidate,
                "command": command,
            }
        )
        self.schedule.event_seq += 1

    # -- candidates ------------------------------------------------------------------------------

    def generation_request(self, problem, kind: str, parent: Candidate | None, count: int,
                           replies) -> GenerationRequest:  # fmt: skip
        """What the generator is told: the parent's measurements, recent failures, the slower
        siblings, the sources known already and the LLM dollars left."""
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
        return GenerationRequest(
            problem=problem,
            kind=kind,
            count=count,
            rng=self.rng,
            parent=self.parent_info(parent) if parent else None,
            failures=failures,
            slower_siblings=siblings,
            known_sha256=self.known_sha,
            replies=replies,
            budget_usd_left=self.ledger.left(self.limits)["llm_usd"],
        )

    def parent_info(self, c: Candidate) -> ParentInfo:
        measurements = [
            {"rung": r, "speedup": res.speedup, "speedup_ci": [res.low, res.high], "cv": res.cv}
            for r, res in sorted(c.results.items())
        ]
        diagnosis = c.profile or self.strategy_profile(c.origin)
        return ParentInfo(c.id, c.source, c.origin, c.params, measurements, diagnosis)

    def admit(self, write: StepWrite, proposals, parent: Candidate | None) -> int:
        """Store new proposals (duplicates of known sources dropped) and queue them at rung 0."""
        added = 0
        for proposal in proposals:
            sha = source_sha256(proposal.source)
            if sha in self.known_sha:
                continue
            seq = self.schedule.next_seq
            self.schedule.next_seq += 1
            c = Candidate(
                id=f"c{seq:04d}",
                seq=seq,
                sha256=sha,
                parent=parent.id if parent else None,
                origin=proposal.origin,
                params=proposal.params,
                note=proposal.note,
                source=proposal.source,
                created_step=self.schedule.step,
            )
            self.population.append(c)
            self.by_id[c.id] = c
            if parent is not None:
                self.children.setdefault(parent.id, []).append(c)
            self.known_sha.add(sha)
            self.schedule.queue.append(c.id)
            write.candidates.append(c)
            self.event(write, "generated", f"{c.id} from {c.origin}: {c.note}", candidate=c.id)
            added += 1
        return added

    # -- commands ----------------------------------------------------------------------------

    def apply_command(self, write: StepWrite, command: dict) -> None:
        """Apply an inbox command exactly once (one applied before is ignored), recorded and
        logged in `write`."""
        if command["id"] in self.applied_commands:
            return
        status, message, changed = apply_command(self, command)
        if changed is not None:
            write.candidates.append(changed)
        record = {
            **command,
            "applied_at": time.time(),
            "step": self.schedule.step,
            "status": status,
            "message": message,
        }
        write.commands.append(record)
        self.applied_commands.add(command["id"])
        kind = "command_applied" if status == "applied" else "command_rejected"
        self.event(write, kind, message, command.get("candidate"), command["id"])

    def committed(self, write: StepWrite) -> None:
        """The store holds `write` now: its commands join the log that clients see."""
        self.command_log += write.commands

    def pin(self, c: Candidate) -> None:
        c.pinned = True
        self.pinned[c.id] = c
        if c.status == "pruned":
            c.status = "alive"

    def unpin(self, c: Candidate) -> None:
        c.pinned = False
        self.pinned.pop(c.id, None)

    def veto(self, c: Candidate) -> None:
        """`c` leaves the search: the ranking, the queue and (at the next plan) the devices."""
        c.vetoed, c.pinned, c.status = True, False, "vetoed"
        self.index.remove(c)
        self.pinned.pop(c.id, None)
        if c.id in self.schedule.queue:
            self.schedule.queue.remove(c.id)

    # -- what to evaluate next -------------------------------------------------------------------

    def spec(self, rung: int) -> RungSpec:
        """The rung as it is measured now: rung 0 at its current fidelity."""
        if rung or self.top_rung == 0:
            return self.ladder[rung]
        return fidelity.rung0_spec(self.ladder[0], self.ladder[-1], self.schedule.rung0_level)

    def promote(self, write: StepWrite) -> tuple[Candidate, int] | None:
        """The candidate that climbs now and the rung it climbs to (every AUDIT_EVERY-th climb
        out of rung 0 goes to a candidate outside the quota), logged; or None."""
        promotion = scheduler.next_promotion(self.index, list(self.pinned.values()), self.top_rung)
        if promotion is None:
            return None
        c, rung = promotion
        why = scheduler.specialty(self.index, c, rung - 1)
        if rung == 1:
            self.schedule.rung0_promotions += 1
            audit = self.schedule.rung0_promotions % fidelity.AUDIT_EVERY == 0 and self.audit()
            if audit:
                c, why = audit, " (audit: from outside rung 0's quota)"
        c.promoted_from.append(c.rung)
        self.event(write, "promoted", f"{c.id} climbs to rung {rung}{why}", candidate=c.id)
        return c, rung

    def audit(self) -> Candidate | None:
        """A candidate waiting at rung 0 outside its quota, drawn at random."""
        outside = scheduler.outside_quota(self.index, 0)
        return self.rng.choice(outside) if outside else None

    def next_parent(self) -> Candidate | None:
        """With nothing queued or promotable: the best survivor whose neighbourhood may still hold
        something new (highest rung first), to mutate again."""
        for rung in range(self.top_rung, -1, -1):
            for c in self.index.measured(rung):
                if c.id not in self.schedule.exhausted and c.status in ("alive", "done"):
                    return c
        return None

    def best(self) -> Candidate | None:
        """The session's best: the top score at the highest rung reached (in those words,
        engine.session_files.BEST_MEANING), the first of that rung's ranking. A candidate
        measured only at lower rungs may score higher: it is not confirmed where this one is."""
        for rung in range(self.top_rung, -1, -1):
            measured = self.index.measured(rung)
            if measured:
                return measured[0]
        return None

    def stop_reason(self) -> str | None:
        spent = self.ledger.exhausted(self.limits)
        if spent:
            return f"budget spent: {limit_name(spent, self.settings.backend)}"
        target = self.limits.get("target_speedup")
        confirmed = self.index.measured(self.top_rung)
        if target and any(c.results[self.top_rung].speedup >= target for c in confirmed):
            return f"target speedup {target}x reached"
        return None

    def evaluations_unplanned(self) -> float:
        """Evaluations the budget allows beyond those recorded and those in flight."""
        limit = self.limits.get("evaluations", math.inf)
        return limit - self.ledger.evaluations - len(self.schedule.inflight)

    def strategy_profile(self, origin: str) -> dict | None:
        """The profile of the first profiled candidate of a strategy (or why there is none): its
        neighbours differ in tile sizes and warps, rarely in what bounds them, and a profile
        costs as much GPU time as many timed evaluations (about 15 s of ncu on the H200)."""
        return self.profiled_origins.get(origin)

    def profile_affordable(self) -> bool:
        """Whether one more profile keeps profiling within PROFILE_SHARE of the GPU-seconds."""
        spent = self.ledger.gpu_seconds_by_activity.get("profile", 0.0)
        profiles = len(self.profiled_origins)
        expected = spent / profiles if spent and profiles else self.profile_seconds
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
            "project_code": self.settings.generator == "offline",
        }

    def start_job(self, write: StepWrite, c: Candidate, rung: int, device: int) -> None:
        """Store the intent to evaluate `c` at `rung` on `device`, with the job as it is decided
        now (the rung's fidelity, whether it profiles): a resume hands the device the same."""
        clock = self.schedule.device_clock[device]
        slot = Slot(c.id, rung, device, clock, self.job_spec(c, rung))
        self.schedule.inflight.append(slot.to_list())
        c.status = "evaluating"
        write.candidates.append(c)

    # -- what a result changes -------------------------------------------------------------------

    def machine_fault(self, write: StepWrite, slot: Slot, result: EvalResult,
                      session: str) -> None:  # fmt: skip
        """The machine failed `slot`'s evaluation: nothing is recorded or charged against its
        candidate, whose evaluation stays planned (the devices run it again); after
        MACHINE_FAULTS_BEFORE_PAUSE in a row the search pauses, saying what failed and what to
        do, instead of spending its candidates or its budget on a broken machine. A problem whose
        own Model failed pauses it at once: asking again gives the same answer."""
        schedule = self.schedule
        if result.reason == REFERENCE_FAILED:
            self.event(write, "reference_failed", f"{slot.cid} at rung {slot.rung} was not judged: "
                       f"{result.message}; nothing is charged to it", slot.cid)  # fmt: skip
            if schedule.state == "running":
                self._pause(write, f"{result.message}. Fix the problem file (its Model or its "
                            "sizes); the search cannot judge a candidate against a Model that "
                            "fails")  # fmt: skip
            return
        schedule.machine_faults += 1
        left = MACHINE_FAULTS_BEFORE_PAUSE - schedule.machine_faults
        then = (f"evaluated again ({left} more before the search pauses)" if left > 0
                else "evaluated when the search goes on")  # fmt: skip
        self.event(write, "machine_fault",
                   f"{slot.cid} at rung {slot.rung} was not judged: {result.message}; nothing is "
                   f"charged to it, and it is {then}", slot.cid)  # fmt: skip
        if left > 0 or schedule.state != "running":
            return
        self._pause(write, (
            f"{MACHINE_FAULTS_BEFORE_PAUSE} evaluations in a row failed for the machine, not the "
            f"candidate: {result.message}. Free memory or GPUs (run fewer searches or a lower "
            f"`bench --jobs` here), then `kernelbrain unpause {session}`, or `kernelbrain resume "
            f"{session}` once no engine holds it (a bench's: the same bench into the same --out)"
        ))  # fmt: skip

    def _pause(self, write: StepWrite, reason: str) -> None:
        """The engine's own pause: the reason in the snapshot and a `paused` event."""
        schedule = self.schedule
        schedule.state, schedule.machine_faults, schedule.pause_reason = "paused", 0, reason
        self.event(write, "paused", f"search paused: {reason}")

    def record_result(self, write: StepWrite, c: Candidate, rung: int, result: EvalResult,
                      device: int = 0):  # fmt: skip
        self.schedule.machine_faults = 0
        # A composite of per-shape winners is part of the search's answer, as its census is:
        # its GPU-seconds are charged, but it is not one of the budget's evaluations.
        if c.origin == COMPOSITE:
            spent = self.ledger.charge_census(rung, result.gpu_seconds)
        else:
            spent = self.ledger.charge_evaluation(rung, result.gpu_seconds, device)
        c.gpu_seconds += spent
        self.ledger.charge_device(device, spent)
        stored = {**result.to_dict(), "device": device}
        write.evaluations.append((c.id, rung, self.schedule.step, result.passed, stored))
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
            f"{c.id} at rung {rung}: {speedup:.3f}x [{low:.3f}, {high:.3f}], cv {cv:.3f}"
            + (f" ({result.message})" if result.message else ""),
            c.id,
        )
        self.prune(write, rung)
        best = self.best()
        if best is not None:
            top = best.best_result.speedup
            if not self.schedule.progress or self.schedule.progress[-1][1] != top:
                self.schedule.progress.append([round(self.ledger.gpu_seconds, 6), top])

    def watch_agreement(self, write: StepWrite, c: Candidate) -> None:
        """Count `c`'s pairs decided at rung 1; raise rung 0's fidelity while it disagrees."""
        schedule = self.schedule
        agree, decided = fidelity.decided_pairs(c, self.index.measured(1))
        schedule.agreement = [schedule.agreement[0] + agree, schedule.agreement[1] + decided]
        agree, decided = schedule.agreement
        top = fidelity.max_level(self.ladder[0], self.ladder[-1])
        if (decided < fidelity.MIN_DECIDED_PAIRS or agree >= fidelity.AGREEMENT_FLOOR * decided
                or schedule.rung0_level >= top):  # fmt: skip
            return
        schedule.rung0_level += 1
        schedule.agreement = [0, 0]
        now = self.spec(0)
        flat = " (the top rung's: a flat search)" if schedule.rung0_level >= top else ""
        self.event(write, "fidelity",
                   f"rung 0 ranks as rung 1 does in only {agree} of {decided} pairs that rung 1 "
                   f"decides: rung 0 now times {now.reps} repetitions over {now.input_sets} "
                   f"input sets{flat}")  # fmt: skip

    def prune(self, write: StepWrite, rung: int) -> None:
        for p in scheduler.prunable(self.index, rung):
            p.status = "pruned"
            write.candidates.append(p)
            self.event(write, "pruned", f"{p.id} is confidently below rung {rung}'s cutoff", p.id)

    def reject_answer(self, write: StepWrite, c: Candidate, result: EvalResult) -> None:
        """The census rejected the search's answer `c`: it leaves the ranking."""
        c.status, c.reason, c.message = "rejected", result.reason, result.message
        self.index.remove(c)
        self.event(write, "rejected", f"{c.id}: {result.reason}: {result.message}", c.id)

    def finish(self, write: StepWrite, reason: str | None) -> None:
        if self.schedule.state != "stopped":
            self.schedule.state = "finished"
        self.schedule.stop_reason = reason or self.schedule.stop_reason
        state = self.schedule.state
        self.event(write, state, f"search {state}: {self.schedule.stop_reason}")
