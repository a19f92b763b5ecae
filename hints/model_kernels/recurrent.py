"""Recurrent layers (nn.RNN, nn.LSTM, nn.GRU) as Triton kernels, two launches a layer: one tiled
product projects the input of every time step (both directions at once), then one sequence
kernel walks the time steps, each multiplying the previous hidden state by W_hh with the gate
math fused, writing h straight into the layer's output (and c into c_n). One launch per step
instead would cost a launch's overhead a step (3072 for a 6-layer LSTM over 512 steps)."""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_DOT_PRECISION,
    KB_RECURRENT,
    KB_TILES,
    kb_cdiv,
    kb_interpreted,
    kb_next_power_of_2,
)
from hints.model_kernels.elementwise import _elementwise_tanh

# Gate rows per hidden unit in W_ih / W_hh, by nn.RNNBase.mode.
_recurrent_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
# The sequence kernel's MODE constexpr, by nn.RNNBase.mode.
_recurrent_MODE = {"RNN_TANH": 0, "RNN_RELU": 1, "LSTM": 2, "GRU": 3}
# Tiles of the input projection (a GEMM of T*B rows; tl.dot needs >= 16).
_recurrent_PROJECTION_TILE = 64
# The sequence kernel's (hidden units a tile, warps) on a GPU, by KB_TILES: a program walks
# every tile of its rows' units, or under KB_RECURRENT "spread" owns one.
_recurrent_GPU_TILES = {"small": (32, 4), "base": (64, 4), "large": (128, 8)}
_recurrent_SPREAD_TILES = {"small": (16, 4), "base": (32, 4), "large": (64, 4)}
# How many times a spread program reads its step's counter before it gives up waiting (seconds
# on a GPU, where a step's wait is microseconds): a GPU that does not hold every program at once
# then gets a wrong answer, which the gate refuses, rather than a hang.
_recurrent_SPIN_LIMIT = 1 << 22


@triton.jit
def _recurrent_pick(direction, forward_ptr, backward_ptr):
    """The forward direction's pointer for direction 0, the backward one's for direction 1."""
    ptr = forward_ptr
    if direction == 1:
        ptr = backward_ptr
    return ptr


