"""The search loop: pop, gate, benchmark, score, promote or prune, mutate; one checkpoint a step.

The loop drives an engine.search.state.Search against the store, the devices and the generator.
Every decision is the Search's, a function of the stored state (population, queue, ledger,
random state), so a run killed at any moment and resumed continues exactly as if it had never
stopped.
"""

from __future__ import annotations

import json
import os
import time

from engine.backends.base import Backend
from engine.backends.devices import Slot, devices_for
from engine.generate.base import Generator
from engine.jobs import EvalResult
from engine.problems import Problem
from engine.records import Candidate
from engine.search import report, specialists
from engine.search.state import Search
from engine.session import publish
from engine.session.lock import EngineLock
from engine.session.settings import SessionSettings
from engine.session.store import ReplyTable, StepWrite, Store
from engine.session_files import SessionPaths

CHILDREN_PER_PROMOTION = 3  # mutations asked for each time a candidate climbs a rung
PAUSE_POLL_SECONDS = 0.2
# How often a paused engine stores and publishes its ledger: the paused seconds count up in the
# Budget pane and `show` as the pause goes on, and a kill loses at most this much of them.
PAUSE_CHECKPOINT_SECONDS = 1.0
# Candidates at the head of the queue whose kernels the backend may compile ahead, beside the
# evaluation at hand (the few that a step or two will reach, not the whole queue).
COMPILE_AHEAD = 8
CENSUS_TRIES = 3  # answers censused at the end of a search, at most, before it gives up


