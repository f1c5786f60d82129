"""Session 33's short route for small float32 products (``gemm._small``: a hand-written RNN/GRU cell's
Linears) keeps the floats of the general route, bit for bit: the product (our GEMM or numpy's, by the
same choice), a Linear's forward (the product, then the bias added, where the general route filled the
bias and added the product), its backward; ``sgemm._transposed`` into whole panels; and a GRU cell's
loss and gradients against PyTorch."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from _threads import thread_counts

G = importlib.import_module("tapelab.kernels.gemm")   # ``tapelab.kernels.gemm`` is the function

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason="our GEMM is a numba loop")

threads = thread_counts([1, 2], ids=lambda t: f"threads{t}")


def _general(a, b):
    """``a @ b`` by the general route (``_matmul``: MKL, ours or numpy's), as ``gemm`` ran it before."""
    return G._matmul(a, b)


def _operands(rng, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b


# (rows, terms, columns): a GRU step's forward x @ w.T (few rows), input gradient g @ w, weight gradient
# gᵀ x (64 rows: numpy's where our GEMM's row limit is 32), a head's, and shapes at the limits
SHAPES = [(32, 128, 64), (32, 64, 128), (64, 32, 128), (27, 512, 64), (2, 16, 32), (33, 17, 31), (40, 100, 96)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("layout", ["rows", "a_transposed", "b_transposed", "a_column_slice"])
def test_small_product_is_the_general_routes(threads, m, k, n, layout):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = _operands(rng, m, k, n)
    if layout == "a_transposed":
        a = np.ascontiguousarray(a.T).T
    elif layout == "b_transposed":
        b = np.ascontiguousarray(b.T).T
    elif layout == "a_column_slice":
        a = np.concatenate([a, a], axis=1)[:, 1:k + 1]
    got = kernels.gemm(np, a, b)
    assert got.dtype == np.float32 and got.shape == (m, n)
    assert np.array_equal(got.view(np.int32), _general(a, b).view(np.int32))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_small_route_declines_what_it_does_not_choose():
    """Other dtypes, stacks and products from ``MKL_MIN`` go the general way (None here)."""
    rng = np.random.default_rng(0)
    a, b = _operands(rng, 32, 128, 64)
    assert G._small(a.astype(np.float64), b.astype(np.float64)) is None
    assert G._small(a[None], b[None]) is None
    big_a, big_b = _operands(rng, 256, 64, 64)
    assert G._small(big_a, big_b) is None                 # 2^20 multiply-adds: MKL's where it is loaded
    with pytest.raises(ValueError):
        kernels.gemm(np, a, b[:100])                      # numpy's mismatch error, as before


@pytest.mark.parametrize("rows,fan_in,fan_out", [(32, 128, 64), (32, 64, 27), (512, 64, 27), (8, 40, 48)])
def test_linear_forward_bits_as_before(threads, rows, fan_in, fan_out):
    """The product then the bias added: the floats of the bias filled, then the product added."""
    rng = np.random.default_rng(rows + fan_in + fan_out)
    x = rng.standard_normal((rows, fan_in)).astype(np.float32)
    w = rng.standard_normal((fan_out, fan_in)).astype(np.float32)
    bias = rng.standard_normal(fan_out).astype(np.float32)
    got = tapelab.nn.functional.linear(tapelab.tensor(x), tapelab.tensor(w), tapelab.tensor(bias)).numpy()
    before = np.empty((rows, fan_out), np.float32)
    before[...] = bias
    before += _general(x, w.T)
    assert np.array_equal(got.view(np.int32), before.view(np.int32))
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_linear_backward_against_torch(threads):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 128)).astype(np.float32)
    w = rng.standard_normal((64, 128)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    g = rng.standard_normal((32, 64)).astype(np.float32)
    tl = [tapelab.tensor(a, requires_grad=True) for a in (x, w, bias)]
    th = [torch.tensor(a, requires_grad=True) for a in (x, w, bias)]
    tapelab.nn.functional.linear(*tl).backward(tapelab.tensor(g))
    torch.nn.functional.linear(*th).backward(torch.from_numpy(g))
    assert np.array_equal(tl[0].grad.numpy().view(np.int32), _general(g, w).view(np.int32))
    assert np.array_equal(tl[1].grad.numpy().view(np.int32), _general(np.ascontiguousarray(g.T), x).view(np.int32))
    for a, b in zip(tl, th):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,k", [(32, 128), (64, 64), (40, 33), (31, 16)])
def test_transposed_pads_and_copies(n, k):
    sgemm = kernels.loops("sgemm")
    bt = np.random.default_rng(n * k).standard_normal((n, k)).astype(np.float32)
    got = sgemm._transposed(bt)
    width = -(-n // sgemm.NR) * sgemm.NR
    want = np.zeros((k, width), np.float32)
    want[:, :n] = bt.T
    assert got.shape == (k, width) and np.array_equal(got, want)


def _gru_loss(m, weights, x_seq, h0, dtype):
    """A hand-written GRU cell (makemore's) over the positions of ``x_seq``, then a sum of squares."""
    wr, br, wc, bc, wz, bz = weights
    F = m.nn.functional
    h = h0
    for x in x_seq:
        xh = m.cat([x, h], dim=1)
        r = m.sigmoid(F.linear(xh, wr, br))
        h_bar = m.tanh(F.linear(m.cat([x, r * h], dim=1), wc, bc))
        z = m.sigmoid(F.linear(xh, wz, bz))
        h = (1 - z) * h + z * h_bar
    return (h * h).sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gru_cell_against_torch(threads, dtype):
    rng = np.random.default_rng(17)
    emb, hidden, batch, steps = 64, 64, 32, 4
    arrays = []
    for _ in range(3):
        arrays += [(rng.standard_normal((hidden, emb + hidden)) * 0.1).astype(dtype),
                   (rng.standard_normal(hidden) * 0.1).astype(dtype)]
    xs = [rng.standard_normal((batch, emb)).astype(dtype) for _ in range(steps)]
    h0 = rng.standard_normal((batch, hidden)).astype(dtype)
    results = []
    for m in (tapelab, torch):
        weights = [m.tensor(a, requires_grad=True) for a in arrays]
        x_seq = [m.tensor(a, requires_grad=True) for a in xs]
        loss = _gru_loss(m, weights, x_seq, m.tensor(h0), dtype)
        loss.backward()
        results.append([loss.detach().numpy()] + [t.grad.numpy() for t in weights + x_seq])
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("needs", [(True, True, True), (False, True, False), (True, False, True)])
def test_cat_backward_on_arrays_against_torch(dim, needs):
    """cat's gradient parts as the walk's arrays (``_cat_array_vjp``), a part read again downstream (the
    GRU's ``h`` in two cats), and an input that needs no gradient."""
    rng = np.random.default_rng(3)
    shapes = [(4, 3, 5), (4, 3, 5), (4, 3, 5)]
    arrays = [rng.standard_normal(s) for s in shapes]
    joined = list(shapes[0])
    joined[dim] *= 3
    weight = rng.standard_normal(joined)
    results = []
    for m in (tapelab, torch):
        ts = [m.tensor(a, requires_grad=n) for a, n in zip(arrays, needs)]
        y = m.cat(ts, dim) * m.tensor(weight) + m.cat([ts[1], ts[0], ts[2]], dim)
        (y * y).sum().backward()
        results.append([t.grad.numpy() if n else None for t, n in zip(ts, needs)])
    for got, want in zip(*results):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_cat_backward_skips_empty_inputs_as_torch():
    x = np.arange(6.0).reshape(2, 3)
    results = []
    for m in (tapelab, torch):
        a, e = m.tensor(x, requires_grad=True), m.tensor(np.zeros(0), requires_grad=True)
        (m.cat([a, e], 0) * m.tensor(x + 1)).sum().backward()
        results.append((a.grad.numpy(), e.grad.numpy()))
    for got, want in zip(*results):
        assert got.shape == want.shape and np.array_equal(got, want)
