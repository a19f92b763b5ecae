"""The batch that the coverage gate and the hint library's tests check a derived tiny size at."""

from __future__ import annotations

import re
from dataclasses import replace

from engine.problems.loader import import_module_from
from engine.problems.problem import Size
from engine.problems.sizing import runs_for_real
from engine.runner.calls import MODULE_GLOBALS

# The interpreter's time grows with the batch (a loop over the same code: 93_ConvTranspose2d's
# direct kernel takes 26.6 s at its derived tiny batch of 16, 3.2 s at 2), and two samples still
# show a batch stride gone wrong.
GATE_BATCH = 2


def with_tiny_batch(problem, batch: int):
    """`problem` with `batch_size` set to `batch` in its derived tiny sizes (where the file has a
    module-level batch_size; also where the derivation left a small batch as it was). A size
    whose Model does not run at that batch stays as it was (KernelBench's RNNs build their
    hidden state from the module's batch_size, outside the size's call)."""
    if not re.search(r"^batch_size\s*=", problem.source, re.MULTILINE):
        return problem
    module = import_module_from(problem.path, "batch")

    def cut(size: Size) -> Size:
        constants = size.params.get(MODULE_GLOBALS)
        if size.tier != "tiny" or constants is None:
            return size
        params = {**size.params, MODULE_GLOBALS: {**constants, "batch_size": batch}}
        return replace(size, params=params) if runs_for_real(module, params) else size

    return replace(problem, sizes=tuple(map(cut, problem.sizes)))
