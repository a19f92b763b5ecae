"""A KernelBench file without SIZES on the cpu backend: a tiny size derived from its constants,
said to the user, so that the interpreter finishes in seconds instead of never."""

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from engine.problems import load_problem
from engine.problems.loader import import_module_from
from engine.problems.sizing import MAX_ELEMENTS, MIN_ELEMENTS, input_elements

ROOT = Path(__file__).resolve().parent.parent
KERNELBENCH = ROOT / "tests" / "problems_kernelbench"


def test_a_file_without_sizes_gets_a_tiny_size_that_runs_and_keeps_its_own_as_full():
    problem = load_problem(str(KERNELBENCH / "softmax_no_sizes.py"))
    tiny, full = problem.tier("tiny"), problem.full
    assert [s.label for s in full] == ["default"] and problem.output_specs["default"] == [
        ([4096, 393216], "float32")
    ]
    assert len(tiny) == 1
    module = import_module_from(problem.path, "problem")
    assert MIN_ELEMENTS <= input_elements(module, tiny[0].params) <= MAX_ELEMENTS
    assert "batch_size 4096 -> " in problem.derived_tiny
    assert "dim 393216 -> " in problem.derived_tiny
    assert module.batch_size == 4096  # the module's own constants are left as they were


def test_small_constants_stay_and_a_grouped_convolution_still_runs():
    problem = load_problem(str(KERNELBENCH / "groupconv_no_sizes.py"))
    scaled = problem.tier("tiny")[0].params["module_globals"]
    assert "kernel_size" not in scaled and "groups" not in scaled
    assert scaled["in_channels"] % 3 == 0 and scaled["out_channels"] % 3 == 0
    ((shape, _),) = problem.output_specs["tiny"]
    assert shape[1] == scaled["out_channels"]


def test_a_channel_count_that_a_group_count_must_divide_keeps_its_value():
    problem = load_problem(str(KERNELBENCH / "level1" / "35_GroupNorm_.py"))
    scaled = problem.tier("tiny")[0].params["module_globals"]
    assert "features" not in scaled and scaled["batch_size"] < 112 and scaled["dim1"] < 512
    assert "features" not in problem.derived_tiny and "num_groups" not in problem.derived_tiny


def test_a_file_whose_scaled_version_cannot_run_keeps_only_its_own_size(tmp_path):
    path = tmp_path / "rigid.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn as nn

        batch_size = 64
        features = 4096

        class Model(nn.Module):
            def forward(self, x):
                return x.view(64, 4096).relu()  # the sizes are written into forward as well

        def get_inputs():
            return [torch.randn(batch_size, features)]

        def get_init_inputs():
            return []
    """)
    )
    problem = load_problem(str(path))
    assert [s.label for s in problem.sizes] == ["default"] and problem.derived_tiny == ""
    assert problem.interpreter_note("cpu") == ""


def test_check_on_cpu_says_so_and_passes_a_valid_kernel_at_the_derived_size():
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "check", str(KERNELBENCH / "softmax_no_sizes.py"),
         str(ROOT / "tests" / "candidates" / "softmax_online.py"), "--backend", "cpu",
         "--trust-candidates"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "declares no SIZES" in done.stdout and "batch_size 4096 -> " in done.stdout
    assert "passed" in done.stdout and "at tiny" in done.stdout


def test_sizes_written_into_get_inputs_are_cut_with_the_constants():
    problem = load_problem(
        str(KERNELBENCH / "level1" / "50_conv_standard_2D__square_input__square_kernel.py")
    )  # torch.rand(batch_size, 3, 224, 224): no cut of batch_size alone is small enough
    module = import_module_from(problem.path, "problem")
    assert MIN_ELEMENTS <= input_elements(module, problem.tier("tiny")[0].params) <= MAX_ELEMENTS
    assert "get_inputs' literal #1 224 -> " in problem.derived_tiny
    assert problem.output_specs["default"] == [([256, 96, 55, 55], "float32")]  # the file's own


def test_a_file_of_literal_sizes_alone_gets_a_tiny_size(tmp_path):
    path = tmp_path / "inline.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x, y):
                return torch.tanh(x) + y

        def get_inputs():
            return [torch.randn(4096, 8192), torch.randn(size=(4096, 8192))]

        def get_init_inputs():
            return []
    """)
    )
    problem = load_problem(str(path))
    ((shape, _),) = problem.output_specs["tiny"]
    assert shape[0] < 4096 and shape[1] < 8192
    assert problem.output_specs["default"] == [([4096, 8192], "float32")]


