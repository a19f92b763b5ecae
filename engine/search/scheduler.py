"""Asynchronous successive halving with noise-aware pruning, computed from stored records.

At each rung, the best 1/eta of the candidates measured there may climb to the next rung (eta = 3).
Ranking is by score; among candidates whose speedup intervals overlap (a near-tie) the one with
fewer samples at that rung goes first, so a lucky measurement cannot lock out a less-measured
rival.
A candidate is pruned only when its whole interval lies below the interval of the rung's cutoff
(the last candidate inside the top 1/eta): worse with confidence, not merely on a point estimate.
Pinned candidates are never pruned and may always climb.

Per-shape specialists: where a rung times several shapes, the candidate with the best speedup at
a shape (ties to the older) leads that shape; once the rung has a quota at all, a leader may climb
although its geometric mean is outside the quota, and it is never pruned while it leads. A
composite of leaders (engine.generate.composite) dispatches to them and leads nothing itself.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from operator import attrgetter

from engine.generate.composite import ORIGIN as COMPOSITE
from engine.records import Candidate

ETA = 3


def quota(n_measured: int, eta: int = ETA) -> int:
    return n_measured // eta


class RungIndex:
    """The candidates measured at each rung, best score first; rebuilt from records on resume
    and kept sorted as results arrive, so a step costs O(log n) here rather than a sort."""

    def __init__(self, population: list[Candidate]):
        self.items: dict[int, list[Candidate]] = {}
        self.leaders: dict[int, dict[str, Candidate]] = {}  # rung -> size label -> its leader
        for c in population:
            left = c.vetoed or (c.census or {}).get("status") == "rejected"  # as they were removed
            if not left:
                for rung in c.results:
                    self.add(c, rung)

    @staticmethod
    def rank(rung: int):
        return lambda c: (-c.results[rung].score, c.seq)

    def add(self, c: Candidate, rung: int) -> None:
        items = self.items.setdefault(rung, [])
        items.insert(bisect.bisect_left(items, self.rank(rung)(c), key=self.rank(rung)), c)
        self._lead(c, rung)

    def _lead(self, c: Candidate, rung: int) -> None:
        if c.origin == COMPOSITE:
            return
        leaders = self.leaders.setdefault(rung, {})
        for label, (speedup, *_) in c.results[rung].shapes.items():
            held = leaders.get(label)
            if held is None or (speedup, -c.seq) > (held.results[rung].shapes[label][0], -held.seq):
                leaders[label] = c

    def remove(self, c: Candidate) -> None:
        for rung in c.results:
            items = self.items.get(rung, [])
            at = bisect.bisect_left(items, self.rank(rung)(c), key=self.rank(rung))
            if at < len(items) and items[at] is c:
                del items[at]
            if any(held is c for held in self.leaders.get(rung, {}).values()):
                self.leaders[rung] = {}
                for other in items:
                    self._lead(other, rung)

    def measured(self, rung: int) -> list[Candidate]:
        return self.items.get(rung, [])

    def position(self, c: Candidate, rung: int) -> int:
        """Where `c` stands in the rung's ranking (it must be measured there)."""
        return bisect.bisect_left(self.measured(rung), self.rank(rung)(c), key=self.rank(rung))


def first_in_rank(by_score: Iterable[Candidate], rung: int) -> Candidate:
    """The first of a score-ordered sequence once near-ties are settled: among the leader and
    those whose intervals overlap the leader's, the one with fewer samples at the rung (then the
    better score, the older). Reads the sequence only as far as the leader's near-ties."""
    ordered = iter(by_score)
    first = next(ordered)
    leader = first.results[rung]
    ties = [first]
    for c in ordered:
        if c.results[rung].high < leader.low:
            break
        ties.append(c)
    return min(ties, key=less_measured(rung))


def waiting(c: Candidate, rung: int) -> bool:
    return c.status == "alive" and c.rung == rung


def less_measured(rung: int):
    """Order of near-ties: fewer samples at the rung first, then the better score, the older."""
    return lambda c: (c.results[rung].samples, -c.results[rung].score, c.seq)


def quota_split(index: RungIndex, rung: int, k: int) -> tuple[int, list[Candidate]]:
    """The best k of the rung, as (how many of its ranking lie clearly above the cutoff, the
    near-ties of the cutoff that fill the rest). Near-ties are the candidates whose intervals
    overlap the cutoff's; they are settled less-measured first, so a near-tie at the cutoff goes
    to the one with fewer samples. A count, not a copy: rung 0's quota holds thousands."""
    by_score = index.measured(rung)
    if k == 0 or k >= len(by_score):
        return min(k, len(by_score)), []
    cutoff = by_score[k - 1].results[rung]
    first = k - 1
    while first > 0 and by_score[first - 1].results[rung].low <= cutoff.high:
        first -= 1
    last = k
    while last < len(by_score) and by_score[last].results[rung].high >= cutoff.low:
        last += 1
    return first, sorted(by_score[first:last], key=less_measured(rung))[: k - first]


