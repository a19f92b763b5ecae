"""The static half of the gate: rules read from the candidate's syntax tree, no worker."""

from pathlib import Path

import pytest

from engine.gate.precision import (
    gate_tolerance,
    infer_precision,
    problem_tolerance,
)
from engine.gate.static import static_check
from engine.problems import load_problem

CANDIDATES = Path(__file__).parent / "candidates"
VALID = (CANDIDATES / "softmax_valid.py").read_text()


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


def with_forward_line(line: str, header: str = "") -> str:
    """The valid softmax with `line` run first in forward and `header` added to the imports."""
    source = VALID.replace(
        "        x = x.contiguous()\n", f"        {line}\n        x = x.contiguous()\n", 1
    )
    return header + "\n" + source if header else source


def test_valid_candidate_passes(softmax):
    assert static_check(softmax, VALID) is None


def test_syntax_error_names_the_line(softmax):
    rejection = static_check(softmax, VALID + "\ndef broken(:\n")
    assert rejection.reason == "syntax_error"
    assert "line 31" in rejection.message


def test_missing_modelnew(softmax):
    rejection = static_check(softmax, VALID.replace("class ModelNew", "class Model2"))
    assert rejection.reason == "missing_modelnew"


@pytest.mark.parametrize(
    "old, new",
    [
        ("def forward(self, x: torch.Tensor)", "def forward(self, inp: torch.Tensor)"),
        ("def forward(self, x: torch.Tensor)", "def forward(self)"),
        ("def __init__(self):", "def __init__(self, dim):"),
    ],
)
def test_signature_mismatch(softmax, old, new):
    rejection = static_check(softmax, VALID.replace(old, new))
    assert rejection.reason == "signature_mismatch"
    assert "Model." in rejection.message


def test_extra_parameter_with_default_is_accepted(softmax):
    source = VALID.replace("def forward(self, x: torch.Tensor)", "def forward(self, x, block=None)")
    assert static_check(softmax, source) is None


def test_no_kernel_and_kernel_never_launched(softmax):
    no_kernel = VALID.replace("@triton.jit\n", "")
    assert static_check(softmax, no_kernel).reason == "no_triton_kernel"
    never = VALID.replace(
        "softmax_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))", "pass"
    )
    rejection = static_check(softmax, never)
    assert rejection.reason == "no_triton_kernel"
    assert "never launched" in rejection.message


@pytest.mark.parametrize(
    "line, header",
    [
        ("x = torch.softmax(x, dim=1)", ""),
        ("x = torch.nn.functional.softmax(x, dim=1)", ""),
        ("x = Fx.softmax(x, dim=1)", "import torch.nn.functional as Fx"),
        ("x = smax(x, 1)", "from torch import softmax as smax"),
        ("x = lsm(x, 1)", "from torch.nn.functional import log_softmax as lsm"),
        ("x = x.softmax(1)", ""),
        ("fn = torch.Tensor.softmax", ""),
        ("x = getattr(torch, 'softmax')(x, 1)", ""),
    ],
)
def test_calls_replaced_operator(softmax, line, header):
    rejection = static_check(softmax, with_forward_line(line, header))
    assert rejection.reason == "calls_replaced_operator", rejection
    assert "line" in rejection.message


@pytest.mark.parametrize("line", ["x = torch.divide(x, 2.0)", "x = torch.true_divide(x, 2.0)"])
def test_another_name_of_a_replaced_operator_is_that_operator(line):
    """Attack: linear_relu_div replaces `div`; torch's aliases of it are the same operator."""
    problem = load_problem("linear_relu_div")
    source = with_forward_line(line).replace(
        "def __init__(self):", "def __init__(self, in_features, out_features):"
    )
    rejection = static_check(problem, source)
    assert rejection is not None and rejection.reason == "calls_replaced_operator", rejection
    assert "div" in rejection.message


def test_triton_dot_and_weight_modules_are_not_replaced_calls():
    problem = load_problem("linear_relu_div")
    source = (CANDIDATES / "softmax_valid.py").read_text()
    source = source.replace(
        "e = tl.exp(x)", "e = tl.exp(x)\n    e = tl.dot(e[None, :], e[:, None])"
    )
    source = source.replace("def __init__(self):", "def __init__(self, in_features, out_features):")
    source = source.replace(
        "super().__init__()", "super().__init__()\n        self.linear = nn.Linear(in_features, 4)"
    )
    assert static_check(problem, source) is None


