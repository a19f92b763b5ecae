"""The judge's reference bank: computed once per input set and reused, checked before each use,
within its memory caps; and the session's seed pools that make reuse possible."""

from pathlib import Path

import pytest
import torch

from engine.backends.local import CHECK_POOL, RECHECK_POOL, LocalBackend, job_seeds, seed_pools
from engine.gate.correctness import compute_reference
from engine.jobs import EvalJob, RungSpec
from engine.problems import load_problem
from engine.runner.cuda_share import driver_error
from engine.worker.failures import judge_ran_out_of_memory
from engine.worker.reference_bank import JUDGES_PER_GPU, ReferenceBank

CANDIDATES = Path(__file__).parent / "candidates"


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def counted(seed: int, calls: list):
    """compute() for the bank: the softmax reference of a seeded input, counting its calls."""

    def compute():
        calls.append(seed)
        torch.manual_seed(seed)
        return compute_reference(Softmax(), [torch.randn(8, 64)])

    return compute


def test_a_reference_is_computed_once_and_reused():
    bank, calls = ReferenceBank("cpu"), []
    first = bank.get(("p", 1), counted(1, calls))
    again = bank.get(("p", 1), counted(1, calls))
    other = bank.get(("p", 2), counted(2, calls))
    assert calls == [1, 2] and bank.counts["hits"] == 1 and bank.counts["misses"] == 2
    assert torch.equal(first.ref64[0], again.ref64[0])
    assert not torch.equal(first.inputs[0], other.inputs[0])


def test_a_banked_reference_changed_in_place_is_recomputed_not_used():
    bank, calls = ReferenceBank("cpu"), []
    banked = bank.get(("p", 1), counted(1, calls))
    truth = banked.ref64[0].clone()
    banked.ref64[0].mul_(2.0)  # a judge bug, or memory a runner could reach
    again = bank.get(("p", 1), counted(1, calls))
    assert calls == [1, 1] and bank.counts["corrupt"] == 1
    assert torch.equal(again.ref64[0], truth)


def test_the_least_recently_used_references_go_when_the_bank_is_full():
    one = counted(0, [])().ref64[0]
    entry_bytes = 8 * 64 * (4 + 8 + 4)  # the input copy, the float64 reference, torch's output
    assert one.numel() == 8 * 64
    bank, calls = ReferenceBank("cpu", device_bytes=4 * entry_bytes), []
    for seed in (1, 2, 3, 4, 1, 5):  # 1 is used again before 5 arrives: 2 is the one to go
        bank.get(("p", seed), counted(seed, calls))
    assert calls == [1, 2, 3, 4, 5] and bank.counts["dropped"] == 1
    assert list(bank.entries) == [("p", 3), ("p", 4), ("p", 1), ("p", 5)]
    bank.get(("p", 2), counted(2, calls))
    assert calls == [1, 2, 3, 4, 5, 2]


def test_a_reference_larger_than_a_quarter_of_the_bank_is_not_kept():
    entry_bytes = 8 * 64 * (4 + 8 + 4)
    bank, calls = ReferenceBank("cpu", device_bytes=3 * entry_bytes), []
    bank.get(("p", 1), counted(1, calls))
    bank.get(("p", 1), counted(1, calls))
    assert calls == [1, 1] and not bank.entries


def test_references_leave_the_device_while_it_is_short_of_its_reserve():
    """Other processes' use counts: a bank keeps nothing on a device below its reserve (four
    judges' banks filled an H200 under bench --jobs 4), and banks again once memory is back."""
    free = {"bytes": 10}
    bank = ReferenceBank("cpu", free_bytes=lambda: free["bytes"], reserve_bytes=100)
    calls = []
    bank.get(("p", 1), counted(1, calls))
    assert not bank.entries and bank.counts["dropped"] == 1
    free["bytes"] = 1000
    bank.get(("p", 1), counted(1, calls))
    bank.get(("p", 1), counted(1, calls))
    assert calls == [1, 1] and list(bank.entries) == [("p", 1)]
    free["bytes"] = 10  # another judge filled the device: the next store makes room
    bank.get(("p", 2), counted(2, calls))
    assert not bank.entries