def specialists(index: RungIndex, rung: int) -> list[Candidate]:
    """The leaders of the rung's shapes, oldest first; none where the rung times one shape."""
    leaders = index.leaders.get(rung, {})
    if len(leaders) < 2:
        return []
    return sorted({id(c): c for c in leaders.values()}.values(), key=lambda c: c.seq)


def specialty(index: RungIndex, c: Candidate, rung: int) -> str:
    """Why `c` may climb from `rung` although outside the quota: the shapes it leads there; or
    empty when the quota holds it (or it is pinned)."""
    leading, straddling = quota_split(index, rung, quota(len(index.measured(rung))))
    if c.pinned or index.position(c, rung) < leading or any(c is o for o in straddling):
        return ""
    leads = [label for label, held in index.leaders.get(rung, {}).items() if held is c]
    return f" (a specialist: leads at {', '.join(leads)})" if leads else ""


def promotable_in_rank(index: RungIndex, rung: int, eta: int = ETA) -> Iterator[Candidate]:
    """Waiting candidates among the best 1/eta of the rung, and (once the rung has a quota) the
    waiting leaders of its shapes, best score first; lazily, since a promotion reads only the
    head of a quota that holds thousands at rung 0 of a long search."""
    rank = RungIndex.rank(rung)
    by_score = index.measured(rung)
    k = quota(len(by_score), eta)
    leading, straddling = quota_split(index, rung, k)
    chosen = (c for c in islice(by_score, leading) if waiting(c, rung))
    near_ties = sorted((c for c in straddling if waiting(c, rung)), key=rank)
    leaders = [c for c in specialists(index, rung) if waiting(c, rung)] if k else []
    extra = [c for c in leaders if index.position(c, rung) >= leading
             and not any(c is other for other in near_ties)]  # fmt: skip
    return heapq.merge(chosen, near_ties, sorted(extra, key=rank), key=rank)


def promotable(index: RungIndex, rung: int, eta: int = ETA) -> list[Candidate]:
    """promotable_in_rank, all of it."""
    return list(promotable_in_rank(index, rung, eta))


def outside_quota(index: RungIndex, rung: int, eta: int = ETA) -> list[Candidate]:
    """The waiting candidates of the rung that are not promotable, oldest first: what an audit
    promotion draws from."""
    by_score = index.measured(rung)
    k = quota(len(by_score), eta)
    leading, straddling = quota_split(index, rung, k)
    held = set(map(id, straddling)) | (set(map(id, specialists(index, rung))) if k else set())
    rest = islice(by_score, leading, None)
    # waiting(c, rung), inlined: this reads thousands of candidates at rung 0
    outside = [c for c in rest if c.status == "alive" and c.rung == rung and id(c) not in held]
    outside.sort(key=attrgetter("seq"))
    return outside


def next_promotion(index: RungIndex, pinned: list[Candidate], top_rung: int, eta: int = ETA):
    """The candidate to move up now and the rung it goes to, highest rungs first; or None."""
    for rung in range(top_rung - 1, -1, -1):
        for c in sorted(pinned, key=lambda c: c.seq):
            if waiting(c, rung):
                return c, rung + 1
        chosen = promotable_in_rank(index, rung, eta)
        head = next(chosen, None)
        if head is not None:
            return first_in_rank(chain([head], chosen), rung), rung + 1
    return None


def prunable(index: RungIndex, rung: int, eta: int = ETA) -> list[Candidate]:
    """Candidates waiting at `rung` whose interval lies wholly below the cutoff's, scanning from
    the worst score up to the first candidate that is not below (the rest may yet climb)."""
    measured = index.measured(rung)
    k = quota(len(measured), eta)
    if k == 0:
        return []
    leading, straddling = quota_split(index, rung, k)
    cutoff = (straddling[-1] if straddling else measured[leading - 1]).results[rung]
    leaders = set(map(id, specialists(index, rung)))
    out = []
    for c in reversed(measured):
        if c.results[rung].high >= cutoff.low:
            break
        if waiting(c, rung) and not c.pinned and id(c) not in leaders:
            out.append(c)
    return sorted(out, key=lambda c: c.seq)
