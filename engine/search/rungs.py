"""The default ladder of fidelity rungs. Every rung times every target shape: a cheap rung that
timed another shape (the smallest, say: latency-bound where the targets are bandwidth-bound) would
rank candidates by the wrong quantity, and no number of repetitions fixes a biased proxy.

rung 0  race:    every full size, 1 warm-up, 5 repetitions, 1 input set. Cheap enough to look at
                 every candidate; the reference is timed interleaved so the speedup is measured in
                 the same conditions. When rung 1 disagrees with its ranking, the scheduler raises
                 its repetitions (engine.search.fidelity).
rung 1  compare: every full size, up to 20 repetitions (fewer once a size's speedup is known to
                 2%), 2 input sets, and one Nsight Compute profile (on the largest size) whose
                 diagnosis guides the mutations of the survivors: once per strategy, and only
                 while profiles hold at most a quarter of the GPU-seconds spent
                 (engine.search.state.PROFILE_SHARE).
rung 2  confirm: every full size, up to 100 repetitions (fewer once a size's speedup is known to
                 1%), 4 input sets. Only the best reach it; its numbers are the ones a result
                 reports.

A rung's repetitions are a ceiling (engine.timing.sequential; rung 0's five are below its
minimum of eight until the scheduler raises them, and then it stops at 2%): a size whose calls
vary little stops early, so the repetitions go to the noisy sizes, which are the cheap ones. With
100 of them at every size, a rung-2 evaluation of rmsnorm (7.5 GB in and out at its largest size)
cost 5.1 GPU-seconds on the H200, five rung-0 evaluations' worth (the README's search of
2026-12-04). Three warm-ups suffice at the top rungs: the kernels are compiled and loaded
before timing, and the search keeps the GPU busy.

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
        RungSpec(0, labels, warmup=1, reps=5, input_sets=1, precision=0.02),
        RungSpec(1, labels, warmup=3, reps=20, input_sets=2, profile=True, precision=0.02),
        RungSpec(2, labels, warmup=3, reps=100, input_sets=4, precision=0.01),
    ]
