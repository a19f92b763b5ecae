"""KbRNN, KbLSTM and KbGRU (hints/model_kernels/recurrent.py) against nn.RNN, nn.LSTM and nn.GRU
built from the same seed (so with the same weights), and kb_elman_sequence against the Python loop
it stands in for, through layout_only."""

import pytest
import torch
import torch.nn as nn

from hints.model_kernels import recurrent
from hints.model_kernels.recurrent import KbGRU, KbLSTM, KbRNN, kb_elman_sequence
from tests.model_kernels_checks import assert_matches, layout_only

SEQ, BATCH, FEATURES = 3, 2, 5
KINDS = {
    "rnn_tanh": (nn.RNN, KbRNN, {}),
    "rnn_relu": (nn.RNN, KbRNN, {"nonlinearity": "relu"}),
    "lstm": (nn.LSTM, KbLSTM, {}),
    "gru": (nn.GRU, KbGRU, {}),
}


def _pair(kind: str, hidden: int, **kwargs):
    """(ours, torch's) in eval mode, each built after the same seed; their weights are equal."""
    torch_cls, kb_cls, extra = KINDS[kind]
    torch.manual_seed(0)
    theirs = torch_cls(FEATURES, hidden, **extra, **kwargs).eval()
    torch.manual_seed(0)
    ours = kb_cls(FEATURES, hidden, **extra, **kwargs).eval()
    assert isinstance(ours, torch_cls)
    assert_matches(list(ours.state_dict().values()), list(theirs.state_dict().values()))
    return ours, theirs


def _states(kind: str, module: nn.RNNBase, batch: int | None):
    """A random hx for module (h0, or (h0, c0) for an LSTM); 2-D when batch is None."""
    rows = module.num_layers * (2 if module.bidirectional else 1)
    shape = (rows, module.hidden_size) if batch is None else (rows, batch, module.hidden_size)
    h0 = torch.randn(shape)
    return (h0, torch.randn(shape)) if kind == "lstm" else h0


def _check(ours, theirs, x, hx):
    """Ours returns what torch returns: output and h_n (or (h_n, c_n)), in values and shapes."""
    got = layout_only(ours, x, hx)
    with torch.no_grad():
        expected = theirs(x, hx)
    assert_matches(got, expected)


# (hidden, num_layers, bidirectional, batch_first, bias, hx given)
FORMS = [
    (4, 1, False, False, True, False),
    (6, 2, True, True, False, True),
    (5, 2, False, True, True, True),
    (6, 1, True, False, True, False),
]


@pytest.mark.parametrize(
    "form", FORMS, ids=lambda f: "h{}-l{}-bi{:d}-bf{:d}-b{:d}-hx{:d}".format(*f)
)
@pytest.mark.parametrize("kind", KINDS)
def test_matches_torch(kind, form):
    hidden, layers, bidirectional, batch_first, bias, hx_given = form
    ours, theirs = _pair(
        kind, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first,
        bias=bias,
    )  # fmt: skip
    x = torch.randn((BATCH, SEQ, FEATURES) if batch_first else (SEQ, BATCH, FEATURES))
    _check(ours, theirs, x, _states(kind, ours, BATCH) if hx_given else None)


@pytest.mark.parametrize("kind", KINDS)
def test_steps_spread_over_programs_match_torch(kind, monkeypatch):
    """KB_RECURRENT "spread": each program owns a tile of units and the programs meet after each
    step (in the interpreter, which runs one program at a time, one program owns them all and
    meets itself)."""
    monkeypatch.setattr(recurrent, "KB_RECURRENT", "spread")
    ours, theirs = _pair(kind, 6, num_layers=2, bidirectional=True)
    _check(ours, theirs, torch.randn(SEQ, BATCH, FEATURES), None)


