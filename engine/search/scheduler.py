"""Asynchronous successive halving with noise-aware pruning, computed from stored records.

At each rung, the best 1/eta of the candidates measured there may climb to the next rung (eta = 3).
Ranking is by score; candidates whose speedup intervals overlap (a near-tie) are ordered
less-measured first, so a lucky screen cannot lock out a candidate that has had fewer samples.
A candidate is pruned only when its whole interval lies below the interval of the rung's cutoff
(the last candidate inside the top 1/eta): worse with confidence, not merely on a point estimate.
Pinned candidates are never pruned and may always climb.
"""

from __future__ import annotations

from engine.search.population import Candidate

ETA = 3


def measured_at(population: list[Candidate], rung: int) -> list[Candidate]:
    return [c for c in population if rung in c.results and not c.vetoed]


def ranked(candidates: list[Candidate], rung: int) -> list[Candidate]:
    """Best first; within a run of overlapping intervals, the less-measured first."""
    by_score = sorted(candidates, key=lambda c: (-c.results[rung].score, c.seq))
    out: list[Candidate] = []
    cluster: list[Candidate] = []
    for c in by_score:
        if cluster and c.results[rung].high < min(x.results[rung].low for x in cluster):
            out += sorted(cluster, key=lambda x: (x.samples, -x.results[rung].score, x.seq))
            cluster = []
        cluster.append(c)
    out += sorted(cluster, key=lambda x: (x.samples, -x.results[rung].score, x.seq))
    return out


def quota(n_measured: int, eta: int = ETA) -> int:
    return n_measured // eta


def next_promotion(population: list[Candidate], top_rung: int, eta: int = ETA):
    """The candidate to move up now and the rung it goes to, highest rungs first; or None."""
    for rung in range(top_rung - 1, -1, -1):
        measured = measured_at(population, rung)
        waiting = [c for c in measured if c.status == "alive" and c.rung == rung]
        pinned = [c for c in waiting if c.pinned]
        if pinned:
            return min(pinned, key=lambda c: c.seq), rung + 1
        for c in ranked(measured, rung)[: quota(len(measured), eta)]:
            if c.status == "alive" and c.rung == rung:
                return c, rung + 1
    return None


def prunable(population: list[Candidate], rung: int, eta: int = ETA) -> list[Candidate]:
    """Alive candidates at `rung` that are confidently worse than the rung's cutoff."""
    measured = measured_at(population, rung)
    k = quota(len(measured), eta)
    if k == 0:
        return []
    cutoff = ranked(measured, rung)[k - 1].results[rung]
    return [
        c
        for c in measured
        if c.status == "alive"
        and c.rung == rung
        and not c.pinned
        and c.results[rung].high < cutoff.low
    ]
