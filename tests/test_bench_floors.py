"""Bytes, FLOPs and floors of the built-in problems at full size, against counts done by hand."""

import pytest

from engine.bench.floors import floor_ms, size_work
from engine.problems import load_problem

# The H200's ceilings (DESIGN.md), so the floors below can be checked by hand.
CEILINGS = {
    "copy_bytes_per_s": 4.27e12, "fp32_flops_per_s": 51e12, "tf32_flops_per_s": 360e12,
    "fp16_flops_per_s": 661e12,
}  # fmt: skip
F32, F16 = 4, 2


def work_of(problem: str, label: str):
    p = load_problem(problem)
    return size_work(p, p.size(label))


def test_rmsnorm_moves_its_tensor_twice_and_is_memory_bound():
    w = work_of("rmsnorm", "full0")  # 112x64x512x512
    elements = 112 * 64 * 512 * 512
    assert elements * F32 == 7_516_192_768
    assert w.bytes == 2 * elements * F32
    assert w.matmul_flops == 0
    # pow and mean on every element, add and sqrt on the 64x smaller rms, divide on every element
    assert w.other_flops == 3 * elements + 2 * elements // 64
    assert floor_ms(w, CEILINGS, "fp32") == pytest.approx(2 * 7.516192768e9 / 4.27e12 * 1e3)


def test_softmax_floor():
    w = work_of("softmax", "full0")  # 4096x393216
    elements = 4096 * 393216
    assert w.bytes == 2 * elements * F32
    assert w.other_flops == 5 * elements
    assert floor_ms(w, CEILINGS, "fp32") == pytest.approx(w.bytes / 4.27e12 * 1e3)


def test_matvec_counts_matrix_vector_and_output():
    w = work_of("matvec", "full0")  # (2048, 1048576) @ (1048576, 1)
    m, k = 2048, 1048576
    assert w.bytes == (m * k + k + m) * F32
    assert (w.matmul_flops, w.other_flops) == (2 * m * k, 0)
    assert floor_ms(w, CEILINGS, "fp32") == pytest.approx(w.bytes / 4.27e12 * 1e3)


def test_linear_relu_div_is_compute_bound_at_each_precision():
    w = work_of("linear_relu_div", "full0")  # x (1024, 8192), 8192 -> 8192 with bias
    b, k, n = 1024, 8192, 8192
    assert w.bytes == (b * k + n * k + n + b * n) * F32
    assert w.matmul_flops == 2 * b * n * k
    assert w.other_flops == 2 * b * n  # relu, divide
    strict = 2 * b * n * k / 51e12 + 2 * b * n / 51e12
    assert floor_ms(w, CEILINGS, "fp32") == pytest.approx(strict * 1e3)
    tf32 = 2 * b * n * k / 360e12 + 2 * b * n / 51e12
    assert floor_ms(w, CEILINGS, "tf32") == pytest.approx(tf32 * 1e3)


@pytest.mark.parametrize(
    "label, n, c, hw, groups",
    [("full0", 32, 256, 56, 32), ("full1", 32, 128, 112, 128), ("full2", 16, 512, 28, 64)],
)
def test_groupconv_counts(label, n, c, hw, groups):
    w = work_of("groupconv", label)
    weight = c * (c // groups) * 3 * 3
    assert w.bytes == (2 * n * c * hw * hw + weight) * F32
    # 2 * N * Cout * Hout * Wout * Cin/groups * kh * kw (padding 1 keeps H and W)
    assert w.matmul_flops == 2 * n * c * hw * hw * (c // groups) * 9
    expected = max(w.bytes / 4.27e12, w.matmul_flops / 51e12)
    assert floor_ms(w, CEILINGS, "fp32") == pytest.approx(expected * 1e3)


@pytest.mark.parametrize(
    "label, b, h, s, d, size, precision, ceiling",
    [
        ("full2", 8, 16, 4096, 128, F16, "fp16", 661e12),
        ("full3", 32, 32, 512, 64, F32, "fp32", 51e12),
    ],
)
def test_sdpa_counts(label, b, h, s, d, size, precision, ceiling):
    w = work_of("sdpa", label)
    assert w.input_dtype == ("float16" if size == F16 else "float32")
    assert w.bytes == 4 * b * h * s * d * size  # q, k, v and the output
    assert w.matmul_flops == 4 * b * h * s * s * d
    expected = max(w.bytes / 4.27e12, w.matmul_flops / ceiling)
    assert floor_ms(w, CEILINGS, precision) == pytest.approx(expected * 1e3)
