"""Evaluations on several devices at once: one backend per device, each job on the device it
was planned for, the next job planned as a device frees up.

`Clocked`: each job is evaluated as it is submitted and completes at its start on its device's
clock plus the seconds it took (its `gpu_seconds`), jobs completing in that order. On sim that
is simulated time: a run is a function of its seed and device count, and resumes exactly. One
real device is clocked too: its jobs then run one at a time, in order, as they always did.

`Threaded` (several real devices): a thread per device evaluates its jobs; they complete in
wall-clock order.

A device whose worker is lost with a job (a Ray node gone: engine.backends.ray_fleet) raises
`DeviceLost`; the job is re-run there, up to RERUNS times, and `Done.notes` says so; past that
it is a machine fault.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

from engine.jobs import MACHINE_FAULT, EvalJob, EvalResult, RungSpec
from engine.problems import Problem

RERUNS = 3  # times one evaluation is re-run on a device that lost it


class DeviceLost(Exception):
    """The device's worker disappeared with the evaluation; it can be run again there."""


@dataclass(frozen=True)
class Slot:
    """One planned evaluation: candidate `cid` at `rung` on `device`, from `start` on the
    device's clock (simulated seconds; 0 where devices are threaded), with `job` the EvalJob's
    fields but its id and source, as decided when it was planned."""

    cid: str
    rung: int
    device: int = 0
    start: float = 0.0
    job: dict | None = None

    @property
    def key(self) -> tuple:
        return self.cid, self.rung, self.device, self.start

    def to_list(self) -> list:
        return [self.cid, self.rung, self.device, self.start, self.job]

    @classmethod
    def from_list(cls, stored: list) -> Slot:
        return cls(*stored)

    def eval_job(self, source: str) -> EvalJob:
        job = dict(self.job)
        rung = job.pop("rung")
        rung = RungSpec(**{**rung, "size_labels": tuple(rung["size_labels"])})
        return EvalJob(candidate_id=self.cid, source=source, rung=rung, **job)


@dataclass(frozen=True)
class Done:
    slot: Slot
    result: EvalResult
    finish: float  # on the device's clock (Clocked); 0 where devices are threaded
    notes: tuple[str, ...] = ()  # evaluations lost and re-run on the way, for the event log


def evaluate(backend, problem: Problem, job: EvalJob) -> tuple[EvalResult, tuple[str, ...]]:
    """The backend's result for `job`, re-run where the device lost it; and what was lost. Lost
    RERUNS + 1 times in a row, it is a machine fault (the search pauses on repeated ones)."""
    notes = []
    while True:
        try:
            return backend.evaluate(problem, job), tuple(notes)
        except DeviceLost as lost:
            if len(notes) == RERUNS:
                message = (f"the device lost the evaluation {RERUNS + 1} times in a row, last: "
                           f"{lost}; check the cluster's nodes")  # fmt: skip
                return EvalResult(False, MACHINE_FAULT, message), tuple(notes)
            notes.append(f"{job.candidate_id} at rung {job.rung.index} is re-run: {lost}")


class Clocked:
    def __init__(self, backends: list):
        self.backends = backends
        self._done: list[Done] = []

    def submit(self, slot: Slot, problem: Problem, job: EvalJob) -> None:
        result, notes = evaluate(self.backends[slot.device], problem, job)
        finish = slot.start + sum(result.gpu_seconds.values())
        self._done.append(Done(slot, result, finish, notes))

    def next_done(self) -> Done:
        first = min(self._done, key=lambda d: (d.finish, d.slot.device))
        self._done.remove(first)
        return first

    def close(self) -> None:
        for backend in reversed(self.backends):  # the first holds what the others share
            backend.close()


class Threaded:
    def __init__(self, backends: list):
        self.backends = backends
        self._done: queue.Queue = queue.Queue()
        self._queues = [queue.Queue() for _ in backends]
        for device, backend in enumerate(backends):
            threading.Thread(target=self._serve, args=(backend, self._queues[device]),
                             daemon=True, name=f"kb-device-{device}").start()  # fmt: skip

    def _serve(self, backend, jobs: queue.Queue) -> None:
        while (work := jobs.get()) is not None:
            slot, problem, job = work
            try:
                result, notes = evaluate(backend, problem, job)
                self._done.put(Done(slot, result, 0.0, notes))
            except Exception as exc:  # the engine's to raise, as one device would
                self._done.put(exc)

    def submit(self, slot: Slot, problem: Problem, job: EvalJob) -> None:
        self._queues[slot.device].put((slot, problem, job))

    def next_done(self) -> Done:
        done = self._done.get()
        if isinstance(done, Exception):
            raise done
        return done

    def close(self) -> None:
        for jobs in self._queues:
            jobs.put(None)
        for backend in reversed(self.backends):  # the first holds what the others share
            backend.close()


def devices_for(backends: list):
    """Clocked on sim and for a single device, threaded for several real ones."""
    if backends[0].name == "sim" or len(backends) == 1:
        return Clocked(backends)
    return Threaded(backends)
