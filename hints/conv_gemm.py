"""The conv family's implicit-GEMM templates (tl.dot on tensor cores): the flattened GEMM over
(input channel, tap), and the tap-by-tap GEMM with phases for strided transposed convolutions."""

from hints.conv_templates import HEADER, MODEL

GEMM_HEADER = (
    HEADER
    + '''
# A tensor core reading fp32 as TF32 drops the low 13 mantissa bits (truncates): its error is
# biased and about twice cuDNN's, which rounds. Operands are rounded to nearest first, once, as
# they are copied for the GEMM: rounded at each of the GEMM's loads instead, a value is rounded
# once per tap and the loop ran up to 1.9x slower on the H200 (the implicit GEMM of
# 50_conv_standard_2D: 5.0 against 2.7 ms).
ROUND_TO_TF32 = "$precision" == "tf32"


@triton.jit
def round_to_tf32(x):
    """x rounded to TF32's 10 mantissa bits, to nearest (ties away from zero)."""
    bits = x.to(tl.int32, bitcast=True)  # the sign apart, the magnitude's bits in order
    return ((bits + 0x1000) & -0x2000).to(tl.float32, bitcast=True)  # half an ulp up, 13 bits off


@triton.jit
def operand_copy_kernel(src, dst, C, P, CHANNELS_LAST: tl.constexpr, ROUND_TF32: tl.constexpr,
                        BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    """dst = src ([N, C, P]), rounded to TF32 where ROUND_TF32, as [N, P, C] where CHANNELS_LAST
    (a tile read along positions, written along channels) else as [N, C, P]."""
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
    sample = tl.program_id(2).to(tl.int64) * C * P
    ok = (c < C)[:, None] & (p < P)[None, :]
    value = tl.load(src + sample + c[:, None] * P + p[None, :], mask=ok)
    if ROUND_TF32:
        value = round_to_tf32(value)
    if CHANNELS_LAST:
        tl.store(dst + sample + p[None, :] * C + c[:, None], value, mask=ok)
    else:
        tl.store(dst + sample + c[:, None] * P + p[None, :], value, mask=ok)


def operand_copy(x, channels_last):
    """x ([N, C, D, H, W]) as a GEMM reads it, in one pass: rounded to TF32 where ROUND_TO_TF32,
    as [N, D, H, W, C] where `channels_last`; x itself where neither is asked."""
    if not (channels_last or ROUND_TO_TF32):
        return x
    x = x.contiguous()
    N, C = x.shape[:2]
    P = x[0, 0].numel()
    out = torch.empty((N, *x.shape[2:], C) if channels_last else x.shape, device=x.device,
                      dtype=x.dtype)
    grid = (triton.cdiv(P, 64), triton.cdiv(C, 32), N)
    operand_copy_kernel[grid](x, out, C, P, CHANNELS_LAST=channels_last,
                              ROUND_TF32=ROUND_TO_TF32, BLOCK_C=32, BLOCK_P=64)
    return out


def weights_copy(w):
    """w contiguous, rounded to TF32 where ROUND_TO_TF32 (by operand_copy's kernel: the math of a
    candidate's forward is Triton's, the gate refuses torch arithmetic)."""
    w = w.contiguous()
    if not ROUND_TO_TF32:
        return w
    return operand_copy(w.view(1, 1, -1), False).view(w.shape)


@triton.jit
def store_gemm_tile(acc, out_ptr, bias_ptr, n, g, co, co_ok, offs_p, p_ok, CO, COUT_G, OD, OH,
                    OW, HAS_BIAS: tl.constexpr, EPILOGUE: tl.constexpr$epilogue_params):
    """Bias, the fused epilogue and the store of a [positions x output channels] tile."""
    co += g * COUT_G
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    if EPILOGUE:
        acc = epilogue(acc, co[None, :], co_ok[None, :]$epilogue_params)
    # Stored as [output channels x positions], positions along the threads of a warp: a tile
    # stored as it is computed puts a channel per thread, DHW apart (4 MB at 1024 x 1024).
    out_ptrs = out_ptr + (n * CO + co).to(tl.int64)[:, None] * (OD * OH * OW) + offs_p[None, :]
    tl.store(out_ptrs, tl.trans(acc).to(out_ptr.dtype.element_ty),
             mask=co_ok[:, None] & p_ok[None, :])
'''
)

