"""A session folder written by hand, file for file as docs/session-format.md describes.

Stands in for a sim-backend run until the engine lands; every value is fixed, so snapshot
tests of the TUI draw the same screen every time."""

from __future__ import annotations

import json
import os
import random
import socket
import statistics
from pathlib import Path

from engine.session_files import SessionPaths, write_json_atomic

START = 1764480000.0  # 2025-11-30 05:20:00 UTC: event times are offsets from here

REFERENCE = '''"""RMS normalization over the channel dimension of an (N, C, H, W) fp32 tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return x / rms
'''

TWO_PASS_LOOP = """    acc = tl.zeros([BLOCK_HW], dtype=tl.float32)
    for c in range(0, C):
        x = tl.load(x_ptr + base + c * HW + offs, mask=mask, other=0.0)
        acc += x * x
    rms = tl.sqrt(acc / C + eps)
    for c in range(0, C):
        x = tl.load(x_ptr + base + c * HW + offs, mask=mask, other=0.0)
        tl.store(out_ptr + base + c * HW + offs, x / rms, mask=mask)
"""

SINGLE_PASS_LOOP = """    chans = tl.arange(0, BLOCK_C)
    ptrs = x_ptr + base + chans[:, None] * HW + offs[None, :]
    x = tl.load(ptrs, mask=(chans[:, None] < C) & mask[None, :], other=0.0)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / C + eps)
    out = out_ptr + base + chans[:, None] * HW + offs[None, :]
    tl.store(out, x / rms[None, :], mask=(chans[:, None] < C) & mask[None, :])
"""


def kernel_source(loop: str, block_hw: int, num_warps: int) -> str:
    """A candidate module in the shape the generators write: ModelNew around one Triton kernel."""
    return f"""import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, out_ptr, C, HW, eps, BLOCK_HW: tl.constexpr, BLOCK_C: tl.constexpr):
    n = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK_HW + tl.arange(0, BLOCK_HW)
    mask = offs < HW
    base = n * C * HW
{loop}

class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        out = torch.empty_like(x)
        grid = (n, triton.cdiv(h * w, {block_hw}))
        rmsnorm_kernel[grid](
            x, out, c, h * w, self.eps,
            BLOCK_HW={block_hw}, BLOCK_C=triton.next_power_of_2(c), num_warps={num_warps},
        )
        return out
"""


# id, parent, origin, rung, status, reference/kernel median ratio (None: never timed),
# pinned, vetoed, reason, loop, BLOCK_HW, num_warps
CANDIDATES = [
    (
        "c0001",
        None,
        "reduction.two_pass",
        1,
        "alive",
        1.35,
        False,
        False,
        None,
        TWO_PASS_LOOP,
        256,
        4,
    ),
    (
        "c0002",
        None,
        "reduction.online_single_pass",
        2,
        "promoted",
        1.92,
        False,
        False,
        None,
        SINGLE_PASS_LOOP,
        128,
        4,
    ),
    (
        "c0003",
        None,
        "tiling.channel_blocks",
        0,
        "rejected",
        None,
        False,
        False,
        "wrong output",
        SINGLE_PASS_LOOP,
        64,
        2,
    ),
    (
        "c0004",
        "c0001",
        "memory.vectorize_loads",
        0,
        "pruned",
        0.84,
        False,
        False,
        "confidently slower",
        TWO_PASS_LOOP,
        1024,
        8,
    ),
    ("c0005", "c0002", "llm", 0, "queued", None, False, False, None, SINGLE_PASS_LOOP, 512, 8),
    ("c0006", None, "user", 1, "alive", 1.10, False, True, None, TWO_PASS_LOOP, 128, 2),
    (
        "c0007",
        "c0002",
        "tiling.wider_hw_tile",
        2,
        "promoted",
        2.31,
        True,
        False,
        None,
        SINGLE_PASS_LOOP,
        256,
        8,
    ),
    (
        "c0008",
        "c0007",
        "launch.num_warps",
        0,
        "evaluating",
        None,
        False,
        False,
        None,
        SINGLE_PASS_LOOP,
        256,
        4,
    ),
]
SIZES = ("full0", "full1")
REFERENCE_MS = {"full0": 0.951, "full1": 0.142}


def timing_stats(samples: list[float]) -> dict:
    quartiles = statistics.quantiles(samples, n=4)
    median = statistics.median(samples)
    spread = 1.96 * statistics.stdev(samples) / len(samples) ** 0.5
    return {
        "median": median,
        "ci_low": median - spread,
        "ci_high": median + spread,
        "cv": statistics.stdev(samples) / statistics.mean(samples),
        "iqr": quartiles[2] - quartiles[0],
    }


