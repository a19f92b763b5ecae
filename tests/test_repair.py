"""The parser/repair step on real reply texts: which block it takes, what it fixes, what it
rejects; the repaired softmax candidates then pass the policy gate on the cpu backend."""

from __future__ import annotations

import ast
import textwrap

import pytest
from llm_server import (
    GARBAGE_REPLY,
    GOOD_REPLY,
    MISSING_IMPORTS_REPLY,
    PROSE_AND_FENCES_REPLY,
    SOFTMAX_KERNEL,
    WRONG_SIGNATURE_REPLY,
)

from engine.cli.check import gate
from engine.generate.repair import REASONS, extract_candidate
from engine.problems import load_problem


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


@pytest.fixture(scope="module")
def linear():
    return load_problem("linear_relu_div")  # __init__(self, in_features, out_features, divisor=2.0)


@pytest.fixture(scope="module")
def matvec():
    return load_problem("matvec")  # forward(self, a, b)


def parameters(source: str, method: str) -> list[str]:
    cls = next(n for n in ast.parse(source).body if getattr(n, "name", None) == "ModelNew")
    func = next(n for n in cls.body if getattr(n, "name", None) == method)
    return [a.arg for a in [*func.args.args, *func.args.kwonlyargs]]


def body_lines(source: str, method: str) -> list[str]:
    cls = next(n for n in ast.parse(source).body if getattr(n, "name", None) == "ModelNew")
    func = next(n for n in cls.body if getattr(n, "name", None) == method)
    return [ast.unparse(stmt) for stmt in func.body]


def fence(code: str) -> str:
    return f"```python\n{textwrap.dedent(code)}```\n"


def test_a_good_reply_is_taken_as_it_is(softmax):
    source, repairs, rejection = extract_candidate(GOOD_REPLY, softmax)
    assert (source, repairs, rejection) == (SOFTMAX_KERNEL, [], None)


def test_the_block_with_modelnew_and_a_kernel_is_picked_among_prose_and_fences(softmax):
    source, repairs, rejection = extract_candidate(PROSE_AND_FENCES_REPLY, softmax)
    assert rejection is None
    assert source == SOFTMAX_KERNEL  # not the bash block, not the draft without a kernel
    assert repairs == ["took code block 2 of 2 (the one defining ModelNew)"]


def test_missing_imports_are_added_at_the_top(softmax):
    source, repairs, rejection = extract_candidate(MISSING_IMPORTS_REPLY, softmax)
    assert rejection is None
    assert source == SOFTMAX_KERNEL
    assert repairs == [
        "added `import torch`, `import torch.nn as nn`, `import triton`, "
        "`import triton.language as tl`"
    ]


def test_imports_go_after_the_module_docstring_and_future_imports(softmax):
    reply = fence(
        '''\
        """A module docstring."""
        from __future__ import annotations
        import torch

        class ModelNew(nn.Module):
            def forward(self, x):
                return helper[(1,)](x, math.pi)
        '''
    )
    source, repairs, _ = extract_candidate(reply, softmax)
    lines = source.splitlines()
    assert lines[:5] == [
        '"""A module docstring."""',
        "from __future__ import annotations",
        "import math",
        "import torch.nn as nn",
        "import torch",
    ]
    assert repairs == ["added `import math`, `import torch.nn as nn`"]


def test_a_wrong_forward_signature_takes_models_and_binds_the_old_names(softmax):
    source, repairs, rejection = extract_candidate(WRONG_SIGNATURE_REPLY, softmax)
    assert rejection is None
    assert parameters(source, "forward") == ["self", "x"]
    assert body_lines(source, "forward")[:3] == ["inp = x", "scale = 1.0", "x = inp.contiguous()"]
    assert repairs == [
        "ModelNew.forward: took Model's parameters (self, x: torch.Tensor); "
        "`inp` is now Model's `x`; `scale` fixed to its default 1.0"
    ]


def test_constructor_parameters_are_renamed_and_completed_with_models_defaults(linear):
    reply = fence(
        '''\
        class ModelNew(nn.Module):
            def __init__(self, in_f, out_f):
                """Weights like nn.Linear."""
                super().__init__()
                self.linear = nn.Linear(in_f, out_f)

            def forward(self, x):
                return kernel[(1,)](x)
        '''
    )
    source, repairs, rejection = extract_candidate(reply, linear)
    assert rejection is None
    assert parameters(source, "__init__") == ["self", "in_features", "out_features", "divisor"]
    assert body_lines(source, "__init__")[:3] == [
        "'Weights like nn.Linear.'",  # the docstring stays first
        "in_f = in_features",
        "out_f = out_features",
    ]
    assert "divisor: float=2.0" in source
    assert repairs[0].startswith("ModelNew.__init__: took Model's parameters")


def test_a_missing_constructor_is_added_when_model_takes_arguments(linear):
    reply = fence(
        """\
        class ModelNew(nn.Module):
            def forward(self, x):
                return kernel[(1,)](x)
        """
    )
    source, repairs, rejection = extract_candidate(reply, linear)
    assert rejection is None
    assert parameters(source, "__init__") == ["self", "in_features", "out_features", "divisor"]
    assert body_lines(source, "__init__") == ["super().__init__()"]
    assert repairs[0].startswith("added ModelNew.__init__(self, in_features: int")