IMPLICIT_GEMM_TEMPLATE = (
    GEMM_HEADER
    + '''
@triton.jit
def conv_gemm_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, D, H, W, CO, OD, OH, OW, CIN_G,
                     COUT_G, G, W_CO, W_CI, KD: tl.constexpr, KH: tl.constexpr,
                     KW: tl.constexpr, STRIDE_D: tl.constexpr, STRIDE_H: tl.constexpr,
                     STRIDE_W: tl.constexpr, PAD_D: tl.constexpr, PAD_H: tl.constexpr,
                     PAD_W: tl.constexpr, DIL_D: tl.constexpr, DIL_H: tl.constexpr,
                     DIL_W: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                     EPILOGUE: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr,
                     BLOCK_K: tl.constexpr$epilogue_params):
    """Per (sample, group): out[p, co] = sum_k patches[p, k] * w[k, co], with
    k = (input channel, kd, kh, kw) gathered on the fly (no im2col buffer)."""
    n, g, offs_p, p_ok, od, oh, ow, co, co_ok = output_tile(
        OD, OH, OW, COUT_G, G, BLOCK_P, BLOCK_CO
    )
    x_group = x_ptr + (n * C + g * CIN_G).to(tl.int64) * D * H * W
    w_group = w_ptr + g * (CIN_G * COUT_G * KD * KH * KW)
    k_total = CIN_G * KD * KH * KW
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    for k0 in range(0, k_total, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < k_total
        ci = offs_k // (KD * KH * KW)
        tap = offs_k % (KD * KH * KW)
        # [positions x reduction]: K-major, as the tensor cores read it (see tap_product).
        idd, d_ok = tap_input(od[:, None], (tap // (KH * KW))[None, :], D, STRIDE_D, PAD_D,
                              DIL_D, TRANSPOSED)
        ih, h_ok = tap_input(oh[:, None], ((tap // KW) % KH)[None, :], H, STRIDE_H, PAD_H,
                             DIL_H, TRANSPOSED)
        iw, w_ok = tap_input(ow[:, None], (tap % KW)[None, :], W, STRIDE_W, PAD_W, DIL_W,
                             TRANSPOSED)
        ok = p_ok[:, None] & k_ok[None, :] & d_ok & h_ok & w_ok
        a = tl.load(x_group + ci[None, :] * (D * H * W) + (idd * H + ih) * W + iw, mask=ok,
                    other=0.0)
        b = tl.load(w_group + co[None, :] * W_CO + (ci * W_CI + tap)[:, None],
                    mask=k_ok[:, None] & co_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="$precision")
    store_gemm_tile(acc, out_ptr, bias_ptr, n, g, co, co_ok, offs_p, p_ok, CO, COUT_G, OD, OH, OW,
                    HAS_BIAS, EPILOGUE$epilogue_params)
'''
)


def gemm_launch(kernel: str, reduction: str, blocks: str, operands: str = "") -> str:
    """launch(): `kernel` over (sample, group, `blocks` of output positions) x blocks of output
    channels where the GEMM's `reduction` and the group's output channels reach tl.dot's 16,
    else the direct kernel; `operands`, a function of the template, lays x and w out for the
    kernel first."""
    prepare = f"\n    x, w, args = {operands}(x, w, args)" if operands else ""
    return f"""

def launch(x, w, bias, out, N, args, **flags):
    cout_g = args["COUT_G"]
    if min({reduction}, cout_g) < $MIN_DOT_CHANNELS:
        launch_direct(x, w, bias, out, N, args, **flags)
        return{prepare}
    block_co = max(16, min(triton.next_power_of_2(cout_g), $GEMM_BLOCK_CO))
    grid = (N * args["G"] * {blocks}, triton.cdiv(cout_g, block_co))
    {kernel}[grid](x, w, bias, out, **args, **flags, BLOCK_P=$GEMM_BLOCK_P, BLOCK_CO=block_co,
                   BLOCK_K=$BLOCK_K, num_warps=$gemm_num_warps, num_stages=$num_stages)
"""


IMPLICIT_GEMM_TEMPLATE += (
    gemm_launch(
        "conv_gemm_kernel",
        reduction='args["CIN_G"] * args["KD"] * args["KH"] * args["KW"]',
        blocks='triton.cdiv(args["OD"] * args["OH"] * args["OW"], $GEMM_BLOCK_P)',
        operands="gemm_operands",
    )
    + '''

def gemm_operands(x, w, args):
    """x and w as the GEMM reads them: as given (NCDHW), rounded to TF32 where ROUND_TO_TF32."""
    return operand_copy(x, False), weights_copy(w), args
'''
    + MODEL
)