def timings(ratio: float, rung: int, rng: random.Random) -> list[dict]:
    reps = 10 * (rung + 1)
    out = []
    for size in SIZES[: rung + 1 if rung < 2 else 2]:
        ref = [REFERENCE_MS[size] * rng.gauss(1.0, 0.01) for _ in range(reps)]
        ours = [REFERENCE_MS[size] / ratio * rng.gauss(1.0, 0.015) for _ in range(reps)]
        ours[reps // 2] *= 1.3  # one slow outlier, as real runs have
        speedup = statistics.median(ref) / statistics.median(ours)
        out.append(
            {
                "size_label": size,
                "samples_ms": ours,
                "ref_samples_ms": ref,
                "stats": timing_stats(ours),
                "ref_stats": timing_stats(ref),
                "speedup": speedup,
                "speedup_ci": [speedup * 0.96, speedup * 1.04],
            }
        )
    return out


def evaluations(row: tuple, rng: random.Random) -> list[dict]:
    _, _, _, rung, status, ratio, *_ = row
    if status in ("queued", "evaluating"):
        return []
    if ratio is None:
        return [
            {
                "rung": 0,
                "passed": False,
                "reason": "wrong output",
                "message": "max normalized error 3.1e-01 > tolerance 1e-05 on seed 2",
                "error": 0.31,
                "tolerance": 1e-5,
                "meaningful": True,
                "precision": "fp32",
                "gpu_seconds": {"compile": 0.4, "check": 0.1, "time": 0.0, "profile": 0.0},
                "timings": [],
            }
        ]
    return [
        {
            "rung": r,
            "passed": True,
            "reason": None,
            "message": "",
            "error": 2.4e-7,
            "tolerance": 1e-5,
            "meaningful": True,
            "precision": "fp32",
            "gpu_seconds": {
                "compile": 0.4 if r == 0 else 0.0,
                "check": 0.2,
                "time": 0.5 * (r + 1),
                "profile": 0.6 if r == 2 else 0.0,
            },
            "timings": timings(ratio, r, rng),
        }
        for r in range(rung + 1)
    ]


# As engine.profiler.diagnosis writes them.
PROFILES = {
    "c0007": {
        "status": "ok",
        "kind": "memory-bound",
        "summary": "DRAM at 87.2% of peak while the SMs sit at 31.4%: near the copy roofline",
        "evidence": [
            "DRAM throughput 87.2% of peak, 3.72 TB/s",
            "SM throughput 31.4%; memory pipes 88.0% (L1 41.2%, L2 52.9%)",
            "occupancy: achieved 62.5% of theoretical 75.0%; 3.1 waves per SM",
        ],
        "tags": ["memory-bound"],
        "metrics": {
            "dram_pct": 87.2,
            "sm_pct": 31.4,
            "memory_pct": 88.0,
            "l1_pct": 41.2,
            "l2_pct": 52.9,
            "achieved_occupancy": 62.5,
            "theoretical_occupancy": 75.0,
            "waves_per_sm": 3.1,
            "registers_per_thread": 40.0,
            "spill_requests": None,
            "sectors_per_request": 4.0,
            "duration_us": 412.0,
            "dram_bytes": 1.53e9,
            "dram_tbps": 3.72,
            "grid": "(112, 1024, 1)",
            "block": "(256, 1, 1)",
        },
        "stalls": [
            ["long_scoreboard", 0.58],
            ["lg_throttle", 0.17],
            ["wait", 0.09],
            ["barrier", 0.04],
        ],
        "rule_hints": [
            {
                "rule": "UncoalescedGlobalAccess",
                "type": "OPT",
                "text": "stores use 2.0x the sectors they need",
                "estimated_speedup": 12.0,
            }
        ],
        "missing_metrics": [],
        "kernel": "rmsnorm_kernel",
    },
    "c0002": {
        "status": "unavailable",
        "why": "ncu not found on PATH (install Nsight Compute)",
        "gpu_seconds": 0.0,
    },
}

EVENTS = [
    (0.0, "started", None, "rmsnorm on sim, seed 0, 8 strategies"),
    (0.4, "generated", "c0001", "reduction.two_pass"),
    (0.6, "generated", "c0002", "reduction.online_single_pass"),
    (0.9, "generated", "c0003", "tiling.channel_blocks"),
    (2.1, "evaluated", "c0001", "rung 0: 1.35× [1.30, 1.40]"),
    (3.2, "evaluated", "c0002", "rung 0: 1.92× [1.84, 2.00]"),
    (3.5, "rejected", "c0003", "wrong output: max normalized error 3.1e-01"),
    (4.0, "promoted", "c0002", "to rung 1"),
    (6.3, "pruned", "c0004", "confidently slower: 0.84× [0.80, 0.87]"),
    (7.7, "command_applied", "c0007", "pin c0007"),
    (9.1, "evaluated", "c0007", "rung 2: 2.31× [2.22, 2.40]"),
    (9.6, "profiled", "c0007", "memory-bound: DRAM at 87% of peak"),
    (10.2, "generated", "c0008", "launch.num_warps from c0007"),
]


def snapshot(paths: SessionPaths) -> dict:
    rows = []
    for cid, parent, origin, rung, status, ratio, pinned, vetoed, reason, *_ in CANDIDATES:
        timed = ratio is not None
        rows.append(
            {
                "id": cid,
                "sha256": f"{int(cid[1:]):064x}",
                "parent": parent,
                "origin": origin,
                "rung": rung,
                "status": status,
                "score": round(ratio * (1 + 0.1 * rung), 3) if timed else None,
                "speedup": ratio if timed else None,
                "speedup_ci": [round(ratio * 0.96, 3), round(ratio * 1.04, 3)] if timed else None,
                "cv": 0.015 if timed else None,
                "pinned": pinned,
                "vetoed": vetoed,
                "reason": reason,
                "note": None,
            }
        )
    return {
        "schema": 1,
        "session": paths.name,
        "problem": "rmsnorm",
        "backend": "sim",
        "generator": "offline",
        "state": "running",
        "stop_reason": None,
        "engine_pid": os.getpid(),
        "updated_at": START + 10.2,
        "step": 13,
        "seed": 0,
        "timings_meaningful": True,
        "best": {"id": "c0007", "speedup": 2.31, "speedup_ci": [2.22, 2.4]},
        "budget": {
            "limits": {
                "wall_seconds": 1800,
                "gpu_seconds": None,
                "evaluations": 200,
                "llm_usd": None,
                "target_speedup": 3.0,
            },
            "left": {
                "wall_seconds": 1789.8,
                "gpu_seconds": None,
                "evaluations": 191,
                "llm_usd": None,
            },
        },
        "ledger": {
            "gpu_seconds": 12.5,
            "gpu_seconds_by_rung": {"0": 5.0, "1": 4.5, "2": 3.0},
            "gpu_seconds_by_activity": {"compile": 1.0, "check": 2.0, "time": 8.9, "profile": 0.6},
            "llm_tokens_in": 1830,
            "llm_tokens_out": 912,
            "llm_cost_usd": 0.02,
            "wall_seconds": 10.2,
            "evaluations": 9,
            "top_rung_share": 0.24,
        },
        "progress": [[0.0, 1.0], [1.1, 1.35], [2.2, 1.92], [7.5, 2.05], [9.0, 2.31], [12.5, 2.31]],
        "rungs": [
            {
                "index": 0,
                "sizes": ["full0"],
                "reps": 10,
                "profile": False,
                "measured": 6,
                "promoted": 3,
            },
            {
                "index": 1,
                "sizes": ["full0", "full1"],
                "reps": 20,
                "profile": False,
                "measured": 3,
                "promoted": 2,
            },
            {
                "index": 2,
                "sizes": ["full0", "full1"],
                "reps": 30,
                "profile": True,
                "measured": 2,
                "promoted": 0,
            },
        ],
        "candidates_total": len(rows),
        "candidates": rows,
        "queue": ["c0005"],
        "commands": [
            {
                "id": "0" * 32,
                "command": "pin",
                "candidate": "c0007",
                "amount": None,
                "issued_at": START + 7.5,
                "applied_at": START + 7.7,
                "status": "applied",
                "message": "pinned",
            }
        ],
    }


def make_fixture_session(root: Path) -> SessionPaths:
    """Write a running session's files under `root` (the session folder; its name is the
    session's); engine.lock names this process, so clients see a live engine."""
    paths = SessionPaths(root)
    paths.candidates.mkdir(parents=True, exist_ok=True)
    paths.inbox.mkdir(exist_ok=True)
    rng = random.Random(0)
    for row in CANDIDATES:
        cid, parent, origin, *_, loop, block_hw, num_warps = row
        write_json_atomic(
            paths.candidate(cid),
            {
                "id": cid,
                "parent": parent,
                "origin": origin,
                "params": {"BLOCK_HW": block_hw, "num_warps": num_warps},
                "source": kernel_source(loop, block_hw, num_warps),
                "evaluations": evaluations(row, rng),
                "profile": PROFILES.get(cid),
            },
        )
    paths.reference.write_text(REFERENCE)
    with paths.events.open("w") as events:
        for seq, (offset, kind, candidate, message) in enumerate(EVENTS):
            command = "0" * 32 if kind == "command_applied" else None
            events.write(
                json.dumps(
                    {
                        "seq": seq,
                        "ts": START + offset,
                        "kind": kind,
                        "message": message,
                        "candidate": candidate,
                        "command": command,
                    }
                )
                + "\n"
            )
    write_json_atomic(paths.snapshot, snapshot(paths))
    write_json_atomic(
        paths.lock,
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": START,
            "heartbeat": START + 10.2,
        },
    )
    return paths
