"""The whole-model family's kernel library (hints.model): Triton kernels with launchers that
stand in for torch operators and nn modules, embedded into a candidate as source text.

The contract every group module here keeps (the renderer and the tests rely on it):
- A group module is candidate code. It imports only `math`, `torch`, `torch.nn as nn`,
  `triton`, `triton.language as tl` and names from other modules of this package
  (`from hints.model_kernels.common import ...`); the renderer drops those imports, emits one
  shared header and embeds every group a candidate needs, the groups it imports first.
- `kb_<op>` stands in for the torch operator whose name `engine.problems.trace.canonical_op`
  gives (`kb_relu` for torch.relu, F.relu and Tensor.relu; `kb_add` for `+`), with torch's
  signature for the forms models use, tensor first. Where no operand is a tensor it computes
  what Python would (`kb_add(2, 3) == 5`), since the rewritten model code calls it for every `+`.
- `Kb<Name>` subclasses `nn.<Name>` with the same constructor and parameters (so a state dict
  loads unchanged) and a forward that launches the group's kernels.
- At run time a launcher only allocates (torch.empty*), views, reshapes, permutes, copies for
  layout (`.contiguous()`) and reads shapes; every value is computed by a @triton.jit kernel
  (engine.gate.torch_use.LAYOUT_ATEN_OPS is the list the gate enforces).
- Names a group keeps to itself start with `_<group>_` (kernels too): groups share one module
  once embedded.
"""
