"""New contents at new addresses for the timed input sets: the judge (whose inputs may have any
layout) and the runner (whose copies are contiguous) end with the same values."""

import torch

from engine.runner.fresh_inputs import InputRotation, roll_into


def test_a_roll_is_the_same_in_any_layout_and_never_the_identity():
    x = torch.randn(6, 5)
    for shift in (0, 29, 30, 1 << 29):
        contiguous, strided = torch.empty_like(x), torch.empty(5, 6).t()
        roll_into(contiguous, x, shift)
        roll_into(strided, x.t().contiguous().t(), shift)
        assert torch.equal(contiguous, strided)
        assert not torch.equal(contiguous, x)


def test_every_float_input_moves_and_changes_at_every_rotation():
    judge_sets = [[torch.randn(4, 8).t(), torch.arange(3)] for _ in range(2)]
    runner_sets = [[a.contiguous(), b.clone()] for a, b in judge_sets]
    judge, runner = InputRotation(judge_sets), InputRotation(runner_sets)
    for shift in (5, 123, 77):
        before = [(s[0].data_ptr(), s[0].clone(), s[1].data_ptr()) for s in runner_sets]
        judge.shift(shift)
        runner.shift(shift)
        for (pointer, contents, int_pointer), j, r in zip(before, judge_sets, runner_sets,
                                                          strict=True):  # fmt: skip
            assert r[0].data_ptr() != pointer and (r[0] != contents).all()
            assert r[1].data_ptr() == int_pointer  # integer inputs (indices) are left alone
            assert torch.equal(j[0], r[0])
    assert len(runner.spares) == 1  # one buffer more than the sets, whatever the rotations