def test_a_classifier_sized_for_its_images_gets_its_own_images_at_a_small_batch(tmp_path):
    """KernelBench's VGG16 and MobileNetV1 run at 224x224 alone (a classifier sized for the last
    feature map) with a batch of 10, under the cut: without a tiny size the interpreter ran the
    full batch, and every gate check timed out."""
    path = tmp_path / "classifier.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn as nn

        batch_size = 10
        num_classes = 1000

        class Model(nn.Module):
            def __init__(self, num_classes):
                super().__init__()
                self.features = nn.Conv2d(3, 8, 3, stride=4, padding=1)  # 224 -> 56
                self.pool = nn.AvgPool2d(8)  # 56 -> 7
                self.fc = nn.Linear(8 * 7 * 7, num_classes)

            def forward(self, x):
                return self.fc(torch.flatten(self.pool(self.features(x)), 1))

        def get_inputs():
            return [torch.rand(batch_size, 3, 224, 224)]

        def get_init_inputs():
            return [num_classes]
    """)
    )
    problem = load_problem(str(path))
    assert [s.label for s in problem.sizes] == ["tiny", "default"]
    assert problem.tier("tiny")[0].params["module_globals"] == {"num_classes": 4, "batch_size": 2}
    assert problem.input_specs["tiny"] == [[2, 3, 224, 224]]
    assert "batch_size 10 -> 2" in problem.interpreter_note("cpu")


def test_halving_the_largest_size_when_no_single_cut_leaves_the_pooling_chain_a_size():
    # Conv3d then two 2x2x2 max-pools over (16, 32, 32): cutting every constant by 4 leaves the
    # second pool nothing, by 2 too many elements; halving the largest, one at a time, fits.
    problem = load_problem(str(KERNELBENCH / "level2" / "6_Conv3d_Softmax_MaxPool_MaxPool.py"))
    scaled = problem.tier("tiny")[0].params["module_globals"]
    assert scaled["batch_size"] < 128 and "kernel_size" not in scaled
    ((shape, _),) = problem.output_specs["tiny"]
    assert len(shape) == 5 and min(shape) >= 1


def test_a_list_of_layer_sizes_is_cut_with_the_constants(tmp_path):
    """KernelBench's ShallowWideMLP keeps its hidden widths in a list: left whole, its tiny
    size held two 32768x32768 weights (8 GiB), and the gate's process was killed for memory."""
    path = tmp_path / "wide_mlp.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn as nn

        batch_size = 128
        input_size = 16384
        hidden_layer_sizes = [32768, 32768]
        output_size = 16384

        class Model(nn.Module):
            def __init__(self, input_size, hidden_layer_sizes, output_size):
                super().__init__()
                sizes = [input_size, *hidden_layer_sizes, output_size]
                self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x

        def get_inputs():
            return [torch.rand(batch_size, input_size)]

        def get_init_inputs():
            return [input_size, hidden_layer_sizes, output_size]
    """)
    )
    problem = load_problem(str(path))
    scaled = problem.tier("tiny")[0].params["module_globals"]
    assert type(scaled["hidden_layer_sizes"]) is list
    cut = 16384 // scaled["input_size"]
    assert cut > 1 and scaled["hidden_layer_sizes"] == [32768 // cut, 32768 // cut]
    assert "hidden_layer_sizes [32768, 32768] -> " in problem.derived_tiny
    module = import_module_from(problem.path, "problem")
    assert module.hidden_layer_sizes == [32768, 32768]  # the module's own list is left whole


def test_a_model_whose_state_fixes_the_batch_keeps_its_batch_and_is_not_traced_at_another(
    tmp_path,
):
    """KernelBench's VanillaRNN builds its hidden state from the module's batch_size, outside the
    size's call: the gate batch leaves such a size as it was (else every candidate's check
    crashes in the reference), and the families' traces say "not this one" at a batch where the
    Model cannot run instead of crashing the match."""
    import hints
    from engine.problems.tiny_batch import with_tiny_batch
    from engine.runner.calls import MODULE_GLOBALS
    from hints.core.dataflow import trace_graph

    path = tmp_path / "stateful.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn as nn

        batch_size = 8
        features = 256

        class Model(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.hidden = torch.randn(batch_size, features)

            def forward(self, x):
                self.hidden = torch.tanh(x.sum(dim=1, keepdim=True) + self.hidden)
                return self.hidden

        def get_inputs():
            return [torch.randn(batch_size, features)]

        def get_init_inputs():
            return [features]
    """)
    )
    problem = load_problem(str(path))
    assert with_tiny_batch(problem, 2) == problem
    (tiny,) = problem.tier("tiny")
    at_two = replace(
        tiny, params={MODULE_GLOBALS: {**tiny.params[MODULE_GLOBALS], "batch_size": 2}}
    )
    assert trace_graph(problem, at_two) is None and trace_graph(problem, tiny) is not None
    hints.match_problem(
        replace(problem, sizes=(*problem.sizes, at_two))
    )  # no family's trace raises
