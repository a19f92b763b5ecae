"""The bench's results as `<out>/<backend>.json` and a markdown table `<out>/<backend>.md`."""

from __future__ import annotations

import json
from pathlib import Path

from engine.bench.kernelbench import metrics_lines

BACKEND_NOTES = {
    "cuda": "Measured on the GPU: eager and torch.compile interleaved in one process per "
    "problem (CUDA events, the L2 flushed before every repetition); the best kernel by the "
    "judge, in its sandboxed runner, against the reference timed interleaved beside it. x eager "
    "is the judge's ratio; x compile is it times eager/compile of the timing process.",
    "cpu": "**Timings are not meaningful**: the cpu backend runs kernels in the Triton "
    "interpreter on the problems' tiny sizes; this run checks that the bench works end to end.",
    "sim": "**No eager or torch.compile timings**: the sim backend's numbers are synthetic "
    "(eager_ms is its synthetic reference, compile_ms is empty); sim exists to exercise the "
    "bench and the ablation logic.",
}


def _ms(stat: dict | None) -> str:
    if not stat:
        return "-"
    return f"{stat['median']:.4g} [{stat['low']:.4g}, {stat['high']:.4g}]"


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def rows_table(rows: list[dict]) -> list[str]:
    lines = [
        "| problem | shape | dtype | policy | precision | eager ms | compile ms | best ms | "
        "floor ms | x eager | x compile | of floor | GPU-s to best | GPU-s total |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['problem']} | {r['shape']} | {r['dtype']} | {r['precision_policy']} | "
            f"{r['precision'] or '-'} | "
            f"{_ms(r['eager_ms'])} | {_ms(r['compile_ms'])} | {_ms(r['best_ms'])} | "
            f"{r['floor_ms']:.4g} | {_num(r['speedup_eager'], '.2f')} | "
            f"{_num(r['speedup_compile'], '.2f')} | {_num(r['fraction_of_floor'], '.0%')} | "
            f"{_num(r['gpu_seconds_to_best'], '.1f')} | {r['gpu_seconds_total']:.1f} |"
        )
    return lines


def ablation_table(entries: list[dict], rows: list[dict]) -> list[str]:
    shape = {(r["problem"], r["size"]): r["shape"] for r in rows}
    lines = [
        "| problem | shape | policy | ladder GPU-s to best | flat GPU-s to best | ratio | "
        "ladder best ms | flat best ms | same kernel |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        for label in e["ladder_best_ms"]:
            lines.append(
                f"| {e['problem']} | {shape[e['problem'], label]} | {e['precision_policy']} | "
                f"{_num(e['ladder_gpu_seconds_to_best'], '.1f')} | "
                f"{_num(e['flat_gpu_seconds_to_best'], '.1f')} | "
                f"{_num(e['gpu_seconds_to_best_ratio'], '.2f')} | "
                f"{_ms(e['ladder_best_ms'][label])} | {_ms(e['flat_best_ms'][label])} | "
                f"{'yes' if e['same_best_kernel'] else 'no'} |"
            )
    return lines


def notes(rows: list[dict]) -> list[str]:
    """Why a cell is empty, one line per problem, policy and reason, naming the shapes it holds
    for."""
    shapes: dict[tuple[str, str, str, str], list[str]] = {}
    for r in rows:
        for what, why in r["notes"].items():
            key = (r["problem"], r["precision_policy"], what, why)
            shapes.setdefault(key, []).append(r["shape"])
    return [
        f"- {problem}, {policy} ({', '.join(where)}), {what}: {why}"
        for (problem, policy, what, why), where in shapes.items()
    ]


def runs(results: dict) -> list[str]:
    lines = []
    for i, run in enumerate(results["runs"]):
        c = run["ceilings"]
        measured = "measured" if run["device"]["measured"] else "fixed numbers, not measured"
        lines.append(
            f"- run {i} on {run['device']['device_name']}: `{run['command']}`; ceilings "
            f"({measured}): copy {c['copy_bytes_per_s'] / 1e12:.3g} TB/s, matmul fp32 "
            f"{c['fp32_flops_per_s'] / 1e12:.3g}, tf32 {c['tf32_flops_per_s'] / 1e12:.3g}, "
            f"fp16 {c['fp16_flops_per_s'] / 1e12:.3g} TFLOP/s"
        )
    return lines


def markdown(results: dict) -> str:
    lines = [
        f"# kernelbrain bench: {results['backend']}",
        "",
        BACKEND_NOTES[results["backend"]],
        "",
        *runs(results),
        "",
        "Times are medians with their bootstrap 95% interval. floor: bytes (inputs, parameters "
        "and outputs, once) and FLOPs over the ceilings of the row's run; of floor = floor / "
        "best. GPU-s to best: when the search's best speedup settled within 2% of its final "
        "value. policy strict: fp32 inputs computed in fp32, against eager and torch.compile at "
        "PyTorch's defaults (fp32 matmuls in fp32); tf32: kernels may compute fp32 inputs in "
        "TF32 (precision names what they use, within the problem's tolerance for it), against "
        "eager and torch.compile with TF32 enabled.",
        "",
        *rows_table(results["rows"]),
    ]
    if results["ablation"]:
        lines += [
            "",
            "## Ablation: the same candidate stream, flat (every candidate at the top rung) "
            "against the ladder, with the same budget",
            "",
            "ratio = ladder GPU-s to best / flat GPU-s to best.",
            "",
            *ablation_table(results["ablation"], results["rows"]),
        ]
    if results.get("kernelbench"):
        lines += ["", "## KernelBench metrics", "", *metrics_lines(results["kernelbench"])]
    problems = notes(results["rows"])
    if problems:
        lines += ["", "## Notes", "", *problems]
    return "\n".join(lines) + "\n"


def write_results(results: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{results['backend']}.json"
    md_path = out / f"{results['backend']}.md"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    md_path.write_text(markdown(results))
    return json_path, md_path
