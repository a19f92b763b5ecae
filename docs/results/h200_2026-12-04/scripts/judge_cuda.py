"""On the H200: the judge against an honest softmax and the issue-35 attacks, through real
sandboxed runners (static rules skipped, as tests/test_judge_adversarial.py does). Run from the
repository root: `python3 .gpu/judge_cuda.py`; one JSON line a case and size."""

import base64
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, ".")
from engine.backends.local import LocalBackend  # noqa: E402
from engine.problems import load_problem  # noqa: E402
from tests.adversarial import softmax as attacks  # noqa: E402

TIMING = {"seed": 11, "recheck_seed": 12, "warmup": 2, "reps": 8, "input_sets": 2,
          "interleave": True}  # fmt: skip


def fill(source: str, **values) -> str:
    for name, value in values.items():
        source = source.replace(name, str(value))
    return source


def native_library() -> str:
    """The attacks' C softmax, built here, in base64."""
    folder = Path(tempfile.mkdtemp())
    (folder / "softmax.c").write_text(attacks.NATIVE_SOFTMAX_C)
    include = sysconfig.get_paths()["include"]
    subprocess.run([shutil.which("gcc") or "cc", "-O2", "-shared", "-fPIC", f"-I{include}",
                    str(folder / "softmax.c"), "-o", str(folder / "softmax.so"), "-lm"],
                   check=True)  # fmt: skip
    return base64.b64encode((folder / "softmax.so").read_bytes()).decode()


def cases() -> dict[str, str]:
    library = native_library()
    identity = attacks.IDENTITY_KEYS[sorted(attacks.IDENTITY_KEYS)[0]]
    native_c = repr(attacks.NATIVE_SOFTMAX_C)
    return {
        "valid": attacks.VALID,
        "memo_by_identity": fill(attacks.MEMOISES_BY_IDENTITY, KEY=identity, SLEEP_S="0.05"),
        "precomputes": fill(attacks.PRECOMPUTES_OUTSIDE_TIMED_CALLS, SLEEP_S="0.05"),
        "tritons_build_helper": fill(attacks.BUILDS_WITH_TRITONS_HELPER, NATIVE_C=native_c),
        "quiet_native": attacks.TRIES_NATIVE_CODE_QUIETLY,
        **{f"native_{k}": fill(v, SO_B64=library) for k, v in attacks.LOADS_NATIVE_CODE.items()},
    }


def main() -> None:
    softmax = load_problem("softmax")
    backend = LocalBackend("cuda")
    attempts = cases()
    try:
        for size in ("tiny", "full2"):
            for name, source in attempts.items():
                start = time.monotonic()
                r = backend.judge(softmax, source, [softmax.size(size)], check_seeds=[101, 102],
                                  timing=TIMING)  # fmt: skip
                print(json.dumps({
                    "size": size, "case": name, "passed": r.passed, "reason": r.reason,
                    "message": (r.message or "")[:300],
                    "wall_s": round(time.monotonic() - start, 2),
                    "median_ms": [t.stats.median for t in r.timings],
                    "speedup": [t.speedup for t in r.timings],
                }), flush=True)  # fmt: skip
    finally:
        backend.close()


if __name__ == "__main__":
    main()
