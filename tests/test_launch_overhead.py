"""The kernel library's launchers on the host: the plain helpers that replace Triton's constexpr
functions and torch's broadcast_shapes give what those give, and the launch-overhead benchmark
times every launcher with the kernels stubbed, then leaves the library as it was."""

import pytest
import torch
import triton
from model_kernels_checks import assert_matches, layout_only

from engine.benchmarks import launch_overhead
from hints.model_kernels import elementwise
from hints.model_kernels.common import kb_broadcast_shapes, kb_cdiv, kb_next_power_of_2


def test_the_plain_helpers_give_what_triton_and_torch_give():
    assert [kb_next_power_of_2(n) for n in range(2050)] == [
        triton.next_power_of_2(n) for n in range(2050)
    ]
    assert all(kb_cdiv(a, b) == triton.cdiv(a, b) for a in range(200) for b in range(1, 20))
    for shapes in [((2, 1, 3), (4, 1)), ((), (5,)), ((1,), (1, 1)), ((7, 1), (7, 3), (1, 3))]:
        assert kb_broadcast_shapes(*shapes) == torch.broadcast_shapes(*shapes)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        kb_broadcast_shapes((2, 3), (4, 3))


def test_the_benchmark_times_each_launcher_and_leaves_the_library_as_it_was(capsys):
    launch_overhead.main(["--calls", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == list(launch_overhead.cases())
    assert all(float(line.split(": ")[1].removesuffix(" us")) > 0 for line in lines)
    x = torch.randn(3, 5)
    assert_matches(layout_only(elementwise.kb_relu, x), torch.relu(x))  # kernels launch again
