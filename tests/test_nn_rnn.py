"""RNN, LSTM, GRU and their cells against PyTorch: state-dict names, init, outputs, final
states and gradients w.r.t. inputs, initial states and every parameter."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab import kernels
from test_nn_attention import _convert, module_parity, pair, randn, same_error

T, B, I, H = 4, 3, 5, 6
MODES = {"rnn_tanh": ("RNN", {}), "rnn_relu": ("RNN", {"nonlinearity": "relu"}), "lstm": ("LSTM", {}),
         "gru": ("GRU", {})}


def rnn_pair(mode: str, *args, dtype="float64", **kwargs):
    name, extra = MODES[mode]
    return pair(getattr(torch.nn, name), getattr(tl.nn, name), *args, dtype=dtype, **extra, **kwargs)


def initial_state(mode: str, layers: int, dirs: int, batch=(B,), proj: int = 0):
    h = randn(layers * dirs, *batch, proj or H)
    return (h, randn(layers * dirs, *batch, H)) if mode == "lstm" else h


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first,with_state", [(False, False), (True, True), (False, True)])
def test_layers_match_torch(mode, num_layers, bidirectional, batch_first, with_state):
    tm, lm = rnn_pair(mode, I, H, num_layers, batch_first=batch_first, bidirectional=bidirectional)
    x = randn(B, T, I) if batch_first else randn(T, B, I)
    args = (x, initial_state(mode, num_layers, 2 if bidirectional else 1)) if with_state else (x,)
    module_parity(tm, lm, *args)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_no_bias_and_float32(mode):
    tm, lm = rnn_pair(mode, I, H, 2, bias=False, bidirectional=True)
    module_parity(tm, lm, randn(T, B, I))
    tm, lm = rnn_pair(mode, I, H, dtype="float32")
    module_parity(tm, lm, randn(T, B, I, dtype="float32"), dtype="float32")


@pytest.mark.parametrize("mode", ["lstm", "gru"])
@pytest.mark.parametrize("loops", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_float32_cell_loops_and_numpy_formula(mode, loops, bias):
    """float32 layers run the fused per-step loops of kernels/rnn.py where numba is installed, the
    numpy formula otherwise: both against torch, reversed directions and initial states included."""
    kernels.set_enabled(loops)
    tm, lm = rnn_pair(mode, I, H, 2, dtype="float32", bias=bias, bidirectional=True)
    state = initial_state(mode, 2, 2)
    state = tuple(s.astype("float32") for s in state) if mode == "lstm" else state.astype("float32")
    module_parity(tm, lm, randn(T, B, I, dtype="float32"), state, dtype="float32")


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched(mode, batch_first):
    tm, lm = rnn_pair(mode, I, H, 2, batch_first=batch_first, bidirectional=True)
    module_parity(tm, lm, randn(T, I))
    module_parity(tm, lm, randn(T, I), initial_state(mode, 2, 2, batch=()))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_projection(bidirectional):
    tm, lm = rnn_pair("lstm", I, H, 2, proj_size=3, bidirectional=bidirectional)
    dirs = 2 if bidirectional else 1
    module_parity(tm, lm, randn(T, B, I))
    module_parity(tm, lm, randn(T, B, I), initial_state("lstm", 2, dirs, proj=3))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_dropout_between_layers(mode):
    tm, lm = rnn_pair(mode, I, H, 3, dropout=0.5)
    x = randn(T, B, I)
    tm.eval(), lm.eval()
    module_parity(tm, lm, x)                  # eval: dropout off, same numbers as torch
    lm.train()
    xt = tl.tensor(x)
    tl.manual_seed(0)
    a = lm(xt)[0].detach().numpy()
    tl.manual_seed(0)
    b = lm(xt)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)       # train: random but seeded
    assert not np.allclose(a, lm.eval()(xt)[0].detach().numpy())


def test_train_mode_without_dropout_matches():
    tm, lm = rnn_pair("lstm", I, H, 2, dropout=0.0)
    assert tm.training and lm.training
    module_parity(tm, lm, randn(T, B, I))


@pytest.mark.parametrize("kwargs", [dict(), dict(num_layers=2, bidirectional=True), dict(bias=False),
                                    dict(num_layers=2, proj_size=3, bidirectional=True)])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_state_dict_names_repr_and_init(mode, kwargs):
    if "proj_size" in kwargs and mode != "lstm":
        return
    name, extra = MODES[mode]
    t, l = getattr(torch.nn, name)(I, H, **extra, **kwargs), getattr(tl.nn, name)(I, H, **extra, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in l.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
    assert repr(l) == repr(t)
    bound = 1 / np.sqrt(H)
    values = np.concatenate([p.detach().numpy().ravel() for p in l.parameters()])
    assert values.dtype == np.float32
    assert np.all(np.abs(values) <= bound) and values.std() > bound / 2.5   # U(-b, b) has std b/sqrt(3)
    assert len(l.all_weights) == len(t.all_weights)


# ---------------------------------------------------------------- cells

CELLS = {"rnn_tanh": ("RNNCell", {}), "rnn_relu": ("RNNCell", {"nonlinearity": "relu"}),
         "lstm": ("LSTMCell", {}), "gru": ("GRUCell", {})}


def cell_pair(mode: str, *args, **kwargs):
    name, extra = CELLS[mode]
    return pair(getattr(torch.nn, name), getattr(tl.nn, name), *args, **extra, **kwargs)


@pytest.mark.parametrize("mode", sorted(CELLS))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", [(B,), ()])
def test_cells_match_torch(mode, bias, batch):
    tm, lm = cell_pair(mode, I, H, bias=bias)
    x = randn(*batch, I)
    h = (randn(*batch, H), randn(*batch, H)) if mode == "lstm" else randn(*batch, H)
    module_parity(tm, lm, x)
    module_parity(tm, lm, x, h)


def test_cell_unrolled_equals_layer():
    lstm, cell = tl.nn.LSTM(I, H), tl.nn.LSTMCell(I, H)
    cell.load_state_dict({k[:-3]: v for k, v in lstm.state_dict().items()})
    x = tl.tensor(randn(T, B, I, dtype="float32"))
    out, (h, c) = lstm(x)
    state = None
    for t in range(T):
        state = cell(x[t], state)
    np.testing.assert_allclose(state[0].detach().numpy(), h[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state[1].detach().numpy(), c[0].detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", sorted(CELLS))
def test_cell_state_dict_and_repr(mode):
    name, extra = CELLS[mode]
    for bias in (True, False):
        t, l = getattr(torch.nn, name)(I, H, bias, **extra), getattr(tl.nn, name)(I, H, bias, **extra)
        assert [(k, tuple(v.shape)) for k, v in l.state_dict().items()] == \
               [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
        assert repr(l) == repr(t)


# ---------------------------------------------------------------- errors

def _both(name, *args, **kwargs):
    return (lambda: getattr(torch.nn, name)(*args, **kwargs)), (lambda: getattr(tl.nn, name)(*args, **kwargs))


@pytest.mark.parametrize("ctor", [
    ("RNN", (I, H), dict(nonlinearity="foo")), ("RNN", (I, H), dict(proj_size=2)), ("GRU", (I, H), dict(proj_size=2)),
    ("LSTM", (I, H), dict(proj_size=H)), ("LSTM", (I, H), dict(proj_size=-1)), ("LSTM", (I, 0), {}),
    ("LSTM", (I, 5.0), {}), ("LSTM", (I, H, 0), {}), ("LSTM", (I, H), dict(dropout=1.5)),
    ("GRU", (I, H), dict(bias=1)), ("RNN", (0, H), {}),
])
def test_constructor_errors(ctor):
    name, args, kwargs = ctor
    same_error(*_both(name, *args, **kwargs))


def test_dropout_with_one_layer_warns():
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last recurrent layer"):
        tl.nn.GRU(I, H, dropout=0.2)


@pytest.mark.parametrize("case", [
    ("LSTM", (randn(T, B, 3),)), ("LSTM", (randn(T, B, I, dtype="float32"),)),
    ("LSTM", (randn(T, B, I), (randn(1, B, H), randn(2, B, H)))),
    ("LSTM", (randn(T, B, I), (randn(2, B, H), randn(2, H)))), ("LSTM", (randn(T, I), (randn(2, B, H), randn(2, H)))),
    ("LSTM", (randn(I),)), ("RNN", (randn(T, B, I), randn(2, B + 1, H))), ("GRU", (randn(T, B, I), randn(2, H))),
    ("GRU", (randn(T, I), randn(2, 1, H))), ("RNN", (randn(T, I, 1, 1),)),
])
def test_forward_errors(case):
    name, args = case
    tm, lm = rnn_pair(name.lower() if name != "RNN" else "rnn_tanh", I, H, 2)
    same_error(lambda: tm(*_convert(torch, args, False, {})), lambda: lm(*_convert(tl, args, False, {})))


@pytest.mark.parametrize("case", [
    ("rnn_tanh", (randn(B, I, 1),)), ("rnn_tanh", (randn(B, 3),)), ("rnn_tanh", (randn(B, I), randn(2, H))),
    ("rnn_tanh", (randn(B, I), randn(B, 4))), ("gru", (randn(B, I), randn(B, 1, H))), ("lstm", (randn(B, I, 1),)),
    ("lstm", (randn(B, I), (randn(B, H), randn(B, 1, H)))), ("gru", (randn(I), randn(B, H))),
])
def test_cell_forward_errors(case):
    mode, args = case
    tm, lm = cell_pair(mode, I, H)
    same_error(lambda: tm(*_convert(torch, args, False, {})), lambda: lm(*_convert(tl, args, False, {})))