def test_a_judge_short_of_memory_gives_its_banks_device_memory_back():
    bank, calls = ReferenceBank("cpu"), []
    bank.get(("p", 1), counted(1, calls))
    bank.drop_device_entries()
    assert not bank.entries and bank.counts["dropped"] == 1
    bank.get(("p", 1), counted(1, calls))
    assert calls == [1, 1]  # recomputed, not lost


def test_a_failed_device_allocation_reads_as_the_judges_own_out_of_memory():
    assert judge_ran_out_of_memory(driver_error("cuMemCreate", 2))
    assert not judge_ran_out_of_memory(driver_error("cuMemMap", 201))  # an invalid context
    assert not judge_ran_out_of_memory(RuntimeError("shape mismatch in the problem's forward"))


def test_candidates_draw_varied_subsets_of_one_pool_and_recheck_apart_from_it():
    rung = RungSpec(0, ("tiny",), warmup=1, reps=3)
    weights, checks, rechecks = seed_pools(7)
    drawn = [job_seeds(EvalJob(f"c{i}", "", rung, seed=1000 + i, session_seed=7)) for i in range(6)]
    assert {d[0] for d in drawn} == {weights}  # one set of weights for the session
    assert all(len(d[1]) == 3 and set(d[1]) <= set(checks) for d in drawn)
    assert len({tuple(d[1]) for d in drawn}) > 1  # not every candidate sees the same inputs
    assert all(d[2] in rechecks and d[2] not in checks for d in drawn)
    assert len(checks) == CHECK_POOL and seed_pools(8)[1] != checks
    later = job_seeds(EvalJob("c0", "", rung, seed=1000, check=False, session_seed=7))
    assert later[1] == []


@pytest.fixture(scope="module")
def backend():
    local = LocalBackend(device="cpu")
    yield local
    local.close()


def evaluate(backend, name: str, seed: int):
    rung = RungSpec(0, ("tiny",), warmup=1, reps=3, input_sets=1)
    job = EvalJob(name, (CANDIDATES / f"{name}.py").read_text(), rung, seed, session_seed=3)
    return backend.evaluate(load_problem("softmax"), job)


def test_the_judge_reuses_references_across_candidates_and_an_attack_cannot_poison_them(backend):
    """A candidate that writes into its inputs is rejected; the next candidates of the session,
    checked on input sets of the same pool, get banked references that still hold."""
    first = evaluate(backend, "softmax_valid", seed=11)
    assert first.passed and first.references["computed"] >= 3
    mutated = evaluate(backend, "softmax_mutates", seed=12)
    assert mutated.reason == "mutates_input"
    later = [evaluate(backend, "softmax_valid", seed=13 + i) for i in range(5)]
    assert all(r.passed for r in later), [r.message for r in later]
    results = [first, mutated, *later]
    computed = sum(r.references["computed"] for r in results)
    banked = sum(r.references["banked"] for r in results)
    # 3 checks and a re-check each: 25 references, at most one computation per pooled seed
    assert banked + computed == 1 + 4 * 6 and computed <= CHECK_POOL + RECHECK_POOL
    assert later[-1].gpu_seconds["reference"] > 0


def test_judges_sharing_a_device_split_the_banks_share(monkeypatch):
    alone = ReferenceBank("cpu").device_bytes
    monkeypatch.setenv(JUDGES_PER_GPU, "4")  # as `bench --jobs 4` sets it for its judges
    assert ReferenceBank("cpu").device_bytes == alone // 4
    monkeypatch.setenv(JUDGES_PER_GPU, "four")
    with pytest.raises(ValueError, match="give how many judges share a GPU"):
        ReferenceBank("cpu")