TAP_GEMM_TEMPLATE = (
    GEMM_HEADER
    + '''
@triton.jit
def phase_tile(OD, OH, OW, G, SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
               BLOCK_P: tl.constexpr):
    """This program's (sample, group), its output positions (flat, each as od, oh, ow, and
    which exist) and their phase (pd, ph, pw): the outputs o = phase + S * q of one phase of the
    strides (SD, SH, SW), q running over a block. Program 0 walks (sample, group, phase,
    block)."""
    QD, QH, QW = tl.cdiv(OD, SD), tl.cdiv(OH, SH), tl.cdiv(OW, SW)
    p_blocks = tl.cdiv(QD * QH * QW, BLOCK_P)
    pid = tl.program_id(0)
    ngp, block = pid // p_blocks, pid % p_blocks
    phase, ng = ngp % (SD * SH * SW), ngp // (SD * SH * SW)
    pd, ph, pw = phase // (SH * SW), (phase // SW) % SH, phase % SW
    q = block * BLOCK_P + tl.arange(0, BLOCK_P)
    od, oh, ow = pd + SD * (q // (QH * QW)), ph + SH * ((q // QW) % QH), pw + SW * (q % QW)
    p_ok = (q < QD * QH * QW) & (od < OD) & (oh < OH) & (ow < OW)
    return ng // G, ng % G, (od * OH + oh) * OW + ow, p_ok, od, oh, ow, pd, ph, pw


@triton.jit
def tap_product(acc, x_group, w_group, at, at_ok, c0, tap, co, co_ok, C, CIN_G, DHW, W_CO, W_CI,
                W_TAP, CHANNELS_LAST: tl.constexpr, BLOCK_K: tl.constexpr):
    """acc plus the product of input channels [c0, c0 + BLOCK_K) at positions `at` (where
    `at_ok`) with their weights through `tap`."""
    ci = c0 + tl.arange(0, BLOCK_K)
    ci_ok = ci < CIN_G
    # [positions x channels]: K-major, as Hopper's TF32 products read their operands. On the
    # H200, loading [channels x positions] along positions and transposing (b50a93d) ran 2 to 5
    # times slower than channels-last at the same tiles. Channels-last, the channels are
    # contiguous too: coalesced.
    if CHANNELS_LAST:
        a = tl.load(x_group + at.to(tl.int64)[:, None] * C + ci[None, :],
                    mask=at_ok[:, None] & ci_ok[None, :], other=0.0)
    else:
        a = tl.load(x_group + ci[None, :] * DHW + at[:, None],
                    mask=at_ok[:, None] & ci_ok[None, :], other=0.0)
    b = tl.load(w_group + co[None, :] * W_CO + (ci * W_CI + tap * W_TAP)[:, None],
                mask=ci_ok[:, None] & co_ok[None, :], other=0.0)
    return tl.dot(a, b, acc, input_precision="$precision")


@triton.jit
def conv_tap_gemm_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, D, H, W, CO, OD, OH, OW, CIN_G,
                         COUT_G, G, W_CO, W_CI, W_TAP, KD: tl.constexpr, KH: tl.constexpr,
                         KW: tl.constexpr, STRIDE_D: tl.constexpr, STRIDE_H: tl.constexpr,
                         STRIDE_W: tl.constexpr, PAD_D: tl.constexpr, PAD_H: tl.constexpr,
                         PAD_W: tl.constexpr, DIL_D: tl.constexpr, DIL_H: tl.constexpr,
                         DIL_W: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                         EPILOGUE: tl.constexpr, CHANNELS_LAST: tl.constexpr,
                         BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr,
                         BLOCK_K: tl.constexpr$epilogue_params):
    """Per (sample, group), tap by tap: out[p, co] += x[ci, input of p through the tap] *
    w[co, ci, tap]. A tap's input positions and masks are vectors over the tile's positions,
    worked out once per step; the reduction runs over contiguous input channels. Without
    phases, one loop over (tap, channel block), which Triton pipelines whole. A transposed
    convolution with a stride has phases: its tile holds outputs of one phase, which reads
    through a fixed subset of the taps, and the others are skipped, not masked."""
    SD: tl.constexpr = STRIDE_D if TRANSPOSED else 1
    SH: tl.constexpr = STRIDE_H if TRANSPOSED else 1
    SW: tl.constexpr = STRIDE_W if TRANSPOSED else 1
    n, g, offs_p, p_ok, od, oh, ow, pd, ph, pw = phase_tile(OD, OH, OW, G, SD, SH, SW, BLOCK_P)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    co_ok = co < COUT_G
    if CHANNELS_LAST:  # [N, D, H, W, C]
        x_group = x_ptr + n.to(tl.int64) * D * H * W * C + g * CIN_G
    else:
        x_group = x_ptr + (n * C + g * CIN_G).to(tl.int64) * D * H * W
    w_group = w_ptr + g * (CIN_G * COUT_G * KD * KH * KW)
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    if SD * SH * SW == 1:
        blocks = tl.cdiv(CIN_G, BLOCK_K)
        for step in range(KD * KH * KW * blocks):
            tap = step // blocks
            kd, kh, kw = tap // (KH * KW), (tap // KW) % KH, tap % KW
            idd, d_ok = tap_input(od, kd, D, STRIDE_D, PAD_D, DIL_D, TRANSPOSED)
            ih, h_ok = tap_input(oh, kh, H, STRIDE_H, PAD_H, DIL_H, TRANSPOSED)
            iw, w_ok = tap_input(ow, kw, W, STRIDE_W, PAD_W, DIL_W, TRANSPOSED)
            acc = tap_product(acc, x_group, w_group, (idd * H + ih) * W + iw,
                              p_ok & d_ok & h_ok & w_ok, (step % blocks) * BLOCK_K, tap, co,
                              co_ok, C, CIN_G, D * H * W, W_CO, W_CI, W_TAP, CHANNELS_LAST,
                              BLOCK_K)
    else:
        for kd in range(KD):
            idd, d_ok = tap_input(od, kd, D, STRIDE_D, PAD_D, DIL_D, TRANSPOSED)
            for kh in range(KH):
                ih, h_ok = tap_input(oh, kh, H, STRIDE_H, PAD_H, DIL_H, TRANSPOSED)
                for kw in range(KW):
                    iw, w_ok = tap_input(ow, kw, W, STRIDE_W, PAD_W, DIL_W, TRANSPOSED)
                    reads = (((pd + PAD_D - kd * DIL_D) % SD == 0)
                             & ((ph + PAD_H - kh * DIL_H) % SH == 0)
                             & ((pw + PAD_W - kw * DIL_W) % SW == 0))
                    if reads:
                        tap = (kd * KH + kh) * KW + kw
                        for c0 in range(0, CIN_G, BLOCK_K):
                            acc = tap_product(acc, x_group, w_group, (idd * H + ih) * W + iw,
                                              p_ok & d_ok & h_ok & w_ok, c0, tap, co, co_ok,
                                              C, CIN_G, D * H * W, W_CO, W_CI, W_TAP,
                                              CHANNELS_LAST, BLOCK_K)
    store_gemm_tile(acc, out_ptr, bias_ptr, n, g, co, co_ok, offs_p, p_ok, CO, COUT_G, OD, OH, OW,
                    HAS_BIAS, EPILOGUE$epilogue_params)
'''
    + gemm_launch(
        "conv_tap_gemm_kernel",
        reduction='args["CIN_G"]',
        blocks="phase_blocks(args, $GEMM_BLOCK_P)",
        operands="tap_operands",
    )
    + '''

CHANNELS_LAST = $channels_last


def tap_operands(x, w, args):
    """x and w as the tap kernel reads them, and its arguments: CHANNELS_LAST, copies of x as
    [N, D, H, W, C] and w as [G, COUT_G, taps, CIN_G], the reduction's channels contiguous in
    both (K-major, as Hopper's TF32 products read their operands: from an M-major operand a
    TF32 GEMM ran up to 3x slower on the H200); else as given, NCDHW. Both rounded to TF32
    where ROUND_TO_TF32."""
    if not CHANNELS_LAST:
        args = {**args, "W_TAP": 1, "CHANNELS_LAST": False}
        return operand_copy(x, False), weights_copy(w), args
    G, cin_g, cout_g = args["G"], args["CIN_G"], args["COUT_G"]
    taps = args["KD"] * args["KH"] * args["KW"]
    if args["TRANSPOSED"]:  # [G * CIN_G, COUT_G, KD, KH, KW]
        w = w.reshape(G, cin_g, cout_g, taps).permute(0, 2, 3, 1)
    else:  # [G * COUT_G, CIN_G, KD, KH, KW]
        w = w.reshape(G, cout_g, cin_g, taps).permute(0, 1, 3, 2)
    args = {**args, "W_CO": taps * cin_g, "W_CI": 1, "W_TAP": cin_g, "CHANNELS_LAST": True}
    return operand_copy(x, True), weights_copy(w), args


def phase_blocks(args, block_p):
    """Blocks of phase_tile's positions: per phase (of a transposed convolution's stride), the
    outputs of that phase."""
    strides = [args[f"STRIDE_{d}"] if args["TRANSPOSED"] else 1 for d in "DHW"]
    per_phase = 1
    for size, stride in zip((args["OD"], args["OH"], args["OW"]), strides):
        per_phase *= triton.cdiv(size, stride)
    return strides[0] * strides[1] * strides[2] * triton.cdiv(per_phase, block_p)
'''
    + MODEL
)