@pytest.mark.parametrize(
    "line, header",
    [
        ("pass", "import subprocess"),
        ("os.system('ls')", "import os"),
        ("p = os.popen('id')", "import os"),
        ("os.abort()", "import os"),
        ("pass", "from os import execv"),
        ("pass", "import socket"),
        ("pass", "from multiprocessing import Process"),
        ("pass", "import urllib.request"),
        ("pass", "import numpy"),
        ("m = __import__('socket')", ""),
        ("eval('1 + 1')", ""),
        ("exec('x = 1')", ""),
        ("open('/tmp/out', 'w')", ""),
        ("m = sys.modules['os']", "import sys"),
        ("f = getattr(torch, 'soft' + 'max')", ""),
        ("cls = ().__class__.__bases__", ""),
        ("torch.utils.cpp_extension.load_inline('m', '')", ""),
        ("op = torch.ops.aten._softmax", ""),
        ("x = torch._C._nn.gelu(x)", ""),
        ("torch.backends.cuda.matmul.allow_tf32 = True", ""),
        ("f = torch.compile(lambda t: t)", ""),
        ("f = torch.cuda.jiterator._create_jit_fn('')", ""),
        ("f = torch.cuda._compile_kernel", ""),
        ("f = functools.reduce(getattr, ['runtime', 'build'], triton)", "import functools"),
        ("f = operator.attrgetter('runtime.build')(triton)", "import operator"),
    ],
)
def test_forbidden(softmax, line, header):
    rejection = static_check(softmax, with_forward_line(line, header))
    assert rejection.reason == "forbidden_import", (line, rejection)
    assert rejection.message.startswith("line ")


@pytest.mark.parametrize(
    "line, header",
    [
        ("pass", "import ctypes"),
        ("pass", "import importlib"),
        ("lib = torch.ctypes.CDLL(None)", ""),  # torch imported ctypes: the same module
        ("c = torch.cuda.memory.ctypes", ""),
        ("m = triton.runtime.build.compile_module_from_src('', 'm')", ""),
        ("pass", "from triton.runtime.build import _build"),
        ("pass", "from triton.runtime import build"),
        ("f = getattr(triton.runtime.build, 'compile_so_from_src')", ""),
        ("rt = triton.runtime\n        rt.build.compile_module_from_file('x.c', 'm')", ""),
        ("u = triton.runtime.driver.active.utils", ""),
        ("f = triton.runtime.driver.active.utils.load_binary", ""),
        ("d = driver", "from triton.runtime import driver"),
        ("triton.knobs.build.impl = print", ""),
        ("c = triton.compiler.compile", ""),
        ("pass", "import triton._C.libtriton"),
        ("pass", "from triton.backends.nvidia import driver"),
    ],
)
def test_native_code_and_tritons_build_internals_are_refused(softmax, line, header):
    """Issue 35: Triton's build, driver, loader and compiler internals, and ctypes, cffi and the
    import machinery by any path or attribute name (`torch.ctypes` passed before)."""
    rejection = static_check(softmax, with_forward_line(line, header))
    assert rejection is not None and rejection.reason == "native_code", (line, rejection)
    assert rejection.message.startswith("line ")


@pytest.mark.parametrize(
    "line, header",
    [
        ("p = triton.runtime.driver.active.utils.get_device_properties(0)", ""),
        (
            "p = driver.active.utils.get_device_properties(0)['max_shared_mem']",
            "from triton.runtime import driver",
        ),  # fmt: skip
        ("t = triton.runtime.driver.active.get_current_target()", ""),
        ("d = triton.runtime.driver.active.get_active_torch_device()", ""),
        ("pass", "from triton.compiler.errors import CompilationError"),
    ],
)
def test_tritons_device_queries_and_exceptions_are_allowed(softmax, line, header):
    assert static_check(softmax, with_forward_line(line, header)) is None


def test_harmless_os_and_math_are_allowed(softmax):
    source = with_forward_line(
        "debug = os.environ.get('KB_DEBUG') and math.pi", "import math\nimport os"
    )
    assert static_check(softmax, source) is None


@pytest.mark.parametrize(
    "kernel_line, dtype, expected",
    [
        ("c = tl.dot(a, b)", "float32", "tf32"),
        ("c = tl.dot(a, b, input_precision='ieee')", "float32", "fp32"),
        ("c = tl.dot(a, b, allow_tf32=False)", "float32", "fp32"),
        ("c = tl.dot(a, b, input_precision='tf32x3')", "float32", "tf32x3"),
        ("c = a + b", "float32", "fp32"),
        ("c = tl.dot(a.to(tl.float16), b.to(tl.float16))", "float32", "fp16"),
        ("c = tl.dot(a, b)", "float16", "fp16"),
        ("c = tl.dot(a, b)", "bfloat16", "bf16"),
        ("c = tl.cast(a, tl.bfloat16)", "float32", "bf16"),
        ("c = a.half()", "float32", "fp16"),
        ("c = torch.empty(4, dtype=torch.float16)", "float32", "fp16"),
        # dtypes named but not converted to: a table from torch's to Triton's, a test of dtype
        ("TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}", "float32", "fp32"),
        ("low = a.dtype in (torch.float16, torch.bfloat16)", "float32", "fp32"),
    ],
)
def test_infer_precision(kernel_line, dtype, expected):
    source = f"import triton.language as tl\ndef k(a, b):\n    {kernel_line}\n"
    assert infer_precision(source, dtype) == expected


