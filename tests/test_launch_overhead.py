"""The kernel library's launchers on the host: the plain helpers that replace Triton's constexpr
functions and torch's broadcast_shapes give what those give, and the launch-overhead benchmark
times every launcher with the kernels stubbed, then leaves the library as it was."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
from model_kernels_checks import assert_matches, layout_only

from engine.benchmarks import launch_overhead
from hints.model_kernels import elementwise
from hints.model_kernels.common import kb_broadcast_shapes, kb_cdiv, kb_next_power_of_2

ROOT = Path(__file__).resolve().parent.parent


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


@pytest.mark.slow  # a process of its own (compile-only mode stays), two kernels compiled for sm_90
def test_a_whole_models_call_counts_its_launches_on_the_host(tmp_path):
    """--model: a file's first proposal for a GPU on meta tensors, its kernels compiled for sm_90
    and then only looked up: a linear layer with its ReLU fused, then another, is two launches."""
    problem = tmp_path / "two_linear.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)\n\n"
        "    def forward(self, x):\n        return self.fc2(torch.relu(self.fc1(x)))\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 16)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "engine.benchmarks.launch_overhead", "--model", str(problem),
         "--calls", "20"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
             "TRITON_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("two_linear: 2 launches, ") and line.endswith(" us a launch)"), line
    assert float(line.split(", ")[1].split(" ms")[0]) > 0
