"""Several devices, measured: one search of a problem on 1 device, then the same search (problem,
seed, budget) on N devices, in one command. Per search: evaluations, wall seconds, evaluations
per wall-second, GPU-seconds by device; the ratio of the N-device rate to the 1-device one; and
the reference's timings by device (every evaluation times the reference beside its candidate on
the same device): per size, the median over evaluations on each device, how far the devices'
medians are apart, and the spread between evaluations on one device (its noise).

    python -m engine.benchmarks.multi_gpu softmax --backend cuda --gpus 2 --budget 60gpu-s

On cpu the devices are judges side by side on this machine's cores. On sim evaluations run one
after another in wall time whatever the device count (simulated time orders them), so the rate
ratio is about 1 there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from engine.compose import create_session, resume_session
from engine.search.budget import parse_budget
from engine.session.settings import SessionSettings
from engine.session_files import SessionPaths


def search(root: Path, args, gpus: int) -> dict:
    """One search on `gpus` devices: its rate, spend by device and the reference's timings."""
    paths = SessionPaths(root / f"{gpus}gpu")
    wanted = SessionSettings(args.problem, args.backend, args.seed, parse_budget([args.budget]),
                             gpus=str(gpus), ray=args.ray)  # fmt: skip
    create_session(paths, wanted)
    engine = resume_session(paths)
    started = time.monotonic()
    try:
        engine.run()
    finally:
        engine.close()
        engine.store.close()
    wall = time.monotonic() - started
    ledger = engine.last_snapshot["ledger"]
    return {
        "devices": gpus,
        "evaluations": ledger["evaluations"],
        "wall_s": round(wall, 2),
        "evaluations_per_wall_s": round(ledger["evaluations"] / wall, 4),
        "gpu_seconds_by_device": ledger["gpu_seconds_by_device"],
        "reference": reference_agreement(reference_medians(paths)),
    }


def reference_medians(paths: SessionPaths) -> dict:
    """{size: {device: [median reference ms of each evaluation timed there]}}."""
    found: dict = defaultdict(lambda: defaultdict(list))
    for path in sorted(paths.candidates.glob("*.json")):
        for evaluation in json.loads(path.read_text())["evaluations"]:
            for timing in evaluation.get("timings") or []:
                if timing["ref_samples_ms"]:
                    median = statistics.median(timing["ref_samples_ms"])
                    found[timing["size_label"]][str(evaluation["device"])].append(median)
    return {size: dict(by_device) for size, by_device in found.items()}


def reference_agreement(by_size: dict) -> dict:
    """Per size: each device's median over evaluations and relative spread (IQR / median),
    and the largest gap between two devices' medians relative to their mean."""
    out = {}
    for size, by_device in sorted(by_size.items()):
        summary = {}
        for device, medians in sorted(by_device.items()):
            q1, _, q3 = statistics.quantiles(medians, n=4) if len(medians) > 1 else medians * 3
            middle = statistics.median(medians)
            summary[device] = {"evaluations": len(medians), "median_ms": round(middle, 6),
                               "spread": round((q3 - q1) / middle, 4)}  # fmt: skip
        middles = [s["median_ms"] for s in summary.values()]
        gap = (max(middles) - min(middles)) / statistics.mean(middles)
        noise = max(s["spread"] for s in summary.values())
        out[size] = {"by_device": summary, "gap": round(gap, 4), "within_noise": gap <= noise}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="multi_gpu", description=__doc__.splitlines()[0])
    parser.add_argument("problem")
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu", "sim"))
    parser.add_argument("--gpus", type=int, default=2, help="devices of the second search")
    parser.add_argument("--budget", default="60gpu-s", help="each search's budget")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", help="local or a Ray cluster's address (default: no Ray)")
    parser.add_argument("--out", help="write the results here as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kb-multi-gpu-") as root:
        one, many = search(Path(root), args, 1), search(Path(root), args, args.gpus)
    results = {
        "problem": args.problem, "backend": args.backend, "budget": args.budget,
        "seed": args.seed, "ray": args.ray, "searches": [one, many],
        "rate_ratio": round(many["evaluations_per_wall_s"] / one["evaluations_per_wall_s"], 3),
    }  # fmt: skip
    text = json.dumps(results, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
