"""The work happens in Triton, seen from outside the candidate: the kernels that the profiler saw
one forward call launch must be the candidate's own `@triton.jit` functions, or the fills and
copies torch runs to allocate and lay out tensors. The runner's operator log gives early, clear
messages; this list comes from the GPU's launch records, which a candidate that routes around
torch's dispatcher (a library called through ctypes, a mode popped off the stack) cannot edit.

A session that allows torch operators (`--allow-torch-ops`) admits every kernel: which kernels an
operator launches (cuBLAS, cuDNN, CUTLASS) is the library's choice, not a name to check.
"""

from __future__ import annotations

import ast

from engine.gate.correctness import CandidateRejected

# Words in the names of torch's kernels for allocation fills (`zeros`, `full`, `zero_`) and
# layout copies (`contiguous`, `clone`, `copy_`), which forward may use.
LAYOUT_KERNEL_WORDS = ("FillFunctor", "fill_kernel", "copy_kernel", "CopyFunctor", "arange")
# The word in the names of torch's random-number kernels (torch.randn, rand, randint and their
# kin), which forward may launch where the Model draws too (Problem.draws_random): KernelBench's
# LSTM draws its initial state in forward, and so does the rewrite that keeps its code.
RANDOM_KERNEL_WORD = "distribution_elementwise_grid_stride_kernel"


def triton_kernel_names(source: str) -> set[str]:
    """Names of the functions in `source` decorated with `triton.jit` (or `jit`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(map(_is_jit, node.decorator_list)):
            names.add(node.name)
    return names


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "jit"


def own_kernels_unseen(profile: dict, source: str, allowed_ops: frozenset[str]) -> bool:
    """A census that listed launches, none of them the candidate's own Triton kernels though it
    has some: the work ran where the profiler did not look (a CUDA graph's nodes outside the
    range, say), so the census vouches for nothing. Where torch operators are allowed, a
    candidate may do all its work in them."""
    if allowed_ops or profile.get("status") != "ok":
        return False
    names = {k["name"] for k in profile.get("kernels", []) if k.get("name")}
    own = triton_kernel_names(source)
    return bool(own) and not names & own


def foreign_kernels(kernels: list[str], source: str, draws: bool = False) -> list[str]:
    """The launched kernels that are neither the candidate's Triton kernels nor torch's fills
    and layout copies (nor, with `draws`, its random draws), each once, in launch order."""
    own = triton_kernel_names(source)
    admitted = LAYOUT_KERNEL_WORDS + ((RANDOM_KERNEL_WORD,) if draws else ())
    foreign: dict[str, None] = {}
    for name in kernels:
        if name not in own and not any(word in name for word in admitted):
            foreign[name] = None
    return list(foreign)


def check_kernel_census(profile: dict, source: str, allowed_ops: frozenset[str],
                        draws: bool = False) -> None:  # fmt: skip
    """Raise when a profiled forward call launched kernels that are not the candidate's, or
    more kernels than a census can list (`complete` False). `draws`: the Model draws random
    numbers, so the candidate's calls may too."""
    if allowed_ops or profile.get("status") == "unavailable":
        return
    if profile.get("complete") is False:
        raise CandidateRejected(
            "torch_compute",
            f"ModelNew.forward launched more than {len(profile['kernels'])} kernels in one call, "
            "more than the kernel census lists: launch fewer, larger kernels",
        )
    names = [k["name"] for k in profile.get("kernels", []) if k.get("name")]
    foreign = foreign_kernels(names, source, draws)
    if foreign:
        shown = ", ".join(name[:80] for name in foreign[:3])
        raise CandidateRejected(
            "torch_compute",
            f"the profiler saw ModelNew.forward launch kernels that are not its Triton kernels "
            f"({shown}): do the math in @triton.jit kernels (or allow the torch operators for "
            "the session with --allow-torch-ops)",
        )
