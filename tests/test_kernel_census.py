"""The kernel census: the kernels a profiled forward call launched, as Nsight Compute recorded
them on the H200, must be the candidate's own Triton kernels (or torch's fills and copies)."""

from pathlib import Path

import pytest

from engine.backends.local import _reject_foreign_kernels
from engine.gate.correctness import CandidateRejected
from engine.gate.kernel_census import check_kernel_census, triton_kernel_names
from engine.jobs import EvalResult
from engine.problems import load_problem
from engine.profiler.csvparse import parse_raw
from engine.profiler.ncu import diagnose_range

DATA = Path(__file__).parent / "data" / "ncu"
UNSEEN = Path(__file__).parent / "problems_unseen"
CANDIDATE = (DATA / "rmsnorm_candidate.py").read_text()


@pytest.fixture(scope="module")
def recorded():
    """The diagnosis of the recorded launch, as the profiling rung gets it."""
    raw = parse_raw((DATA / "h200_rmsnorm_raw.csv").read_text())
    return diagnose_range(raw, (DATA / "h200_rmsnorm_details.csv").read_text(), None)


def with_kernels(profile: dict, *names: str) -> dict:
    return {**profile, "kernels": [*profile["kernels"], *({"name": n} for n in names)]}


def test_the_candidates_own_triton_kernel_passes(recorded):
    assert [k["name"] for k in recorded["kernels"]] == ["kb_rmsnorm_dim1"]
    assert "kb_rmsnorm_dim1" in triton_kernel_names(CANDIDATE)
    check_kernel_census(recorded, CANDIDATE, frozenset())


def test_a_kernel_the_candidate_does_not_define_is_work_outside_triton(recorded):
    renamed = CANDIDATE.replace("kb_rmsnorm_dim1", "kb_rmsnorm_other")
    with pytest.raises(CandidateRejected) as caught:
        check_kernel_census(recorded, renamed, frozenset())
    assert caught.value.reason == "torch_compute"
    assert "kb_rmsnorm_dim1" in caught.value.message


def test_library_kernels_are_rejected_but_torch_fills_and_copies_pass(recorded):
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()"
    copy = "void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda(...)>(int)"
    check_kernel_census(with_kernels(recorded, fill, copy), CANDIDATE, frozenset())
    gemm = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1"
    with pytest.raises(CandidateRejected, match="sm90_xmma_gemm"):
        check_kernel_census(with_kernels(recorded, gemm), CANDIDATE, frozenset())


def test_allowed_torch_ops_admit_library_kernels_and_no_profile_judges_nothing(recorded):
    gemm = with_kernels(recorded, "sm90_xmma_gemm_f32f32_tn")
    check_kernel_census(gemm, CANDIDATE, frozenset({"mm"}))
    check_kernel_census({"status": "unavailable", "why": "no ncu"}, CANDIDATE, frozenset())


def test_random_draws_pass_only_where_the_model_draws_too(recorded):
    """KernelBench's LSTM draws its initial state with torch.randn in forward; a rewrite that
    keeps its code launches torch's random-number kernel, as the Model does. The backend's
    census takes the problem's word for it."""
    randn = with_kernels(recorded, "void at::<unnamed>::distribution_elementwise_grid_stride_kernel"
                         "<float, 4, void at::native::templates::cuda::normal_and_transform>()")
    noisy = load_problem(str(UNSEEN / "noisy_linear.py"))
    assert noisy.draws_random
    passed = EvalResult(True)
    assert _reject_foreign_kernels(randn, CANDIDATE, noisy, passed) and passed.passed
    rejected = EvalResult(True)
    assert not _reject_foreign_kernels(randn, CANDIDATE, load_problem("rmsnorm"), rejected)
    assert rejected.reason == "torch_compute" and "distribution_elementwise" in rejected.message
