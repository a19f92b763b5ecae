"""The default ladder of fidelity rungs. Every rung times every target shape: a cheap rung that
timed another shape (the smallest, say: latency-bound where the targets are bandwidth-bound) would
rank candidates by the wrong quantity, and no number of repetitions fixes a biased proxy.

rung 0  race:    every full size, 1 warm-up, 5 repetitions, 1 input set. Cheap enough to look at
                 every candidate; the reference is timed interleaved so the speedup is measured in
                 the same conditions. When rung 1 disagrees with its ranking, the scheduler raises
                 its repetitions (engine.search.fidelity).
rung 1  compare: every full size, 20 repetitions, 2 input sets, and one Nsight Compute profile
                 (on the largest size) whose diagnosis guides the mutations of the survivors:
                 once per strategy, and only while profiles hold at most a quarter of the
                 GPU-seconds spent (engine.search.state.PROFILE_SHARE).
rung 2  confirm: every full size, 100 repetitions, 4 input sets. Only the best reach it; its
                 numbers are the ones a result reports.

On the cpu backend the sizes are the problem's tiny ones (timings there mean nothing and are
labelled so) and the repetitions are cut, since the interpreter is slow.
"""

from __future__ import annotations

from engine.jobs import RungSpec
from engine.problems import Problem


def default_ladder(problem: Problem, backend: str) -> list[RungSpec]:
    sizes = problem.tier("tiny") if backend == "cpu" else problem.full
    if not sizes:
        sizes = list(problem.sizes)
    labels = tuple(s.label for s in sizes)
    if backend == "cpu":
        return [
            RungSpec(0, labels, warmup=1, reps=3, input_sets=1),
            RungSpec(1, labels, warmup=1, reps=5, input_sets=2, profile=True),
            RungSpec(2, labels, warmup=1, reps=8, input_sets=2),
        ]
    return [
        RungSpec(0, labels, warmup=1, reps=5, input_sets=1),
        RungSpec(1, labels, warmup=5, reps=20, input_sets=2, profile=True),
        RungSpec(2, labels, warmup=10, reps=100, input_sets=4),
    ]