@triton.jit
def _recurrent_input_projection_kernel(
    x_ptr, x_st, x_sb, x_sk,
    w_fwd, w_bwd, w_sn, b_ih_fwd, b_ih_bwd, b_hh_fwd, b_hh_bwd,
    gx_ptr, M, B, N, K, FOLDED_HH,
    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """gx[d, t*B + b, n] = x[t, b] . W_ih[d][n] + b_ih[d][n] (+ b_hh[d][n] for n < FOLDED_HH,
    the hidden biases that add straight to a gate): every time step at once. W_ih's rows are
    w_sn apart, its columns adjacent."""
    pid_m, pid_n, d = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    w_ptr = _recurrent_pick(d, w_fwd, w_bwd)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok, col_ok = rows < M, cols < N
    x_rows = x_ptr + (rows // B) * x_st + (rows % B) * x_sb
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        x = tl.load(x_rows[:, None] + ks[None, :] * x_sk, row_ok[:, None] & k_ok[None, :], 0.0)
        w = tl.load(
            w_ptr + cols[None, :] * w_sn + ks[:, None], k_ok[:, None] & col_ok[None, :], 0.0
        )
        acc += tl.dot(x, w, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(_recurrent_pick(d, b_ih_fwd, b_ih_bwd) + cols, col_ok, 0.0)[None, :]
        folded = col_ok & (cols < FOLDED_HH)
        acc += tl.load(_recurrent_pick(d, b_hh_fwd, b_hh_bwd) + cols, folded, 0.0)[None, :]
    out = gx_ptr + d * M * N + rows[:, None] * N + cols[None, :]
    tl.store(out, acc.to(gx_ptr.dtype.element_ty), row_ok[:, None] & col_ok[None, :])


@triton.jit
def _recurrent_product(acc, h_rows, w_rows, H, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """acc + h_prev . W^T for a tile, fp32: h_rows points at each batch row of h_prev, w_rows at
    each W_hh row of the tile's units (H adjacent values each)."""
    for k0 in range(0, H, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < H
        # from L2: under KB_RECURRENT "spread" other programs wrote h_prev
        h = tl.load(h_rows[:, None] + ks[None, :], k_ok[None, :], 0.0, cache_modifier=".cg")
        w = tl.load(w_rows[None, :] + ks[:, None], k_ok[:, None], 0.0)
        acc = tl.dot(h.to(tl.float32), w.to(tl.float32), acc, input_precision=PRECISION)
    return acc


@triton.jit
def _recurrent_gate(
    gx, gate, h_rows, w_rows, w_sn, H, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr
):
    """One gate's pre-activation for a tile: its projected input plus its hidden product (W_hh's
    rows w_sn apart)."""
    acc = tl.load(gx + gate * H).to(tl.float32)
    return _recurrent_product(acc, h_rows, w_rows + gate * H * w_sn, H, BLOCK_K, PRECISION)


@triton.jit
def _recurrent_lstm_cell(
    gx, h_rows, w_rows, w_sn, c_prev, H, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr
):
    """LSTM (gates i, f, g, o): c = f * c_prev + i * g, h = o * tanh(c); returns (h, c)."""
    i = tl.sigmoid(_recurrent_gate(gx, 0, h_rows, w_rows, w_sn, H, BLOCK_K, PRECISION))
    f = tl.sigmoid(_recurrent_gate(gx, 1, h_rows, w_rows, w_sn, H, BLOCK_K, PRECISION))
    g = _elementwise_tanh(_recurrent_gate(gx, 2, h_rows, w_rows, w_sn, H, BLOCK_K, PRECISION))
    o = tl.sigmoid(_recurrent_gate(gx, 3, h_rows, w_rows, w_sn, H, BLOCK_K, PRECISION))
    c = f * c_prev + i * g
    return o * _elementwise_tanh(c), c


@triton.jit
def _recurrent_gru_cell(
    gx, h_rows, w_rows, w_sn, bias_n, h_prev, H, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr
):
    """GRU (gates r, z, n): n = tanh(x_n + r * (W_hn h + b_hn)), h = (1 - z) * n + z * h_prev;
    bias_n is b_hn broadcast over the tile (zeros without bias)."""
    r = tl.sigmoid(_recurrent_gate(gx, 0, h_rows, w_rows, w_sn, H, BLOCK_K, PRECISION))
    z = tl.sigmoid(_recurrent_gate(gx, 1, h_rows, w_rows, w_sn, H, BLOCK_K, PRECISION))
    hidden_n = _recurrent_product(bias_n, h_rows, w_rows + 2 * H * w_sn, H, BLOCK_K, PRECISION)
    n = _elementwise_tanh(tl.load(gx + 2 * H).to(tl.float32) + r * hidden_n)
    return (1.0 - z) * n + z * h_prev


@triton.jit
def _recurrent_sequence_kernel(
    gx_ptr, gx_sb, w_fwd, w_bwd, w_sn, b_hh_fwd, b_hh_bwd,
    out_ptr, out_st, out_sb, h0_ptr, hn_ptr, c0_ptr, c_work_ptr, cn_ptr, sync_ptr, T, B, H,
    MODE: tl.constexpr, HAS_BIAS: tl.constexpr, SPREAD: tl.constexpr, SPIN_LIMIT: tl.constexpr,
    BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """Every time step of one layer for a tile of batch rows (axis 1), both directions (axis 2),
    in one launch: at step s direction d is at time t = s (forward) or T - 1 - s (backward).
    Without SPREAD a program owns every hidden unit of its rows, so the step after reads the h
    that this program wrote (in out[t]) past a barrier, and no program waits on another. With
    SPREAD each program owns a tile of units (axis 0) and the programs of the same rows and
    direction meet after each step at a counter of sync (int32 zeros, one per rows and
    direction): all of them must be resident at once (a program gives up after SPIN_LIMIT reads
    of the counter). h_prev is h0 at the first step, c_prev c0;
    c ping-pongs between the halves of c_work (a step never overwrites what another unit tile of
    it still reads). h_n and c_n take the last step's h and c. MODE: 0 tanh RNN, 1 relu RNN, 2
    LSTM, 3 GRU. h0, h_n, c0, c_n and each half of c_work are contiguous (D, B, H); gx is (D, T,
    B, gates * H); W_hh's rows are w_sn apart, its columns adjacent."""
    pid_u, pid_b, d = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    batch = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    batch_ok = batch < B
    # Clamped indices: every load stays in bounds unmasked; the stores drop the extra rows.
    batch = tl.minimum(batch, B - 1)
    w_ptr = _recurrent_pick(d, w_fwd, w_bwd)
    half = tl.num_programs(2) * B * H
    h_rows = h0_ptr + d * B * H + batch * H
    sync = sync_ptr + d * tl.num_programs(1) + pid_b
    if SPREAD:
        u_first, u_end = pid_u * BLOCK_H, pid_u * BLOCK_H + BLOCK_H
    else:
        u_first, u_end = 0, H
    for step in range(T):
        t = step + d * (T - 1 - 2 * step)
        c_next_ptr = c_work_ptr + (step % 2) * half
        for u0 in range(u_first, u_end, BLOCK_H):
            units = u0 + tl.arange(0, BLOCK_H)
            ok = batch_ok[:, None] & (units < H)[None, :]
            units = tl.minimum(units, H - 1)
            gx = gx_ptr + (d * T + t) * B * gx_sb + batch[:, None] * gx_sb + units[None, :]
            w_rows = w_ptr + units * w_sn
            state = d * B * H + batch[:, None] * H + units[None, :]
            if MODE == 2:
                if step == 0:
                    c_prev = tl.load(c0_ptr + state).to(tl.float32)
                else:
                    c_prev = tl.load(c_work_ptr + ((step - 1) % 2) * half + state)
                h, c = _recurrent_lstm_cell(gx, h_rows, w_rows, w_sn, c_prev, H, BLOCK_K, PRECISION)
                tl.store(c_next_ptr + state, c, ok)
                if step == T - 1:
                    tl.store(cn_ptr + state, c.to(cn_ptr.dtype.element_ty), ok)
            elif MODE == 3:
                bias_n = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
                if HAS_BIAS:
                    b_hh = _recurrent_pick(d, b_hh_fwd, b_hh_bwd)
                    bias_n += tl.load(b_hh + 2 * H + units)[None, :]
                h_prev = tl.load(h_rows[:, None] + units[None, :], cache_modifier=".cg")
                h_prev = h_prev.to(tl.float32)
                h = _recurrent_gru_cell(
                    gx, h_rows, w_rows, w_sn, bias_n, h_prev, H, BLOCK_K, PRECISION
                )
            else:
                pre = _recurrent_gate(gx, 0, h_rows, w_rows, w_sn, H, BLOCK_K, PRECISION)
                h = tl.maximum(pre, 0.0) if MODE == 1 else _elementwise_tanh(pre)
            out = out_ptr + t * out_st + batch[:, None] * out_sb + d * H + units[None, :]
            tl.store(out, h.to(out_ptr.dtype.element_ty), ok)
            if step == T - 1:
                tl.store(hn_ptr + state, h.to(hn_ptr.dtype.element_ty), ok)
        # The next step reads this one's h and c, written by the program's other threads (and,
        # spread, by the other programs of these rows: each counts itself in, then waits for all).
        tl.debug_barrier()
        if SPREAD:
            tl.atomic_add(sync, 1, sem="release", scope="gpu")
            arrived = (step + 1) * tl.num_programs(0)
            spins = 0
            while (tl.atomic_add(sync, 0, sem="acquire", scope="gpu") < arrived) & (
                spins < SPIN_LIMIT
            ):
                spins += 1
            tl.debug_barrier()
        h_rows = out_ptr + t * out_st + d * H + batch * out_sb


def _recurrent_block(size: int, largest: int) -> int:
    """A power-of-two tile edge for `size`: at least 16 (tl.dot's least), at most `largest`."""
    return min(largest, max(16, kb_next_power_of_2(size)))


def _recurrent_check_supported(module: nn.RNNBase, input) -> None:
    if not isinstance(input, torch.Tensor):
        raise NotImplementedError(f"{type(module).__name__}: only tensor input (no PackedSequence)")
    if module.proj_size:
        raise NotImplementedError(f"{type(module).__name__}: proj_size > 0 is not supported")
    if module.training and module.dropout > 0 and module.num_layers > 1:
        raise NotImplementedError(
            f"{type(module).__name__}: dropout between layers in training mode is not supported "
            "(call .eval())"
        )
    if input.dim() not in (2, 3):
        raise ValueError(
            f"{type(module).__name__}: Expected input to be 2D or 3D, got {input.dim()}D instead"
        )


def _recurrent_initial_states(module: nn.RNNBase, input, hx, batched: bool) -> tuple:
    """h0 (and c0 for an LSTM) as contiguous (layers * directions, batch, hidden) tensors, zeros
    where hx is None, checked as torch checks them; `input` is already 3-D."""
    is_lstm = module.mode == "LSTM"
    if hx is None:
        directions = 2 if module.bidirectional else 1
        batch = input.size(0 if module.batch_first else 1)
        zeros = input.new_zeros(module.num_layers * directions, batch, module.hidden_size)
        states = (zeros, zeros) if is_lstm else (zeros,)
    else:
        states = tuple(hx) if is_lstm else (hx,)
        expected = 3 if batched else 2
        if any(state.dim() != expected for state in states):
            form = "batched 3-D" if batched else "unbatched 2-D"
            dims = ", ".join(f"{state.dim()}-D" for state in states)
            raise RuntimeError(f"For {form} input, hx should also be {expected}-D but got {dims}")
        if not batched:
            states = tuple(state.unsqueeze(1) for state in states)
    module.check_forward_args(input, states if is_lstm else states[0], None)
    return tuple(state.contiguous() for state in states)


def _recurrent_layer_params(module: nn.RNNBase, layer: int) -> dict:
    """Each parameter of a layer (w_ih, w_hh, b_ih, b_hh) as a (forward, backward) pair of
    contiguous tensors; a one-direction layer repeats its own, a layer without bias gets None.
    (The kernels take weights whose columns are adjacent, their rows any distance apart.)"""
    directions = 2 if module.bidirectional else 1
    pairs = [module.all_weights[layer * directions + d] for d in (0, directions - 1)]
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    return {name: tuple(p[k].contiguous() for p in pairs) if k < len(pairs[0]) else None
            for k, name in enumerate(names)}  # fmt: skip


def _recurrent_project(x, params: dict, folded_hh: int, directions: int):
    """The input projection of every time step of a layer, (directions, T, B, gates * H) fp32;
    x is (T, B, features), any strides; without b_hh, folded_hh is 0."""
    T, B, K = x.shape
    w_fwd, w_bwd = params["weight_ih"]
    N, M = w_fwd.shape[0], T * B
    gx = torch.empty((directions, T, B, N), device=x.device, dtype=torch.float32)
    b_ih = params["bias_ih"]
    biases = (*b_ih, *(params["bias_hh"] or b_ih)) if b_ih else (w_fwd,) * 4
    block_m = _recurrent_block(M, _recurrent_PROJECTION_TILE)
    block_n = _recurrent_block(N, _recurrent_PROJECTION_TILE)
    grid = (kb_cdiv(M, block_m), kb_cdiv(N, block_n), directions)
    _recurrent_input_projection_kernel[grid](
        x, x.stride(0), x.stride(1), x.stride(2), w_fwd, w_bwd, w_fwd.stride(0), *biases,
        gx, M, B, N, K, folded_hh,
        HAS_BIAS=params["bias_ih"] is not None, BLOCK_M=block_m, BLOCK_N=block_n,
        BLOCK_K=_recurrent_block(K, 32), PRECISION=KB_DOT_PRECISION,
    )  # fmt: skip
    return gx


def _recurrent_sequence_tiles(B: int, H: int, directions: int, x) -> tuple:
    """(BLOCK_B, BLOCK_H, BLOCK_K, warps, whether programs own a unit tile each) of the sequence
    kernel: on a GPU, hidden-unit tiles by KB_TILES, spread over programs where KB_RECURRENT
    says so and every program fits on the GPU at once (they wait on one another); in the
    interpreter, which pays per operation and runs one program at a time, the whole hidden width
    at once."""
    spread = KB_RECURRENT == "spread"
    if kb_interpreted(x):
        block_h = kb_next_power_of_2(H) if spread else _recurrent_block(H, 256)
        return _recurrent_block(B, 64), block_h, _recurrent_block(H, 256), 4, spread
    block_b = _recurrent_block(B, 32)
    if spread:
        block_h, warps = _recurrent_SPREAD_TILES[KB_TILES]
        block_h = _recurrent_block(H, block_h)
        programs = kb_cdiv(H, block_h) * kb_cdiv(B, block_b) * directions
        if programs <= _recurrent_multiprocessors(x.device):
            return block_b, block_h, _recurrent_block(H, 128), warps, True
    block_h, warps = _recurrent_GPU_TILES[KB_TILES]
    return block_b, _recurrent_block(H, block_h), _recurrent_block(H, 128), warps, False


@functools.lru_cache
def _recurrent_multiprocessors(device) -> int:
    """The GPU's multiprocessors; on the compile box's meta tensors, no limit (it compiles what
    a GPU that holds the plan runs)."""
    if device.type != "cuda":
        return 1 << 30
    return torch.cuda.get_device_properties(device).multi_processor_count


def _recurrent_run_layer(mode: str, x, out, params: dict, h0, hn, c0, cn) -> None:
    """One layer (nn.RNNBase.mode `mode`) over the whole sequence: project x, then one launch for
    every time step. out is the layer's (T, B, directions * H) output (any strides, unit feature
    stride); h0, hn (and c0, cn for an LSTM) are the layer's contiguous (directions, B, H)
    slices."""
    T, B = x.shape[0], x.shape[1]
    directions, H = h0.shape[0], h0.shape[2]
    gates = _recurrent_GATES[mode]
    has_hh_bias = params["bias_hh"] is not None
    folded_hh = (2 * H if mode == "GRU" else gates * H) if has_hh_bias else 0
    gx = _recurrent_project(x, params, folded_hh, directions)
    w_hh = params["weight_hh"]
    b_hh = params["bias_hh"] or w_hh
    c0, cn = (c0, cn) if cn is not None else (hn, hn)
    c_work = gx.new_empty((2, directions, B, H) if mode == "LSTM" else (1,))
    block_b, block_h, block_k, warps, spread = _recurrent_sequence_tiles(B, H, directions, x)
    grid = (kb_cdiv(H, block_h) if spread else 1, kb_cdiv(B, block_b), directions)
    # the spread programs' meeting counters (unused, and not allocated, otherwise)
    sync = torch.zeros(grid[1] * directions, dtype=torch.int32, device=x.device) if spread else gx
    _recurrent_sequence_kernel[grid](
        gx, gates * H, *w_hh, w_hh[0].stride(0), *b_hh,
        out, out.stride(0), out.stride(1), h0, hn, c0, c_work, cn, sync, T, B, H,
        MODE=_recurrent_MODE[mode], HAS_BIAS=has_hh_bias, SPREAD=spread,
        SPIN_LIMIT=_recurrent_SPIN_LIMIT,
        BLOCK_B=block_b, BLOCK_H=block_h, BLOCK_K=block_k, PRECISION=KB_DOT_PRECISION,
        num_warps=warps,
    )  # fmt: skip


def _recurrent_forward(module: nn.RNNBase, input, hx):
    """What nn.RNN / nn.LSTM / nn.GRU's forward returns, computed by the kernels above."""
    _recurrent_check_supported(module, input)
    batched = input.dim() == 3
    if not batched:
        input = input.unsqueeze(0 if module.batch_first else 1)
    states = _recurrent_initial_states(module, input, hx, batched)
    x = input.transpose(0, 1) if module.batch_first else input
    T, B = x.shape[0], x.shape[1]
    H, directions = module.hidden_size, 2 if module.bidirectional else 1
    shape = (B, T, directions * H) if module.batch_first else (T, B, directions * H)
    output = input.new_empty(shape)
    final = output.transpose(0, 1) if module.batch_first else output
    finals = tuple(torch.empty_like(state) for state in states)
    for layer in range(module.num_layers):
        last = layer == module.num_layers - 1
        out = final if last else x.new_empty((T, B, directions * H))
        rows = slice(layer * directions, (layer + 1) * directions)
        h0, c0 = states[0][rows], states[-1][rows]
        cn = finals[1][rows] if module.mode == "LSTM" else None
        hn = finals[0][rows]
        params = _recurrent_layer_params(module, layer)
        _recurrent_run_layer(module.mode, x, out, params, h0, hn, c0, cn)
        x = out
    if not batched:
        output = output.squeeze(0 if module.batch_first else 1)
        finals = tuple(state.squeeze(1) for state in finals)
    return output, (finals if module.mode == "LSTM" else finals[0])


class KbRNN(nn.RNN):
    """nn.RNN (tanh or relu) through the recurrent kernels."""

    def forward(self, input, hx=None):
        return _recurrent_forward(self, input, hx)


class KbLSTM(nn.LSTM):
    """nn.LSTM through the recurrent kernels."""

    def forward(self, input, hx=None):
        return _recurrent_forward(self, input, hx)


class KbGRU(nn.GRU):
    """nn.GRU through the recurrent kernels."""

    def forward(self, input, hx=None):
        return _recurrent_forward(self, input, hx)


def kb_elman_sequence(x, h0, linear: nn.Linear, act: str, steps: int, input_first: bool):
    """What `for t in range(steps): h = act(linear(torch.cat((x[t], h), dim=-1)))` computes
    (`(h, x[t])` where not input_first; act "tanh" or "relu"), two launches in all: the states of
    every step, (steps, batch, hidden), and the last state (h0 after no step). The linear
    layer's weight splits by columns into the input's and the state's."""
    if x.dim() != 3 or h0.dim() != 2 or x.dtype != h0.dtype:
        raise NotImplementedError(
            "kb_elman_sequence: x must be (steps, batch, features) and h (batch, hidden), "
            f"of one dtype; got {tuple(x.shape)} {x.dtype} and {tuple(h0.shape)} {h0.dtype}"
        )
    if steps > x.shape[0]:
        raise IndexError(
            f"index {x.shape[0]} is out of bounds for dimension 0 with size {x.shape[0]}"
        )
    B, features, H = x.shape[1], x.shape[2], h0.shape[1]
    if h0.shape[0] != B or tuple(linear.weight.shape) != (H, features + H):
        raise RuntimeError(
            f"kb_elman_sequence: a step concatenates {B}x{features} and {tuple(h0.shape)} into a "
            f"linear layer of weight {tuple(linear.weight.shape)}; expected ({H}, {features + H})"
        )
    out = x.new_empty((steps, B, H))
    if steps == 0:
        return out, h0
    w = linear.weight
    w_x, w_h = (w[:, :features], w[:, features:]) if input_first else (w[:, H:], w[:, :H])
    bias = None if linear.bias is None else (linear.bias, linear.bias)
    params = {"weight_ih": (w_x, w_x), "weight_hh": (w_h, w_h), "bias_ih": bias, "bias_hh": None}
    h0 = h0.contiguous().unsqueeze(0)
    hn = torch.empty_like(h0)
    mode = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}[act]
    _recurrent_run_layer(mode, x[:steps], out, params, h0, hn, None, None)
    return out, hn[0]