class Engine:
    """One session's search loop: plans the next evaluations, hands them to the devices, records
    each result and commits one transaction a step, then publishes what clients read."""

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
        self.settings = settings
        profile_seconds = backend.profile_seconds if backend is not None else 0.0
        self.search = Search.from_store(store, settings, self.device_count, profile_seconds)
        self.replies = ReplyTable(store)
        self._clock = time.monotonic()  # when the ledger's clocks were last charged
        self._committed_at = self._clock
        self._consumed_inbox: list = []  # inbox files applied this step, deleted once committed
        self.last_snapshot: dict | None = None  # what after_commit last published
        self.published_rows = publish.SnapshotRows()

    # -- the checkpoint ----------------------------------------------------------------------------

    def standing_paused(self) -> bool:
        """Whether the search stands paused: paused (by the user or by machine faults) with no
        evaluation running. Evaluations handed out before the pause finish on the budget."""
        return self.search.schedule.state == "paused" and not self.awaiting_devices()

    def _charge_clock(self) -> None:
        """Charge the time since the last tick: to paused_seconds while the search stood
        paused, else to wall_seconds. Called before anything changes whether it stands paused
        (a command, a machine fault), so each interval goes to the clock it ran under."""
        now = time.monotonic()
        ledger = self.search.ledger
        if self.standing_paused():
            ledger.paused_seconds += now - self._clock
        else:
            ledger.wall_seconds += now - self._clock
        self._clock = now

    def commit(self, write: StepWrite) -> None:
        """Store the step (one transaction, with the search's state as of now), then append its
        events and candidate details to the published files."""
        self._charge_clock()
        write.state.update(self.search.stored())
        self.store.commit(write)
        self._committed_at = time.monotonic()
        self.search.committed(write)
        self.published_rows.changed(write.candidates)
        publish.append_events(self.paths, write.events)
        publish.write_candidate_details(self.paths, write.candidates, write.evaluations)

    def after_commit(self) -> None:
        for path in self._consumed_inbox:
            path.unlink(missing_ok=True)
        self._consumed_inbox = []
        search = self.search
        ahead = [search.by_id[cid].source for cid in search.schedule.queue[:COMPILE_AHEAD]]
        self.backend.prepare(self.problem, ahead, search.ladder[-1].size_labels)
        self.publish()

    def publish(self) -> None:
        """Publish the committed state: the snapshot clients read, and the lock's heartbeat."""
        self.lock.heartbeat()
        self.last_snapshot = self.snapshot(kept=self.published_rows)
        publish.write_snapshot(self.paths, self.last_snapshot, self.published_rows.encoded())

    def snapshot(self, all_rows: bool = False, kept: publish.SnapshotRows | None = None) -> dict:
        return report.snapshot(self.search, self.paths.name, self.engine_pid, all_rows, kept)

    # -- generation --------------------------------------------------------------------------------

    def generate(self, write: StepWrite, kind: str, parent: Candidate | None, count: int) -> int:
        """Ask the generator, store what is new, queue it at rung 0; returns how many."""
        search = self.search
        request = search.generation_request(self.problem, kind, parent, count, self.replies)
        outcome = self.generator.propose(request)
        search.ledger.charge_generation(
            outcome.tokens_in, outcome.tokens_out, outcome.cost_usd, outcome.requests
        )
        for rejection in outcome.rejections:
            search.event(
                write, "generation_rejected", f"{rejection['reason']}: {rejection['message']}"
            )
        for line in outcome.repairs + outcome.notes:
            search.event(write, "generation_note", line)
        return search.admit(write, outcome.proposals, parent)

    # -- planning ----------------------------------------------------------------------------------

    def next_job(self, write: StepWrite) -> tuple[Candidate, int] | None:
        """The Search's next evaluation; a promotion asks for mutations of the climber, an empty
        queue for the coarse round or for mutations of the best survivor not exhausted yet."""
        search, schedule = self.search, self.search.schedule
        promotion = search.promote(write)
        if promotion:
            self.generate(write, "mutate", promotion[0], CHILDREN_PER_PROMOTION)
            return promotion
        while not schedule.queue:
            if not schedule.coarse_done:
                schedule.coarse_done = True
                if self.generate(write, "coarse", None, count=0) == 0:
                    return None
                continue
            parent = search.next_parent()
            if parent is None:
                return None
            if self.generate(write, "mutate", parent, CHILDREN_PER_PROMOTION) == 0:
                schedule.exhausted.append(parent.id)
        return search.by_id[schedule.queue.pop(0)], 0

    def apply_inbox(self, write: StepWrite) -> None:
        self._charge_clock()  # the time until now ran under the state before the commands
        files = sorted(self.paths.inbox.glob("*.json")) if self.paths.inbox.exists() else []
        for path in files:
            self.search.apply_command(write, json.loads(path.read_text()))
        self._consumed_inbox = files

    def plan(self, write: StepWrite) -> bool:
        """The step boundary: apply the inbox, then choose a job for each free device and store
        their intent in the same transaction as the step that ends here. False when the search
        is over."""
        self.apply_inbox(write)
        search, schedule = self.search, self.search.schedule
        schedule.inflight = [s for s in schedule.inflight
                             if not search.by_id[s[0]].vetoed]  # fmt: skip
        if schedule.state == "paused":
            return True
        reason = None if schedule.state == "stopped" else search.stop_reason()
        busy = {Slot.from_list(s).device for s in schedule.inflight}
        for device in range(self.device_count):
            if schedule.state != "running" or reason is not None:
                break
            if device in busy:
                continue
            if search.evaluations_unplanned() <= 0:
                break  # the evaluations in flight spend what is left: none overshoots
            job = self.next_job(write)
            if job is None:
                reason = None if schedule.inflight else "search space exhausted"
                break
            search.start_job(write, *job, device)
        if not schedule.inflight and schedule.state == "running":
            # not on a stop: compose the answer
            composite = specialists.compose(search, write, self.problem.input_specs)
            if composite is not None:
                search.start_job(write, *composite, 0)
        if self.awaiting_devices():
            return True
        self.census_answer(write)
        search.finish(write, reason)
        return False

    def census_answer(self, write: StepWrite) -> None:
        """Before the search ends, its answer is censused: every kernel that its forward calls
        launch at every target size, seen in the GPU's launch records (one ncu run costs about
        as much as dozens of timed evaluations: the answer gets it, not every passing leader). A
        candidate the census rejects leaves the ranking, and the next best is censused."""
        search = self.search
        for _ in range(CENSUS_TRIES):
            best = search.best()
            if best is None or best.census is not None:
                return
            found = EvalResult(True)
            labels = search.ladder[-1].size_labels
            self.backend.census(self.problem, best.source, labels, found)
            best.census = found.census or {"status": "unavailable", "sizes": list(labels),
                                           "why": f"no census on {self.backend.name}"}  # fmt: skip
            spent = search.ledger.charge_census(best.rung, found.gpu_seconds)
            search.ledger.charge_device(0, spent)  # the census runs on device 0's backend
            best.census["gpu_seconds"] = spent
            best.gpu_seconds += spent
            write.candidates.append(best)
            why = f" ({best.census['why']})" if best.census.get("why") else ""
            line = f"{best.id}: kernel census at {', '.join(labels)}: {best.census['status']}"
            search.event(write, "census", line + why, best.id)
            if found.passed:
                return
            search.reject_answer(write, best, found)

    # -- the loop ----------------------------------------------------------------------------------

    def awaiting_devices(self) -> bool:
        """Whether the search waits on the devices: evaluations are planned while it runs, or
        were handed out already (a pause or a stop lets those finish). Paused or stopped, the
        intent of one that the machine failed stays stored, unhanded, for when it goes on."""
        schedule = self.search.schedule
        return bool(schedule.inflight) and (schedule.state == "running" or bool(self._submitted))

    def dispatch(self) -> None:
        """Hand the devices the planned evaluations they do not have yet (after the commit that
        stored their intent: a run killed meanwhile plans them again), while the search runs."""
        if self.search.schedule.state != "running":
            return
        for stored in self.search.schedule.inflight:
            slot = Slot.from_list(stored)
            if slot.key not in self._submitted:
                self._submitted.add(slot.key)
                c = self.search.by_id[slot.cid]
                self.devices.submit(slot, self.problem, slot.eval_job(c.source))

    def step(self) -> bool:
        """Record the next evaluation to complete, plan the next for its device; one
        transaction. False when the search is over. A machine fault records nothing against
        the candidate: its evaluation stays planned, to be handed out again."""
        search, schedule = self.search, self.search.schedule
        if not self.awaiting_devices():  # paused, or nothing planned yet
            write = StepWrite()
            going = self.plan(write)
            if write.events or write.candidates:
                self.commit(write)
                self.after_commit()
            elif self.standing_paused() and (
                time.monotonic() - self._committed_at >= PAUSE_CHECKPOINT_SECONDS
            ):
                self.commit(write)  # nothing but the ledger's paused seconds changed
                self.publish()
            if going and not self.awaiting_devices():
                time.sleep(PAUSE_POLL_SECONDS)
                self._charge_clock()
            return going
        self.dispatch()
        done = self.devices.next_done()
        self._charge_clock()  # the wait ran under the state it had (a fault may pause it)
        self._submitted.discard(done.slot.key)
        write = StepWrite()
        for note in done.notes:
            search.event(write, "rerun", note, done.slot.cid)
        stored = done.slot.to_list()
        if stored in schedule.inflight and done.result.not_the_candidates:
            search.machine_fault(write, done.slot, done.result, self.paths.name)
        elif stored in schedule.inflight:  # else vetoed while it ran: nothing to record
            schedule.inflight.remove(stored)
            schedule.device_clock[done.slot.device] = done.finish
            c = search.by_id[done.slot.cid]
            search.record_result(write, c, done.slot.rung, done.result, done.slot.device)
            schedule.step += 1
        going = self.plan(write)
        self.commit(write)
        self.after_commit()
        return going

    def start(self) -> None:
        """Restore the published files and log the (re)start."""
        search, schedule = self.search, self.search.schedule
        publish.rewrite_events(self.paths, self.store.events())
        since = schedule.step - 1  # what the last step committed may not have been published
        recent = set(self.store.evaluated_since(since))
        recent |= {c.id for c in search.population[-50:] if c.created_step >= since}
        republished = [search.by_id[i] for i in sorted(recent)]
        publish.republish_details(self.paths, self.store, republished)
        self.paths.reference.write_text(self.problem.source)
        write = StepWrite()
        if schedule.state in ("finished", "stopped"):
            schedule.state = "running"  # it finishes again at once if nothing is left
        kind = "resumed" if schedule.step or search.population else "started"
        note = " (took over the lock of a killed engine)" if self.lock.was_stale else ""
        if schedule.state == "paused" and schedule.pause_reason:  # the machine's pause, not the
            schedule.state, schedule.pause_reason = "running", None  # user's: resume goes on
            note += " (paused by machine faults before: the search goes on)"
        sizes = self.problem.interpreter_note(self.backend.name)
        note += f"; {sizes}" if sizes else ""
        search.event(write, kind, f"engine {kind} on {self.backend.name}{note}")
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
        return self.search.schedule.state

    def close(self) -> None:
        """End every device's backend (and the evaluations still running there)."""
        self.devices.close()
