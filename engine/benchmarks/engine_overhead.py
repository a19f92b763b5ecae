"""Engine overhead per step and resume time with a large session, on the sim backend.

    python -m engine.benchmarks.engine_overhead [--candidates 10000] [--steps 200]

Overhead is a step's wall time minus the backend's evaluation time: scheduling, the step's
checkpoint transaction and publishing the snapshot. The session is filled with distinct
candidates measured at rung 0 (variants of the offline generator's sources), as a long search
would leave it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from engine.backends.devices import Slot
from engine.backends.sim import SIM_PACE_ENV
from engine.compose import create_session, resume_session
from engine.generate.base import Proposal
from engine.search.engine import Engine
from engine.session.settings import SessionSettings
from engine.session.store import StepWrite
from engine.session_files import SessionPaths

FILL_BATCH = 500  # candidates per transaction while filling the session


def fill(engine: Engine, count: int) -> None:
    """Add `count` distinct candidates and measure each at rung 0."""
    search = engine.search
    bases = [c.source for c in search.population] or [p.source for p in coarse(engine)]
    added = 0
    while added < count:
        write = StepWrite()
        batch = min(FILL_BATCH, count - added)
        proposals = [
            Proposal(f"{bases[i % len(bases)]}\n# variant {added + i}\n", "bench.variant", {}, "")
            for i in range(batch)
        ]
        search.admit(write, proposals, None)
        for cid in list(search.schedule.queue):
            search.schedule.queue.remove(cid)
            c = search.by_id[cid]
            job = Slot(c.id, 0, job=search.job_spec(c, 0)).eval_job(c.source)
            search.record_result(write, c, 0, engine.backend.evaluate(engine.problem, job))
        engine.commit(write)
        added += batch


def coarse(engine: Engine):
    from engine.generate.base import GenerationRequest

    request = GenerationRequest(engine.problem, "coarse", 0, engine.search.rng)
    return engine.generator.propose(request).proposals


class TimedBackend:
    """The sim backend, with the time spent inside it counted."""

    def __init__(self, backend):
        self.backend = backend
        self.name = backend.name
        self.profile_seconds = backend.profile_seconds
        self.seconds = 0.0

    def evaluate(self, problem, job):
        start = time.perf_counter()
        try:
            return self.backend.evaluate(problem, job)
        finally:
            self.seconds += time.perf_counter() - start

    def prepare(self, problem, sources, labels):
        self.backend.prepare(problem, sources, labels)

    def close(self):
        self.backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--problem", default="softmax")
    args = parser.parse_args()

    os.environ[SIM_PACE_ENV] = "0"  # evaluations at once: what is measured is the engine
    root = Path(tempfile.mkdtemp(prefix="kb-bench-"))
    paths = SessionPaths(root / "bench")
    create_session(paths, SessionSettings(args.problem, "sim", seed=0))
    engine = resume_session(paths)
    engine.start()
    t0 = time.perf_counter()
    fill(engine, args.candidates)
    print(f"filled {len(engine.search.population)} candidates in {time.perf_counter() - t0:.1f} s")

    engine.backend = engine.devices.backends[0] = TimedBackend(engine.backend)
    overheads = []
    for _ in range(args.steps):
        before = engine.backend.seconds
        start = time.perf_counter()
        if not engine.step():
            break
        overheads.append(time.perf_counter() - start - (engine.backend.seconds - before))
    engine.lock.release()
    engine.store.close()

    start = time.perf_counter()
    resumed = resume_session(paths)
    resumed.start()
    resumed.step()
    resume_s = time.perf_counter() - start
    resumed.lock.release()
    resumed.store.close()

    n = len(resumed.search.population)
    size_mb = paths.database.stat().st_size / 2**20
    ms = sorted(1000 * o for o in overheads)
    print(f"candidates in session:        {n}")
    print(f"steps timed:                  {len(ms)}")
    print(f"overhead per step, median:    {statistics.median(ms):.2f} ms (target <= 20 ms)")
    print(f"overhead per step, p90:       {ms[int(0.9 * (len(ms) - 1))]:.2f} ms")
    print(f"resume to first new step:     {resume_s:.2f} s (target <= 3 s)")
    print(
        f"state.duckdb size:            {size_mb:.1f} MiB ({size_mb / n * 1000:.2f} MiB per 1,000)"
    )
    print(f"session folder:               {paths.root}")


if __name__ == "__main__":
    main()
