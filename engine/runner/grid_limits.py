"""The GPU's grid limits, enforced on Triton's interpreter (the cpu backend): CUDA refuses a
launch with more than 65535 programs along grid axis 1 or 2, or 2**31 - 1 along axis 0, which
the interpreter runs regardless. Without this, a kernel that passes every check on the cpu fails
its first launch on the GPU (a pooling kernel with one program per output row along axis 1 did,
at 190464 rows)."""

from __future__ import annotations

GRID_LIMITS = (2**31 - 1, 65535, 65535)


def check_grid(grid: tuple[int, int, int]) -> None:
    for axis, (programs, limit) in enumerate(zip(grid, GRID_LIMITS, strict=True)):
        if programs > limit:
            raise ValueError(
                f"the launch grid {tuple(grid)} has {programs} programs along axis {axis}, and a "
                f"GPU launches at most {limit} there: fold that axis into axis 0 (axis 0 takes "
                f"up to {GRID_LIMITS[0]})"
            )


def enforce_grid_limits() -> None:
    """Every later interpreted launch in this process (and its forks) checks its grid first."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    set_grid_dim = builder.set_grid_dim

    def checked(*grid: int) -> None:
        check_grid(grid)
        set_grid_dim(*grid)

    builder.set_grid_dim = checked
