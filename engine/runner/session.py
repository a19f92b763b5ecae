"""The runner's state for the candidate it holds and the commands the judge sends it."""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import os
import socket
import sys
import traceback

import torch

from . import native_guard
from .calls import build_model_new
from .cuda_share import Shared
from .exchange import (
    DTYPES,
    decode_values,
    dtype_name,
    encode_values,
    meta_tensor,
    write_tensor,
)
from .fresh_inputs import InputRotation
from .guards import guarded_call
from .positions import fetch_positions
from .state_audit import StateRecord
from .timer import Bracket, noop

# Characters of an error message sent to the judge; the judge sanitises it again.
ERROR_LIMIT = 4000
# Elements of the stand-in output that the judge fetches while calibrating.
CALIBRATION_OUTPUT = 1 << 16


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def describe_error(exc: BaseException, candidate_file: str) -> dict:
    """What the judge needs to classify an exception: its type, text and the candidate's lines."""
    frames = [
        f"  line {f.lineno} in {f.name}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename == candidate_file
    ]
    triton = any(c.__module__.startswith("triton") for c in type(exc).__mro__)
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:ERROR_LIMIT],
        "triton": triton,
        "frames": frames[-4:],
    }


class RunnerSession:
    def __init__(self, device: str, exchange: str, share_fd: int | None = None):
        self.device = device
        self.exchange = exchange
        # GPU memory the judge shares (cuda): descriptors arrive on this socket
        self.share = socket.socket(fileno=share_fd) if share_fd is not None else None
        self.imports: list = []
        self.bracket = Bracket(device)
        self.module = None
        self.model = None
        self.candidate_file = ""
        self.input_sets: list[list] = []
        self.rotation = InputRotation(self.input_sets)
        self.last_output = None
        self.record: StateRecord | None = None  # taken before the first candidate loads

    def handle(self, message: dict) -> dict:
        op = message.get("op")
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            return {
                "error": {
                    "type": "ProtocolError",
                    "message": f"unknown op {op!r}",
                    "triton": False,
                    "frames": [],
                }
            }
        try:
            reply = handler(message)
        except BaseException as exc:  # every failure of the candidate is the judge's to classify
            reply = {"error": describe_error(exc, self.candidate_file)}
        if native_guard.REFUSED:  # even where the candidate caught the refusal
            reply["native_code"] = list(native_guard.REFUSED)
        return reply

    def op_noop(self, message: dict) -> dict:
        """A bracketed call of nothing, before any candidate code exists here: with a fetch after
        it, the judge measures the honest overhead of a repetition and of a fetch."""
        event, host, _ = self.bracket.rep(noop, ())
        self.last_output = torch.zeros(CALIBRATION_OUTPUT, device=self.device)
        return {"event_ms": event, "host_ms": host}

    def op_load(self, message: dict) -> dict:
        """Import the candidate (this compiles nothing yet: Triton compiles at first launch), with
        the native-code guards armed first."""
        native_guard.arm()
        if self.record is None:
            self.record = StateRecord()
        source = message["source"]
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        self.candidate_file = os.path.join(self.exchange, f"candidate_{digest}.py")
        with open(self.candidate_file, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location("candidate", self.candidate_file)
        self.module = importlib.util.module_from_spec(spec)
        sys.modules["candidate"] = self.module
        spec.loader.exec_module(self.module)
        return {"ok": True}

    def op_reset(self, message: dict) -> dict:
        """Forget the candidate (its module, model, inputs and outputs), as a runner that serves
        another evaluation must; what it changed of the process-wide state (state_audit), and on
        cuda a launch that proves the context still works."""
        sys.modules.pop("candidate", None)
        self.module = self.model = None
        self._drop_timing()
        if self.device == "cuda":
            torch.ones(1, device=self.device).add_(1)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        return {"changed": self.record.changes() if self.record else []}

    def op_compile(self, message: dict) -> dict:
        """In the compile box: one forward call at one size on meta tensors, which compiles
        every kernel it launches (engine.runner.compile_only). A Triton compile error is the
        candidate's, and so is a kernel beyond the target's shared memory; any other failure
        here only means "not compiled ahead" (the candidate may need real values or a GPU,
        which the timing runner has)."""
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import OutOfResources, PTXASError

        init = decode_values(self.exchange, message["init"], "meta")
        state = {k: meta_tensor(d) for k, d in message["state"].items()}
        try:
            model = build_model_new(self.module, init, message["seed"], "meta", state)
            with torch.no_grad():
                model(*decode_values(self.exchange, message["inputs"], "meta"))
        except (CompilationError, PTXASError, OutOfResources) as exc:
            return {"error": {**describe_error(exc, self.candidate_file), "compile": True}}
        except Exception as exc:
            return {"skipped": f"{type(exc).__name__}: {str(exc)[:300]}"}
        return {"compiled": True}

    def op_build(self, message: dict) -> dict:
        """ModelNew for one size, seeded like Model, with Model's weights when they fit."""
        imported = self._receive(message)
        init = decode_values(self.exchange, message["init"], self.device)
        names, described = list(message["state"]), list(message["state"].values())
        weights = decode_values(self.exchange, described, self.device, imported=imported)
        state = dict(zip(names, weights, strict=True))
        self.model = build_model_new(
            self.module, init, message["seed"], self.device, state, message.get("draws", False)
        )
        if self.device == "cuda":
            torch.cuda.synchronize()  # the copies into the model are done before the unmapping
        self._release()
        return {"ok": True}

    # --- GPU memory the judge shares
    def _receive(self, message: dict):
        """The descriptors the judge sent with `message`, and how to map one of them."""
        self._release()
        count = message.get("fds", 0)
        fds = []
        if count:
            _, fds, _, _ = socket.recv_fds(self.share, 16, count)

        def imported(described: dict) -> torch.Tensor:
            shared = Shared.import_fd(fds[described["index"]], described["nbytes"])
            self.imports.append(shared)
            return shared.tensor(DTYPES[described["dtype"]], described["shape"])

        return imported

    def _release(self) -> None:
        for shared in self.imports:
            shared.close()
        self.imports = []

    def op_share_probe(self, message: dict) -> dict:
        """Before any candidate code: whether shared memory works here (the judge checks)."""
        imported = self._receive(message)
        source, target = imported(message["inputs"][0]["shared"]), imported(message["out"][0])
        target.copy_(source)
        torch.cuda.synchronize()
        return {"ok": True}

    def op_call(self, message: dict) -> dict:
        """One guarded forward call; outputs into the judge's buffers or files, and on cuda the
        inputs after it (shared ones the judge reads itself)."""
        imported = self._receive(message)
        args = decode_values(self.exchange, message["inputs"], self.device, True, imported)
        into = [imported(d) for d in message.get("out", [])]
        out, ops = guarded_call(self.model, args, message["poison"])
        if self.device == "cuda":
            torch.cuda.synchronize()  # work the call left on any stream is done
        tag = message["tag"]
        reply = {"ops": ops, "outputs": self._write_outputs(out, tag, into)}
        if self.device == "cuda":
            sent = message["inputs"]
            reply["inputs_after"] = [
                {"in_buffer": True} if "shared" in item else encode_values(
                    self.exchange, f"{tag}_in{i}_", [arg])[0]
                for i, (item, arg) in enumerate(zip(sent, args, strict=True))
            ]  # fmt: skip
            torch.cuda.synchronize()
            del out, args
            torch.cuda.empty_cache()  # the output's blocks back to the device, for the judge
        return reply

    def _write_outputs(self, out, tag: str, into: list | None = None) -> list[dict]:
        """Each output into the judge's buffer when it has the buffer's dtype and shape, else
        to a file (the judge then sees what is wrong with it)."""
        described = []
        for i, o in enumerate(_outputs(out)):
            target = into[i] if into and i < len(into) else None
            if not isinstance(o, torch.Tensor):
                described.append({"type": type(o).__name__})
            elif target is not None and o.dtype == target.dtype and o.shape == target.shape:
                target.copy_(o)
                described.append({"tensor": {"in_buffer": True, "dtype": dtype_name(o.dtype),
                                             "shape": list(o.shape)}})  # fmt: skip
            else:
                described.append({"tensor": write_tensor(self.exchange, f"{tag}_out{i}", o)})
        if self.device == "cuda":
            torch.cuda.synchronize()
        return described

    def op_time_end(self, message: dict) -> dict:
        """A size's timing is over: its input sets and last output go, with the judge's shared
        memory, and on cuda their blocks go back to the device (the judge computes its re-check's
        reference next, beside this process)."""
        self._drop_timing()
        return {"ok": True}

    def _drop_timing(self) -> None:
        self.input_sets, self.last_output = [], None
        self.rotation = InputRotation(self.input_sets)
        self._release()
        gc.enable()
        gc.collect()
        if self.device == "cuda":
            torch.cuda.empty_cache()

    def op_time_begin(self, message: dict) -> dict:
        """Take the input sets onto the device and warm up, round robin; the last warm-up call's
        output is there to fetch. Python's cyclic collector stays off from here: a collection
        inside a timed call or fetch would count as the call's time (this process is short-lived
        and refcounting frees everything acyclic)."""
        imported = self._receive(message)
        self.input_sets = [
            decode_values(self.exchange, s, self.device, imported=imported) for s in message["sets"]
        ]
        self.rotation = InputRotation(self.input_sets)
        with torch.no_grad():
            for r in range(message["warmup"]):
                self.last_output = self.model(*self.input_sets[r % len(self.input_sets)])
        if self.device == "cuda":
            torch.cuda.synchronize()
        gc.collect()
        gc.disable()
        return {"ok": True}

    def op_rep(self, message: dict) -> dict:
        """One timed call on input set `set`; with `fresh`, the set is first given new contents
        inside the timed bracket (the judge's check that the call does the work)."""
        # The last output goes before the call, as the judge's reference output does: held, its
        # memory could not serve the call's own output.
        self.last_output = None
        k, fresh = message["set"], message.get("fresh")

        def call():
            if fresh is not None:
                self.rotation.shift_set(k, fresh)
            return self.model(*self.input_sets[k])

        with torch.no_grad():
            event, host, self.last_output = self.bracket.rep(call, ())
        return {"event_ms": event, "host_ms": host}

    def op_fetch(self, message: dict) -> dict:
        """The last timed call's outputs at the flat positions the judge picked after it ran."""
        index = fetch_positions(int(message["seed"]), int(message["numel"]))
        picked = [
            gather_flat(o, index) if isinstance(o, torch.Tensor) else o
            for o in _outputs(self.last_output)
        ]
        return {"outputs": self._write_outputs(picked, message["tag"])}

    def op_shift(self, message: dict) -> dict:
        """New contents at new addresses for every float input (engine.runner.fresh_inputs),
        done before the reply: none of it spills into the next timed command."""
        self.rotation.shift(message["shift"])
        if self.device == "cuda":
            torch.cuda.synchronize()
        return {"ok": True}


def gather_flat(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`tensor`'s elements at flat (row-major) positions `index`, taken modulo its size, read
    through its strides with one gather: the positions' offsets in its storage are worked out on
    the host, so that a fetch launches what the judge's calibration fetch of a flat tensor
    launches, whatever the output's shape and layout, and a non-contiguous output is not copied
    whole (on the H200 a 4 GiB copy takes 2 ms, which the judge would charge to the call)."""
    flat = index.to("cpu", torch.int64) % max(tensor.numel(), 1)
    if tensor.dim() == 0 or tensor.numel() == 0:
        return tensor.reshape(-1)[flat.to(tensor.device)]
    offsets = torch.zeros_like(flat)
    for size, stride in zip(reversed(tensor.shape), reversed(tensor.stride()), strict=True):
        offsets += flat % size * stride
        flat = flat // size
    span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(),
                                                               strict=True))  # fmt: skip
    return tensor.as_strided((span,), (1,))[offsets.to(tensor.device)]
