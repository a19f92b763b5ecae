"""Compile a candidate's Triton kernel ahead of time for the H200 (sm_90) on a machine without a
GPU, with Triton's own ptxas: what the interpreter cannot show (PTX, registers, spills).

The compile runs in a fresh process without TRITON_INTERPRET: in a process that has run
interpreted kernels, triton.language stays patched for the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def compile_for_sm90(path: Path, kernel: str, signature: dict, constants: dict, num_warps: int):
    """(PTX, cuobjdump's resource usage line) of `kernel` in the candidate file `path`."""
    result = compiled_for_sm90(path, kernel, signature, constants, num_warps)
    return result["ptx"], result["usage"]


def compiled_for_sm90(path: Path, kernel: str, signature: dict, constants: dict, num_warps: int,
                      num_stages: int = 3) -> dict:  # fmt: skip
    """PTX, TTGIR (Triton's GPU dialect: the layouts it chose), resource usage and dynamic shared
    memory (bytes: what a launch would ask of the GPU, and where it exceeds the H200's limit,
    fail) of `kernel` in the candidate file `path`."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    request = json.dumps([str(path), kernel, signature, constants, num_warps, num_stages])
    out = subprocess.run(
        [sys.executable, __file__, request], capture_output=True, text=True, env=env, check=True
    ).stdout
    return json.loads(out)


def main(request: str) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from engine.problems.loader import import_module_from

    path, kernel, signature, constants, num_warps, num_stages = json.loads(request)
    fn = getattr(import_module_from(Path(path), "candidate"), kernel)
    compiled = triton.compile(
        ASTSource(fn, signature, constants),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": num_warps, "num_stages": num_stages},
    )
    cubin = Path(path).with_suffix(".cubin")
    cubin.write_bytes(compiled.asm["cubin"])
    cuobjdump = Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump"
    usage = subprocess.run(
        [str(cuobjdump), "-res-usage", str(cubin)], capture_output=True, text=True, check=True
    ).stdout
    print(
        json.dumps(
            {
                "ptx": compiled.asm["ptx"],
                "ttgir": compiled.asm["ttgir"],
                "usage": usage,
                "shared": compiled.metadata.shared,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
