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


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fn, kw", [("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 5.0}), ("softplus", {"threshold": 100.0}),
                                    ("elu", {}), ("elu", {"alpha": 0.7}), ("mish", {})])
def test_softplus_elu_bits(fn, kw, n, threads):
    (y0, g0), (y1, g1) = _both(fn, _inputs(n), threads, **kw)
    _same_bits(y0, y1)
    _same_bits(g0, g1)


@pytest.mark.parametrize("fn", ["softplus", "elu", "mish"])
def test_softplus_elu_strided_bits(fn):
    x = _inputs(64 * 100).reshape(64, 100)[:, 1:98]
    torch.set_num_threads(1)
    tl.set_num_threads(1)
    res = []
    for lib in (torch, tl):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib.nn.functional, fn)(t.t())
        y.backward(lib.ones_like(y))
        res.append((y.detach().numpy(), t.grad.numpy()))
    _same_bits(res[0][0], res[1][0])
    _same_bits(res[0][1], res[1][1])


@pytest.mark.parametrize("fn, kw", [("softplus", {"beta": 1.5, "threshold": 3.0}), ("elu", {"alpha": 0.7}),
                                    ("mish", {})])
def test_softplus_elu_gradcheck_float64(fn, kw):
    x = tl.tensor(np.random.default_rng(1).standard_normal(9) * 3, dtype=tl.float64, requires_grad=True)
    f = lambda t: getattr(tl.nn.functional, fn)(t, **kw)   # noqa: E731
    assert tl.autograd.gradcheck(f, (x,))
    assert tl.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize("fn", ["softplus", "elu", "mish"])
def test_softplus_elu_half(fn):
    x = np.random.default_rng(2).standard_normal(50).astype(np.float32)
    for dt in ("bfloat16", "float16"):
        a = getattr(torch.nn.functional, fn)(torch.tensor(x).to(getattr(torch, dt))).float().numpy()
        b = getattr(tl.nn.functional, fn)(tl.tensor(x).to(getattr(tl, dt))).float().numpy()
        _same_bits(a, b)


@pytest.mark.parametrize("n", [32769, 70003, 100003])
@pytest.mark.parametrize("fn", ["sigmoid", "silu", "gelu", "softplus", "elu", "mish"])
def test_two_thread_chunks_bits(fn, n):
    """At two threads PyTorch's parallel_for chunks each take their own scalar tail (the loop's chunks)."""
    (y0, g0), (y1, g1) = _both(fn, _inputs(n), 2, **({"approximate": "tanh"} if fn == "gelu" else {}))
    _same_bits(y0, y1)
    _same_bits(g0, g1)
