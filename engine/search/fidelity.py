"""Whether rung 0 ranks as rung 1 does, and how hard rung 0 looks when it does not.

Rung 0 is a cheap proxy: few repetitions at every target shape. It pays only while it ranks
candidates the way rung 1's more careful measurement does. Each time a candidate is measured at
rung 1, it is compared with every other candidate measured at both rungs: a pair counts when
rung 1's intervals decide it (they do not overlap), and agrees when rung 0's speedups order the
pair the same way. While the agreement over enough decided pairs stays below AGREEMENT_FLOOR,
rung 0's fidelity is raised a level at a time (twice the repetitions, one more input set, up to
the top rung's: a flat search at worst) and the count starts again.

Audit promotions hedge the quota's own bias: every AUDIT_EVERY promotions out of rung 0, one goes
to a waiting candidate outside the quota, drawn at random, so rung 1 sees candidates that rung 0
ranked low, and a proxy that buries good kernels shows in the agreement.
"""

from __future__ import annotations

from dataclasses import replace

from engine.jobs import RungSpec
from engine.records import Candidate

AGREEMENT_FLOOR = 0.75  # Kendall's tau of 0.5 over the decided pairs
MIN_DECIDED_PAIRS = 10
AUDIT_EVERY = 6


def decided_pairs(c: Candidate, others: list[Candidate]) -> tuple[int, int]:
    """(agreeing, decided) over the pairs of `c` with `others` measured at rungs 0 and 1."""
    agree = decided = 0
    mine = c.results[1]
    for o in others:
        if o is c or 0 not in o.results:
            continue
        theirs = o.results[1]
        if mine.low > theirs.high or theirs.low > mine.high:
            decided += 1
            rung1_says = mine.speedup > theirs.speedup
            agree += rung1_says == (c.results[0].speedup > o.results[0].speedup)
    return agree, decided


def rung0_spec(base: RungSpec, top: RungSpec, level: int) -> RungSpec:
    """Rung 0 raised `level` times: twice the repetitions and one more input set a level, never
    past the top rung's; at the last level the top rung's fidelity (a flat search)."""
    if level >= max_level(base, top):
        return replace(top, index=0, profile=False)
    return replace(
        base,
        warmup=min(top.warmup, base.warmup * 2**level),
        reps=min(top.reps, base.reps * 2**level),
        input_sets=min(top.input_sets, base.input_sets + level),
    )


def max_level(base: RungSpec, top: RungSpec) -> int:
    """Levels until rung 0's repetitions reach the top rung's."""
    level = 0
    while base.reps * 2**level < top.reps:
        level += 1
    return level
