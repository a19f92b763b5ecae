"""On the H200: the judge against an honest softmax and the issue-35 attacks, through real
sandboxed runners (static rules skipped, as tests/test_judge_adversarial.py does)."""
import base64, json, shutil, subprocess, sys, sysconfig, tempfile, time
from pathlib import Path

sys.path.insert(0, ".")
from engine.backends.local import LocalBackend
from engine.problems import load_problem
from tests.adversarial import softmax as attacks


def fill(source, **values):
    for name, value in values.items():
        source = source.replace(name, str(value))
    return source


folder = Path(tempfile.mkdtemp())
(folder / "softmax.c").write_text(attacks.NATIVE_SOFTMAX_C)
subprocess.run([shutil.which("gcc") or "cc", "-O2", "-shared", "-fPIC",
                f"-I{sysconfig.get_paths()['include']}", str(folder / "softmax.c"), "-o",
                str(folder / "softmax.so"), "-lm"], check=True)
library = base64.b64encode((folder / "softmax.so").read_bytes()).decode()
cases = {
    "valid": attacks.VALID,
    "memo_by_identity": fill(attacks.MEMOISES_BY_IDENTITY, KEY=attacks.IDENTITY_KEYS[sorted(attacks.IDENTITY_KEYS)[0]], SLEEP_S="0.05"),
    "precomputes": fill(attacks.PRECOMPUTES_OUTSIDE_TIMED_CALLS, SLEEP_S="0.05"),
    "tritons_build_helper": fill(attacks.BUILDS_WITH_TRITONS_HELPER, NATIVE_C=repr(attacks.NATIVE_SOFTMAX_C)),
    "quiet_native": attacks.TRIES_NATIVE_CODE_QUIETLY,
    **{f"native_{k}": fill(v, SO_B64=library) for k, v in attacks.LOADS_NATIVE_CODE.items()},
}
softmax = load_problem("softmax")
backend = LocalBackend("cuda")
timing = {"seed": 11, "recheck_seed": 12, "warmup": 2, "reps": 8, "input_sets": 2, "interleave": True}
print(json.dumps({"isolation": backend.isolation}), flush=True)
for size in ("tiny", "full2"):
    for name, source in cases.items():
        start = time.monotonic()
        r = backend.judge(softmax, source, [softmax.size(size)], check_seeds=[101, 102], timing=timing)
        row = {"size": size, "case": name, "passed": r.passed, "reason": r.reason,
               "message": (r.message or "")[:300], "wall_s": round(time.monotonic() - start, 2),
               "median_ms": [t.stats.median for t in r.timings], "speedup": [t.speedup for t in r.timings]}
        print(json.dumps(row), flush=True)
backend.close()