def test_reordered_parameters_are_put_in_models_order_without_rebinding(matvec):
    reply = fence(
        """\
        class ModelNew(nn.Module):
            def forward(self, b, a):
                return kernel[(1,)](a, b)
        """
    )
    source, _, rejection = extract_candidate(reply, matvec)
    assert rejection is None
    assert parameters(source, "forward") == ["self", "a", "b"]
    assert body_lines(source, "forward") == ["return kernel[1,](a, b)"]


def test_star_args_are_bound_to_models_arguments(matvec):
    reply = fence(
        """\
        class ModelNew(nn.Module):
            def forward(self, *inputs, **options):
                a, b = inputs
                return kernel[(1,)](a, b)
        """
    )
    source, _, rejection = extract_candidate(reply, matvec)
    assert rejection is None
    assert parameters(source, "forward") == ["self", "a", "b"]
    assert body_lines(source, "forward")[:2] == ["inputs = (a, b)", "options = {}"]


def test_non_ascii_text_and_indented_fences_keep_the_edits_in_place(softmax):
    reply = (
        "1. The kernel:\n\n   ```python\n"
        + textwrap.indent(
            textwrap.dedent(
                '''\
            class ModelNew(nn.Module):  # größer ist besser
                def forward(self, eingabe, name="größe"):
                    """Schnell: ∑ über Zeilen."""
                    return kernel[(1,)](eingabe, name)
            '''
            ),
            "   ",
        )
        + "   ```\n"
    )
    source, _, rejection = extract_candidate(reply, softmax)
    assert rejection is None
    assert "def forward(self, x: torch.Tensor):" in source
    assert body_lines(source, "forward")[1:3] == ["eingabe = x", "name = 'größe'"]


def test_an_extra_required_parameter_is_unrepairable(softmax):
    reply = fence(
        """\
        class ModelNew(nn.Module):
            def forward(self, x, weight):
                return kernel[(1,)](x, weight)
        """
    )
    source, _, rejection = extract_candidate(reply, softmax)
    assert source is None
    assert rejection["reason"] == "unrepairable_signature"
    assert "`weight`" in rejection["message"] and "no default" in rejection["message"]


def test_a_one_line_def_cannot_be_adapted(softmax):
    reply = fence(
        """\
        class ModelNew(nn.Module):
            def forward(self, inp): return kernel[(1,)](inp)
        """
    )
    _, _, rejection = extract_candidate(reply, softmax)
    assert rejection["reason"] == "unrepairable_signature"
    assert "one line" in rejection["message"]


def test_a_bare_reply_without_fences_loses_its_prose(softmax):
    reply = f"Sure! Here is the code.\n\n{SOFTMAX_KERNEL}\nThis should be fast.\n"
    source, repairs, rejection = extract_candidate(reply, softmax)
    assert rejection is None
    assert source.strip() == SOFTMAX_KERNEL.strip()
    assert repairs == ["dropped the prose around the unfenced code"]


def test_an_unclosed_fence_is_used_when_its_code_is_complete(softmax):
    source, repairs, rejection = extract_candidate(f"```python\n{SOFTMAX_KERNEL}", softmax)
    assert rejection is None and source == SOFTMAX_KERNEL
    assert repairs == ["took the code of an unclosed fence (the reply was cut short)"]


def test_a_reply_cut_short_mid_code_is_a_syntax_error(softmax):
    truncated = (
        "```python\n" + SOFTMAX_KERNEL[: SOFTMAX_KERNEL.index("rows, cols")] + "softmax_rows[("
    )
    source, _, rejection = extract_candidate(truncated, softmax)
    assert source is None
    assert rejection["reason"] == "syntax_error"
    assert rejection["message"].startswith("the code defining ModelNew does not parse: line ")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (GARBAGE_REPLY, "no_code"),
        ("```bash\nnvidia-smi\n```", "no_code"),
        (fence("import torch\n\ndef softmax(x):\n    return x\n"), "no_modelnew"),
        (
            fence("class ModelNew(nn.Module):\n    def __init__(self):\n        pass\n"),
            "no_modelnew",
        ),
    ],
)
def test_replies_without_a_candidate_are_rejected_with_a_reason(softmax, reply, reason):
    source, _, rejection = extract_candidate(reply, softmax)
    assert source is None
    assert rejection["reason"] == reason and reason in REASONS
    assert rejection["message"]


@pytest.mark.parametrize(
    "reply",
    [GOOD_REPLY, PROSE_AND_FENCES_REPLY, MISSING_IMPORTS_REPLY, WRONG_SIGNATURE_REPLY],
    ids=["good", "prose_and_fences", "missing_imports", "wrong_signature"],
)
def test_repaired_softmax_replies_pass_the_policy_gate_on_cpu(softmax, backend, reply):
    source, _, rejection = extract_candidate(reply, softmax)
    assert rejection is None
    result = gate(softmax, source, backend, seed=7)
    assert result.passed, f"{result.reason}: {result.message}"
