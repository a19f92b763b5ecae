"""Loading problems: the built-ins, and a clear error for each way a problem file can be broken."""

import textwrap
from pathlib import Path

import pytest
import torch

from engine.problems import ProblemError, builtin_names, load_problem

GOOD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""


def write(tmp_path, text: str):
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_builtins_have_sizes_tolerance_and_replaced_ops():
    assert builtin_names() == [
        "groupconv", "linear_relu_div", "matvec", "rmsnorm", "sdpa", "softmax",
    ]  # fmt: skip
    for name in builtin_names():
        problem = load_problem(name)
        assert problem.tier("tiny") and problem.full, name
        assert problem.tolerance is not None, name
        assert problem.replaces, name
    assert load_problem("sdpa").tolerance["fp16"] == 5e-3


def test_a_kernelbench_file_loads(tmp_path):
    problem = load_problem(write(tmp_path, GOOD))
    assert problem.replaces == ("relu",)
    assert problem.output_specs["default"] == [([4, 4], "float32")]
    assert problem.tolerance is None


def test_a_file_is_loaded_once_per_process_until_it_changes(tmp_path):
    """A bench loads each file for its plan, its session and its search: the second load is the
    first's Problem; an edited file is loaded again, and a file broken since raises again."""
    path = write(tmp_path, GOOD)
    first = load_problem(path)
    assert load_problem(path) is first
    assert load_problem(path, "tf32") is not first  # another policy: another problem
    Path(path).write_text(textwrap.dedent(GOOD).replace("torch.relu(x)", "torch.sigmoid(x)"))
    assert load_problem(path).replaces == ("sigmoid",)
    Path(path).write_text("import not_a_module_kb\n")
    for _ in range(2):
        with pytest.raises(ProblemError, match="ModuleNotFoundError"):
            load_problem(path)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s.replace("def get_inputs", "def get_inputz"), "missing `get_inputs`"),
        (lambda s: s.replace("class Model", "class Modle"), "missing `Model`"),
        (lambda s: "import not_a_module_kb\n" + s, "ModuleNotFoundError"),
        (lambda s: s.replace("return [torch.randn(4, 4)]", "raise ValueError('no data')"),
         "ValueError: no data"),
        (lambda s: s.replace("return torch.relu(x)", "return 3"), "must return a tensor"),
        (lambda s: s.replace("def forward(self, x):", "def forward(self, x)"), "syntax error"),
        (lambda s: s.replace("class Model(nn.Module)", "class Model"), "subclass of torch.nn"),
    ],
)  # fmt: skip
def test_malformed_file_has_a_clear_error(tmp_path, change, words):
    path = write(tmp_path, change(GOOD))
    with pytest.raises(ProblemError, match="problem.py") as info:
        load_problem(path)
    assert words in str(info.value)


def test_unknown_name():
    with pytest.raises(ProblemError, match="give a built-in name"):
        load_problem("no_such_problem")


@pytest.mark.parametrize(
    ("patches", "replaced", "computes"),
    [
        ("x.unfold(2, 4, 4).unfold(3, 4, 4)", False, False),  # a view of the image's patches
        ("torch.nn.functional.unfold(x, 4, stride=4)", True, True),  # im2col copies and gathers
    ],
)
def test_tensor_unfold_is_a_view_and_the_functional_unfold_computes(
    tmp_path, patches, replaced, computes
):
    """A vision transformer cuts its image into patches with Tensor.unfold: ModelNew may do the
    same (a view), while F.unfold stays the operator a problem that calls it replaces."""
    from engine.gate.correctness import CandidateRejected
    from engine.gate.torch_use import check_torch_use
    from engine.runner.guards import guarded_call

    source = GOOD.replace("torch.relu(x)", f"({patches}).sum()").replace("(4, 4)", "(1, 2, 8, 8)")
    problem = load_problem(write(tmp_path, source))
    assert ("unfold" in problem.replaces) == replaced and "sum" in problem.replaces

    class Patches(torch.nn.Module):
        def forward(self, x):
            return eval(patches).contiguous()

    _, ops = guarded_call(Patches(), [torch.randn(1, 2, 8, 8)], "nan")
    if computes:
        with pytest.raises(CandidateRejected, match="torch_compute|computed with torch"):
            check_torch_use(ops, replaced=frozenset({"sum"}), allowed=frozenset())
    else:
        check_torch_use(ops, replaced=frozenset({"sum"}), allowed=frozenset())
