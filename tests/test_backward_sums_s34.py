"""The array walk's sums into waiting views (cat's and stack's slices of one gradient) and mul's array vjp on a
slice of rows give the dispatched walk's floats and layouts bit for bit, and torch's values; VML's results carry
numpy's own dtype object (the array vjps' and sums' ``dtype is`` tests depend on it)."""
import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab import events

engine = importlib.import_module("tapelab.autograd.engine")


def _gru_grads(m, params, steps: int, watched: bool = False):
    """A hand-written GRU cell over ``steps`` positions (cat, three linears, sigmoid, tanh, the gates' products,
    stack): the loss and every leaf's gradient, with the walk watched by a no-op ``backward_step`` subscriber
    (the tensor walk: dispatched adds) where ``watched``."""
    leaves = [m.tensor(p, requires_grad=True) for p in params]
    wr, br, wz, bz, wc, bc, h0, emb = leaves
    F = m.nn.functional
    h = h0.expand(emb.shape[0], -1)
    hs = []
    for i in range(steps):
        x = emb[:, i, :]
        xh = m.cat([x, h], 1)
        r = m.sigmoid(F.linear(xh, wr, br))
        z = m.sigmoid(F.linear(xh, wz, bz))
        hb = m.tanh(F.linear(m.cat([x, r * h], 1), wc, bc))
        h = (1 - z) * h + z * hb
        hs.append(h)
    loss = (m.stack(hs, 1) ** 2).mean()
    sub = events.subscribe("backward_step", lambda step: None) if watched and m is tapelab else None
    try:
        loss.backward()
    finally:
        if sub is not None:
            sub.unsubscribe()
    return loss, leaves


def _params(dtype, batch=8, emb=16, hidden=16, steps=5, seed=0):
    rng = np.random.default_rng(seed)
    w = lambda *s: (rng.standard_normal(s) * 0.3).astype(dtype)   # noqa: E731
    return [w(hidden, emb + hidden), w(hidden), w(hidden, emb + hidden), w(hidden), w(hidden, emb + hidden),
            w(hidden), w(1, hidden), w(batch, steps, emb)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gru_cell_gradients_bit_equal_to_the_watched_walk_and_torchs(dtype):
    params = _params(dtype)
    loss, leaves = _gru_grads(tapelab, params, 5)
    wloss, wleaves = _gru_grads(tapelab, params, 5, watched=True)
    tloss, tleaves = _gru_grads(torch, params, 5)
    assert loss.item() == wloss.item()
    for a, b, t in zip(leaves, wleaves, tleaves):
        ga, gb = a.grad.numpy(), b.grad.numpy()
        assert ga.tobytes() == gb.tobytes() and a.grad.stride() == b.grad.stride()
        np.testing.assert_allclose(ga, t.grad.numpy(), rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-7)


def test_gru_cell_float64_gradcheck():
    params = [torch.from_numpy(p) for p in _params(np.float64, batch=3, emb=4, hidden=3, steps=3)]

    def f(*xs):
        return _grad_free_loss(xs)
    assert torch.autograd.gradcheck(f, [p.clone().requires_grad_() for p in params])
    loss, leaves = _gru_grads(tapelab, [p.numpy() for p in params], 3)
    tloss, tleaves = _gru_grads(torch, [p.numpy() for p in params], 3)
    for a, t in zip(leaves, tleaves):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)


def _grad_free_loss(xs):
    wr, br, wz, bz, wc, bc, h0, emb = xs
    F = torch.nn.functional
    h = h0.expand(emb.shape[0], -1)
    hs = []
    for i in range(emb.shape[1]):
        x = emb[:, i, :]
        xh = torch.cat([x, h], 1)
        r, z = torch.sigmoid(F.linear(xh, wr, br)), torch.sigmoid(F.linear(xh, wz, bz))
        h = (1 - z) * h + z * torch.tanh(F.linear(torch.cat([x, r * h], 1), wc, bc))
        hs.append(h)
    return (torch.stack(hs, 1) ** 2).mean()


def _layouts():
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((6, 10)).astype(np.float32)
    cube = rng.standard_normal((4, 3, 5)).astype(np.float64)
    return [
        ("transposed", wide[:5, :6].T, rng.standard_normal((6, 5)).astype(np.float32)),
        ("column slice", wide[:, 5:], rng.standard_normal((6, 5)).astype(np.float32)),
        ("middle select", cube[:, 1, :], rng.standard_normal((4, 5))),
        ("permuted", cube.transpose(2, 0, 1), rng.standard_normal((5, 4, 3))),
        ("dim of one", wide[:1, 2:7], rng.standard_normal((1, 5)).astype(np.float32)),
        ("contiguous, transposed other", wide[:, :5].copy(), wide[:5, :6].copy().T),
    ]


@pytest.mark.parametrize("name, old, d", _layouts(), ids=[c[0] for c in _layouts()])
def test_a_sum_into_a_waiting_view_is_the_dispatched_adds(name, old, d):
    """The array walk's sum into a view (``_sum_arrays``) gives the dispatched add's floats and ATen's layout."""
    engine = importlib.import_module("tapelab.autograd.engine")
    want = engine._tensor(old) + engine._tensor(d)
    buf = [old]
    engine._sum_arrays(buf, 0, d)
    assert type(buf[0]) is np.ndarray and buf[0] is not old
    assert buf[0].tobytes(order="A") == want._data.tobytes(order="A") and buf[0].strides == want._data.strides
    torch_sum = torch.from_numpy(old) + torch.from_numpy(d)
    assert buf[0].tobytes() == torch_sum.numpy().tobytes()
    assert tuple(s // buf[0].itemsize for s in buf[0].strides) == torch_sum.stride()


def test_mul_of_a_column_slice_gradient_bit_equal_to_the_dispatched_one():
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((7, 5)).astype(np.float32) for _ in range(3)]
    res = {}
    for watched in (False, True):
        a, b, c = (tapelab.tensor(v, requires_grad=True) for v in xs)
        y = tapelab.cat([a, b * c], 1)   # b * c's gradient: a column slice of cat's
        loss = (y.tanh() * y).sum()
        sub = events.subscribe("backward_step", lambda step: None) if watched else None
        loss.backward()
        if sub is not None:
            sub.unsubscribe()
        res[watched] = [(t.grad.numpy().tobytes(), t.grad.stride()) for t in (a, b, c)]
    assert res[False] == res[True]
    ta, tb, tc = (torch.tensor(v, requires_grad=True) for v in xs)
    ty = torch.cat([ta, tb * tc], 1)
    (ty.tanh() * ty).sum().backward()
    b = tapelab.tensor(xs[1], requires_grad=True)
    c = tapelab.tensor(xs[2], requires_grad=True)
    y = tapelab.cat([tapelab.tensor(xs[0]), b * c], 1)
    (y.tanh() * y).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(c.grad.numpy(), tc.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("op", ["tanh", "exp", "log", "sqrt"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vml_results_carry_numpys_dtype_object(op, dtype):
    a = np.random.default_rng(5).uniform(0.5, 2.0, (16, 16)).astype(dtype)
    y = getattr(tapelab, op)(tapelab.tensor(a))
    assert y._data.dtype is np.dtype(dtype)
    assert y.numpy().tobytes() == getattr(torch, op)(torch.from_numpy(a)).numpy().tobytes()
