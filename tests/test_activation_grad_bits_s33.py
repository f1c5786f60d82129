"""Activation forwards and gradients bit for bit as PyTorch's on cpu float32 (session 33, Issue 17)."""
import numpy as np
import pytest
import torch

import tapelab as tl

SIZES = [1, 2, 15, 16, 17, 31, 32, 33, 63, 100, 6400, 70000 + 3]
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.0, -88.0, 104.0, -104.0, 1e-30, -1e-30, 1e38, -1e38,
                  20.0, -20.0, 1e-7], np.float32)


def _inputs(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * 4
    x[: min(n, EDGES.size)] = EDGES[: min(n, EDGES.size)]
    return x


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    assert np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


def _both(fn_name, x, threads, **kw):
    torch.set_num_threads(threads)
    tl.set_num_threads(threads)
    res = []
    for lib in (torch, tl):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib.nn.functional, fn_name)(t, **kw)
        g = lib.tensor(np.linspace(-2, 2, x.size, dtype=np.float32).reshape(x.shape))
        y.backward(g)
        res.append((y.detach().numpy(), t.grad.numpy()))
    return res


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", SIZES)
def test_logsigmoid_bits(n, threads):
    (y0, g0), (y1, g1) = _both("logsigmoid", _inputs(n), threads)
    _same_bits(y0, y1)
    _same_bits(g0, g1)


def test_logsigmoid_strided_bits():
    x = _inputs(64 * 100).reshape(64, 100)[:, ::3]
    (y0, g0), (y1, g1) = _both("logsigmoid", x, 1)
    _same_bits(y0, y1)
    _same_bits(g0, g1)


def test_logsigmoid_gradcheck_float64():
    x = tl.tensor(np.random.default_rng(0).standard_normal(7), dtype=tl.float64, requires_grad=True)
    assert tl.autograd.gradcheck(tl.nn.functional.logsigmoid, (x,))
    assert tl.autograd.gradgradcheck(tl.nn.functional.logsigmoid, (x,))