def test_a_dot_precision_given_by_name_is_followed_to_its_launch_and_constant():
    source = (
        'import triton.language as tl\nKB_DOT_PRECISION = "ieee"\n'
        "def k(a, b, PRECISION: tl.constexpr):\n"
        "    return tl.dot(a, b, input_precision=PRECISION)\n"
        "def launch(a, b):\n    k[(1,)](a, b, PRECISION=KB_DOT_PRECISION)\n"
    )
    assert infer_precision(source) == "fp32"
    assert infer_precision(source.replace('"ieee"', '"tf32x3"')) == "tf32x3"
    unbound = source.replace("PRECISION=KB_DOT_PRECISION", "PRECISION=choose()")
    assert infer_precision(unbound) == "tf32"  # not followed: TF32, tl.dot's default on fp32


def test_tolerance_by_precision_and_pytorch_error():
    spec = load_problem("linear_relu_div").tolerance
    assert problem_tolerance(spec, "tf32") == 2e-3
    assert problem_tolerance(spec, "fp16") == 0.0  # not declared: PyTorch's error decides
    assert gate_tolerance(spec, "strict", "float32", "fp32", torch_error=1e-4) == 2e-4
    assert gate_tolerance(1e-3, "strict", "float16", "fp16", torch_error=1e-7) == 1e-3


def test_pytorch_error_counts_as_at_least_one_rounding_of_the_output():
    # 4 outputs whose fp32 roundings PyTorch happened to get nearly exact
    assert gate_tolerance(None, "strict", "float32", "fp32", torch_error=1e-9) == 2 * 2.0**-24
    assert gate_tolerance(None, "strict", "float16", "fp16", torch_error=0.0) == 2 * 2.0**-11
    assert gate_tolerance(None, "strict", "int64", "fp32", torch_error=0.0) == 0.0  # exact


@pytest.mark.parametrize(
    "policy, dtype, precision, expected",
    [
        ("strict", "float32", "tf32", 1e-5),  # judged as fp32 whatever its instructions
        ("strict", "float32", "tf32x3", 1e-5),
        ("strict", "float32", "fp32", 1e-5),
        ("tf32", "float32", "tf32", 2e-3),  # the problem's tolerance for TF32
        ("tf32", "float32", "fp32", 1e-5),
    ],
)
def test_strict_judges_fp32_inputs_by_the_fp32_tolerance(policy, dtype, precision, expected):
    spec = load_problem("linear_relu_div").tolerance
    assert gate_tolerance(spec, policy, dtype, precision, torch_error=1e-9) == expected


def test_setup_code_may_use_the_replaced_operator(softmax):
    """Swin's ModelNew builds its logit scale with `torch.log` in __init__, as its Model does:
    setup is not the work being replaced (what forward reaches is checked at run time,
    test_gate_candidates.py::test_an_operator_bound_in_setup_and_called_in_forward_is_refused)."""
    source = VALID.replace(
        "super().__init__()",
        "super().__init__()\n        self.scale = torch.softmax(torch.ones(4), 0)",
    )
    assert static_check(softmax, source) is None
    assert static_check(softmax, with_forward_line("x = torch.softmax(x, 1)")) is not None


def test_a_model_of_many_operators_counts_as_their_roundings():
    """A correct fp32 rewrite of a 73-operator vision transformer measured 4.3 roundings where
    PyTorch measured 2: the floor grows with the square root of the operators, and TF32's error
    (about 1e-4) stays far beyond it."""
    u = 2.0**-24
    assert gate_tolerance(None, "strict", "float32", "fp32", 2 * u, operators=64) == 2 * 8 * u
    assert gate_tolerance(None, "strict", "float32", "fp32", 1e-5, operators=64) == 2e-5
    assert gate_tolerance(None, "strict", "float32", "fp32", 2 * u, operators=73) < 1.1e-6
    assert load_problem("rmsnorm").operators == 5  # pow, mean, add, sqrt, div


def test_the_judge_is_told_the_operators_of_the_model():
    from engine.backends.local import LocalBackend

    backend = LocalBackend("cpu")
    try:
        request = backend.judge_request(load_problem("rmsnorm"), VALID, [])
    finally:
        backend.close()
    assert request.operators == 5
