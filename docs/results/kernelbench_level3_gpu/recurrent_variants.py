"""The recurrent layers of KernelBench level 3 through the library's sequence kernel, its steps
walked by one program per block of batch rows ("single") or spread over programs that each own a
tile of hidden units and meet after each step ("spread"), at each tile plan and precision: the
normalized error against float64 and the time of one call, beside PyTorch's (cuDNN's).

    python docs/results/kernelbench_level3_gpu/recurrent_variants.py"""

from functools import partial

import torch
import torch.nn as nn
import triton.testing

from engine.benchmarks.conv_layers import error
from hints.model_kernels import recurrent

# (label, torch class, library class, input size, hidden size, layers, bidirectional, sequence
# length, batch): one layer of 35_LSTM, 39_GRU and 41_GRUBidirectional at their own sizes.
CASES = [
    ("35.lstm", nn.LSTM, recurrent.KbLSTM, 128, 256, 1, False, 512, 10),
    ("39.gru", nn.GRU, recurrent.KbGRU, 128, 256, 1, False, 512, 10),
    ("41.gru_bi", nn.GRU, recurrent.KbGRU, 128, 256, 1, True, 512, 10),
]


def main() -> None:
    torch.manual_seed(0)
    for label, torch_cls, kb_cls, features, hidden, layers, bi, steps, batch in CASES:
        theirs = torch_cls(features, hidden, layers, bidirectional=bi).cuda().eval()
        ours = kb_cls(features, hidden, layers, bidirectional=bi).cuda().eval()
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(steps, batch, features, device="cuda")
        with torch.no_grad():
            ref = theirs.double()(x.double())[0]
            theirs.float()
            for spread in ("single", "spread"):
                for tiles in ("small", "base", "large"):
                    for precision in ("tf32x3", "ieee"):
                        recurrent.KB_RECURRENT, recurrent.KB_TILES = spread, tiles
                        recurrent.KB_DOT_PRECISION = precision
                        out = ours(x)[0]
                        ms = triton.testing.do_bench(partial(ours, x), rep=50)
                        print(f"{label} {spread} {tiles} {precision}: error "
                              f"{error(out, ref):.3g}, {ms:.3f} ms", flush=True)  # fmt: skip
            torch_error = error(theirs(x)[0], ref)
            ms = triton.testing.do_bench(partial(theirs, x), rep=50)
            print(f"{label} PyTorch: error {torch_error:.3g}, {ms:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