@pytest.mark.parametrize("hx_given", [False, True], ids=["hx_none", "hx"])
@pytest.mark.parametrize("kind", KINDS)
def test_unbatched_input(kind, hx_given):
    ours, theirs = _pair(kind, 4, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(SEQ, FEATURES)
    _check(ours, theirs, x, _states(kind, ours, None) if hx_given else None)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_strided_operands_and_eval_dropout(kind):
    """Transposed input and hx views are read as they are; dropout is off in eval mode."""
    ours, theirs = _pair(kind, 5, num_layers=2, dropout=0.5)
    x = torch.randn(BATCH, SEQ, FEATURES).transpose(0, 1)
    h0 = torch.randn(BATCH, 2, 5).transpose(0, 1)
    hx = (h0, torch.randn(2, 5, BATCH).permute(0, 2, 1)) if kind == "lstm" else h0
    _check(ours, theirs, x, hx)


def test_training_without_dropout_matches_torch():
    ours, theirs = _pair("gru", 4, num_layers=2)
    ours.train()
    _check(ours, theirs, torch.randn(SEQ, BATCH, FEATURES), None)


def test_unsupported_forms_raise():
    x = torch.randn(SEQ, BATCH, FEATURES)
    with pytest.raises(NotImplementedError, match="dropout"):
        KbLSTM(FEATURES, 4, num_layers=2, dropout=0.5)(x)
    with pytest.raises(NotImplementedError, match="proj_size"):
        KbLSTM(FEATURES, 4, proj_size=2).eval()(x)
    packed = nn.utils.rnn.pack_padded_sequence(x, [SEQ, SEQ])
    with pytest.raises(NotImplementedError, match="PackedSequence"):
        KbGRU(FEATURES, 4).eval()(packed)


def test_bad_shapes_raise_like_torch():
    ours = KbRNN(FEATURES, 4).eval()
    with pytest.raises(ValueError, match="2D or 3D"):
        ours(torch.randn(1, SEQ, BATCH, FEATURES))
    with pytest.raises(RuntimeError, match="3-D"):
        ours(torch.randn(SEQ, BATCH, FEATURES), torch.randn(BATCH, 4))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        ours(torch.randn(SEQ, BATCH, FEATURES), torch.randn(1, BATCH + 1, 4))


def _elman_loop(x, h, linear, act, steps, input_first):
    """The loop kb_elman_sequence computes, in torch: (every step's state, the last)."""
    states = []
    for t in range(steps):
        h = act(linear(torch.cat((x[t], h) if input_first else (h, x[t]), dim=1)))
        states.append(h)
    return torch.stack(states) if states else x.new_empty((0, *h.shape)), h


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("input_first", [True, False], ids=["x_first", "h_first"])
@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_elman_sequence_matches_the_loop(act, input_first, bias):
    """Either operand order, either activation, with and without bias, over a transposed x of
    which the loop walks only the first steps."""
    torch.manual_seed(0)
    linear = nn.Linear(FEATURES + 4, 4, bias=bias)
    x = torch.randn(BATCH, SEQ + 1, FEATURES).transpose(0, 1)
    h0 = torch.randn(BATCH, 4)
    got = layout_only(kb_elman_sequence, x, h0, linear, act, SEQ, input_first)
    with torch.no_grad():
        expected = _elman_loop(x, h0, linear, getattr(torch, act), SEQ, input_first)
    assert_matches(got, expected)


def test_elman_sequence_of_no_step_keeps_the_state():
    h0 = torch.randn(BATCH, 4)
    states, last = kb_elman_sequence(torch.randn(SEQ, BATCH, FEATURES), h0, nn.Linear(9, 4),
                                     "tanh", 0, True)  # fmt: skip
    assert states.shape == (0, BATCH, 4) and last is h0


def test_elman_sequence_refuses_what_the_loop_would_refuse():
    x, h0 = torch.randn(SEQ, BATCH, FEATURES), torch.randn(BATCH, 4)
    with pytest.raises(RuntimeError, match=r"weight \(4, 8\); expected \(4, 9\)"):
        kb_elman_sequence(x, h0, nn.Linear(8, 4), "tanh", SEQ, True)
    with pytest.raises(IndexError, match="out of bounds"):
        kb_elman_sequence(x, h0, nn.Linear(9, 4), "tanh", SEQ + 1, True)
