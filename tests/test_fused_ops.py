"""The fused nn ops (engine/nn/_fused*.py) against PyTorch where the op database cannot reach
them (the LSTM and GRU cells have no public tapelab function: PyTorch's ``torch.lstm_cell`` /
``torch.gru_cell`` are compared with the step the recurrent modules run), and the tape: each
composite users call is one record under the name they type (issue 15's search for "softmax")."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.nn.modules import rnn as _rnn

RNG = np.random.default_rng(7)
B, I, H = 3, 4, 5


def _cell_arrays(gates: int) -> list:
    return [RNG.uniform(-1, 1, s) for s in ((B, I), (B, H), (B, H), (gates * H, I), (gates * H, H),
                                            (gates * H,), (gates * H,))]


def _tl_lstm(x, h, c, w_ih, w_hh, b_ih, b_hh):
    return _rnn._lstm_step(tapelab.nn.functional.linear(x, w_ih, b_ih), (h, c), w_hh, b_hh)


def _tl_gru(x, h, w_ih, w_hh, b_ih, b_hh):
    return _rnn._gru_step(tapelab.nn.functional.linear(x, w_ih, b_ih), (h,), w_hh, b_hh)


CELLS = {
    "lstm": (4, _tl_lstm, lambda x, h, c, *w: torch.lstm_cell(x, (h, c), *w), [0, 1, 2, 3, 4, 5, 6]),
    "gru": (3, _tl_gru, lambda x, h, c, *w: (torch.gru_cell(x, h, *w),), [0, 1, 3, 4, 5, 6]),
}


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_cell_values_and_gradients_match_torch(kind):
    gates, tl_fn, t_fn, used = CELLS[kind]
    arrays = _cell_arrays(gates)
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    l_in = [tapelab.tensor(a, requires_grad=True) for a in arrays]
    t_out = t_fn(*t_in)
    l_out = tl_fn(*[l_in[i] for i in used])
    cots = [RNG.standard_normal((B, H)) for _ in t_out]
    for t, l in zip(t_out, l_out):
        np.testing.assert_allclose(l.detach().numpy(), t.detach().numpy(), atol=1e-12)
    sum((t * torch.tensor(c)).sum() for t, c in zip(t_out, cots)).backward()
    sum((l * tapelab.tensor(c)).sum() for l, c in zip(l_out, cots)).backward()
    for i in used:
        np.testing.assert_allclose(l_in[i].grad.numpy(), t_in[i].grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_cell_gradcheck_and_gradgradcheck(kind):
    gates, tl_fn, _, used = CELLS[kind]
    arrays = _cell_arrays(gates)
    inputs = tuple(tapelab.tensor(arrays[i], requires_grad=True) for i in used)
    assert tapelab.autograd.gradcheck(tl_fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)
    assert tapelab.autograd.gradgradcheck(tl_fn, inputs, eps=1e-6, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_recurrent_module_matches_torch(mode):
    """Two layers, bidirectional, batch_first: the fused cells inside the modules' time loop."""
    t_mod = getattr(torch.nn, mode)(I, H, num_layers=2, bidirectional=True, batch_first=True).double()
    l_mod = getattr(tapelab.nn, mode)(I, H, num_layers=2, bidirectional=True, batch_first=True).double()
    with torch.no_grad(), tapelab.no_grad():
        for (name, tp), (_, lp) in zip(t_mod.named_parameters(), l_mod.named_parameters()):
            lp.copy_(tapelab.tensor(tp.numpy()))
    x = RNG.standard_normal((B, 6, I))
    tx, lx = torch.tensor(x, requires_grad=True), tapelab.tensor(x, requires_grad=True)
    t_out, l_out = t_mod(tx)[0], l_mod(lx)[0]
    np.testing.assert_allclose(l_out.detach().numpy(), t_out.detach().numpy(), atol=1e-12)
    cot = RNG.standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(cot)).sum().backward()
    (l_out * tapelab.tensor(cot)).sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), atol=1e-11)
    for (_, tp), (_, lp) in zip(t_mod.named_parameters(), l_mod.named_parameters()):
        np.testing.assert_allclose(lp.grad.numpy(), tp.grad.numpy(), atol=1e-11)


def test_composites_are_one_named_record_on_the_tape():
    F = tapelab.nn.functional
    x = tapelab.randn(2, 4, 8, requires_grad=True)
    w, b = tapelab.ones(8, requires_grad=True), tapelab.zeros(8, requires_grad=True)
    target = tapelab.tensor(np.array([[1, 2, 3, 0], [0, 1, 2, 3]]))
    with tapelab.tape() as t:
        y = F.layer_norm(x, (8,), w, b)
        y = F.gelu(y)
        y = F.scaled_dot_product_attention(y, y, y, is_causal=True)
        p = F.softmax(y, -1)
        loss = F.cross_entropy(y.transpose(1, 2), target) + F.log_softmax(p, -1).mean()
    names = [n.op for n in t.nodes]
    for name in ("layer_norm", "gelu", "scaled_dot_product_attention", "softmax", "cross_entropy", "log_softmax"):
        assert names.count(name) == 1, (name, names)
    assert not {"exp", "amax", "logsumexp", "erf"} & set(names), names
    loss.backward()
    assert x.grad is not None and w.grad is not None and b.grad is not None


def test_lstm_step_is_one_cell_record():
    cell = tapelab.nn.LSTMCell(I, H)
    x, h, c = tapelab.randn(B, I), tapelab.randn(B, H), tapelab.randn(B, H)
    with tapelab.tape() as t:
        cell(x, (h, c))
    names = [n.op for n in t.nodes]
    assert names.count("lstm_cell") == 1 and "sigmoid" not in names and "tanh" not in names, names
