"""The whole-layer LSTM op's backward (engine/nn/_fused_rnn.py) against PyTorch: with any of the
weights, biases or the input frozen, in both directions, with and without the float32 cell loops,
and at two threads (the step products one BLAS call each, the end GEMMs through the intra-op pool)
whatever the pool chose."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab import kernels
from tapelab.base import pool
from test_nn_attention import twin

T, B, I, H = 7, 5, 6, 8
FROZEN = {"none": (), "w_ih": ("weight_ih",), "w_hh": ("weight_hh",), "weights": ("weight_ih", "weight_hh"),
          "biases": ("bias_ih", "bias_hh")}


def _run(lib, mod, x, state, x_grad: bool):
    """Output, final states and every gradient of a weighted sum of them, as numpy arrays."""
    out, (hn, cn) = mod(x, state)
    weights = lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(x.detach().numpy().dtype))
    ((out * weights).sum() + hn.sum() * 0.5 + cn.sum() * 0.25).backward()
    grads = {name: p.grad for name, p in mod.named_parameters()}
    grads.update(x=x.grad if x_grad else None, h0=state[0].grad, c0=state[1].grad)
    return [t.detach().numpy() for t in (out, hn, cn)], {k: None if g is None else g.detach().numpy()
                                                        for k, g in grads.items()}


def _pair_run(frozen, bidirectional, dtype, x_grad, layers=2, size=(T, B, I, H), seed=0):
    t_, b_, i_, h_ = size
    torch.manual_seed(seed)
    tm, lm = (lib.nn.LSTM(i_, h_, layers, bidirectional=bidirectional) for lib in (torch, tl))
    if dtype == "float64":
        tm, lm = tm.double(), lm.double()
    lm = twin(tm, lm)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((t_, b_, i_), (layers * (1 + bidirectional), b_, h_),
                                                              (layers * (1 + bidirectional), b_, h_))]
    results = []
    for lib, mod in ((torch, tm), (tl, lm)):
        for name, p in mod.named_parameters():
            p.requires_grad_(not any(name.startswith(f) for f in FROZEN[frozen]))
        x, h0, c0 = (lib.tensor(a, requires_grad=(k > 0 or x_grad)) for k, a in enumerate(arrays))
        results.append(_run(lib, mod, x, (h0, c0), x_grad))
    return results


def _close(a, b, dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a, b, **tol)


@pytest.mark.parametrize("frozen", sorted(FROZEN))
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("dtype,loops", [("float32", True), ("float32", False), ("float64", True)])
@pytest.mark.parametrize("x_grad", [True, False])
def test_lstm_gradients_match_torch(frozen, bidirectional, dtype, loops, x_grad):
    """Values, final states and the gradients of the input, the initial states and every parameter
    that needs one (the backward op's ``needs`` skips the GEMMs of the others)."""
    kernels.set_enabled(loops)
    (t_outs, t_grads), (l_outs, l_grads) = _pair_run(frozen, bidirectional, dtype, x_grad)
    for a, b in zip(l_outs, t_outs):
        _close(a, b, dtype)
    assert t_grads.keys() == l_grads.keys()
    for name, tg in t_grads.items():
        assert (tg is None) == (l_grads[name] is None), name
        if tg is not None:
            assert l_grads[name].flags.c_contiguous, name
            _close(l_grads[name], tg, dtype)


@pytest.fixture
def two_threads():
    tl.set_num_threads(2)


@pytest.mark.parametrize("frozen,x_grad", [("none", True), ("none", False), ("biases", True), ("w_hh", True)])
@pytest.mark.parametrize("T_", [12, 2, 1])
def test_two_threads_bitwise_whatever_the_pool_chose_and_torchs_values(two_threads, monkeypatch, frozen, x_grad, T_):
    """At two threads the end GEMMs go through ``kernels.gemms``/``gemm`` (large enough here to be
    timed), with and without dx, down to one step: split or one after another, every gradient is
    bitwise the same, and PyTorch's."""
    size = (T_, 20, 48, 64)                  # dx at T 12: (240, 256) @ (256, 48) = 2.9M multiply-adds, over the floor
    runs = []
    for way in (1, 0):
        monkeypatch.setattr(pool._Timings, "choose", lambda self, way=way: way)
        runs.append(_pair_run(frozen, True, "float32", x_grad, size=size))
    (t_outs, t_grads), (l_outs, l_grads) = runs[0]
    for a, b in zip(l_outs, t_outs):
        _close(a, b, "float32")
    for name, tg in t_grads.items():
        assert (tg is None) == (l_grads[name] is None), name
        if tg is not None:
            _close(l_grads[name], tg, "float32")
            np.testing.assert_array_equal(l_grads[name], runs[1][1][1][name])
