"""Successive halving, noise-aware pruning and the score, on real population records."""

import pytest

from engine.records import Candidate, RungResult
from engine.search import scheduler
from engine.search.scheduler import RungIndex


def cand(seq, rung_results, status="alive", pinned=False):
    c = Candidate(
        id=f"c{seq:04d}",
        seq=seq,
        sha256=str(seq),
        parent=None,
        origin="s",
        params={},
        note="",
        source="",
        created_step=0,
        rung=max(rung_results),
        status=status,
        pinned=pinned,
    )
    for rung, (speedup, half_width, samples) in rung_results.items():
        c.results[rung] = RungResult(
            speedup, speedup, speedup - half_width, speedup + half_width, 0.01, samples
        )
    return c


def promote(pop, top_rung=2):
    return scheduler.next_promotion(RungIndex(pop), [c for c in pop if c.pinned], top_rung)


def test_top_third_is_promoted_best_first():
    pop = [cand(i, {0: (1.0 + i * 0.5, 0.01, 10)}) for i in range(6)]
    c, rung = promote(pop)
    assert (c.id, rung) == ("c0005", 1)
    c.rung, c.status = 1, "evaluating"  # it left rung 0
    c2, _ = promote(pop)
    assert c2.id == "c0004"  # quota of 6 // 3 = 2
    c2.rung, c2.status = 1, "evaluating"
    assert promote(pop) is None


def test_no_promotion_before_eta_candidates_are_measured():
    pop = [cand(i, {0: (2.0, 0.01, 10)}) for i in range(2)]
    assert promote(pop) is None


def test_higher_rungs_are_served_first():
    low = [cand(i, {0: (1.0 + i, 0.01, 10)}) for i in range(3)]
    high = [cand(10 + i, {0: (5.0, 0.01, 10), 1: (4.0 + i, 0.01, 30)}) for i in range(3)]
    c, rung = promote(low + high)
    assert rung == 2 and c.id == "c0012"


def test_near_tie_favours_less_measured_even_across_the_cutoff():
    a = cand(1, {0: (2.00, 0.10, 100)})
    b = cand(2, {0: (1.95, 0.10, 10)})  # overlaps a, fewer samples, but ranked second
    others = [cand(3 + i, {0: (1.0, 0.01, 10)}) for i in range(1)]
    c, _ = promote([a, b, *others])  # quota 1: b wins the near-tie
    assert c.id == "c0002"


def test_prune_only_when_confidently_worse():
    leaders = [cand(i, {0: (3.0, 0.05, 10)}) for i in range(3)]
    clearly_worse = cand(10, {0: (1.0, 0.05, 10)})
    noisy_worse = cand(11, {0: (2.5, 0.6, 10)})  # interval reaches the cutoff's
    pinned_worse = cand(12, {0: (0.9, 0.05, 10)}, pinned=True)
    pop = [*leaders, clearly_worse, noisy_worse, pinned_worse]
    assert [c.id for c in scheduler.prunable(RungIndex(pop), rung=0)] == ["c0010"]


def test_pinned_candidate_may_climb_regardless_of_rank():
    pop = [cand(i, {0: (3.0, 0.01, 10)}) for i in range(2)]
    pop.append(cand(9, {0: (0.5, 0.01, 10)}, pinned=True))
    c, rung = promote(pop)
    assert c.id == "c0009" and rung == 1


def test_index_stays_sorted_and_forgets_removed():
    pop = [cand(i, {0: (float(i % 5), 0.01, 10)}) for i in range(20)]
    index = RungIndex([])
    for c in pop:
        index.add(c, 0)
    scores = [c.results[0].score for c in index.measured(0)]
    assert scores == sorted(scores, reverse=True)
    index.remove(pop[4])
    assert pop[4] not in index.measured(0) and len(index.measured(0)) == 19


@pytest.mark.parametrize("n,expected", [(0, 0), (2, 0), (3, 1), (8, 2), (9, 3)])
def test_quota(n, expected):
    assert scheduler.quota(n) == expected


def test_an_answer_the_census_rejected_stays_out_of_the_ranking_on_resume():
    pop = [
        cand(i, {0: (1.0 + i, 0.01, 10), 2: (1.0 + i, 0.01, 100)}, status="done") for i in (1, 2)
    ]
    pop[1].status, pop[1].census = "rejected", {"status": "rejected", "sizes": ["a"]}
    index = RungIndex(pop)
    assert index.measured(2) == [pop[0]] and index.measured(0) == [pop[0]]
