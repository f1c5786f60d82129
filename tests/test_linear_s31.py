"""Linear's paths made leaner in session 31 keep PyTorch's floats: the bias gradient's column sums whose
ranges run at once on numba's threads (``sum_order.column_sums``) against torch's ``sum(0)`` and its
linear backward, bit for bit at two and three threads; ``pool.in_block``'s per-thread defaults; the
aligned outputs ``blas.empty`` makes."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.base import pool
from _threads import thread_counts

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason="the column sums are numba loops")


threads = thread_counts([2, 3], ids=lambda t: f"threads{t}")


@pytest.mark.parametrize("rows,cols", [(1024, 40), (1024, 65), (1024, 100), (1024, 128), (1024, 384),
                                       (512, 1152), (333, 517), (64, 512)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums_match_torch(threads, rows, cols, dtype):
    rng = np.random.default_rng(rows * cols)
    g = (rng.standard_normal((rows, cols)) * np.exp(rng.standard_normal((rows, cols)) * 3)).astype(dtype)
    got = tapelab.tensor(g).sum(0).numpy()
    want = torch.from_numpy(g).sum(0).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_wide_column_sums_run_as_one_region(threads):
    """A 1024 x 384 bias gradient's column ranges take the region (where regions run), and its floats are
    those of the ranges one after another (``_outer``)."""
    order = kernels.loops("sum_order")
    if not kernels.native() or kernels.loops("regions").parts(threads) < 2:
        pytest.skip("no OpenMP regions on this machine")
    g = np.random.default_rng(0).standard_normal((1024, 384)).astype(np.float32)
    got, one_by_one = np.empty(384, np.float32), np.empty(384, np.float32)
    order.column_sums(g.reshape(-1), 384, threads, got)
    order._outer(g.reshape(-1), 384, threads, one_by_one)
    assert len(order._outer_parts.signatures) > 0
    assert np.array_equal(got, one_by_one)


def test_linear_bias_gradient_matches_torch(threads):
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64, 128), (384, 128), (384,)))
    g = rng.standard_normal((16, 64, 384)).astype(np.float32)
    grads = []
    for lib in (torch, tapelab):
        W, B = (lib.tensor(a.copy(), requires_grad=True) for a in (w, b))
        lib.nn.functional.linear(lib.tensor(x), W, B).backward(lib.tensor(g))
        grads.append((W.grad.numpy(), B.grad.numpy()))
    assert all(np.array_equal(t, o) for t, o in zip(*grads))


def test_in_block_is_false_on_a_fresh_thread():
    seen = []
    t = threading.Thread(target=lambda: seen.append(pool.in_block()))
    t.start()
    t.join()
    assert seen == [False] and pool.in_block() is False


def test_blas_empty_is_aligned_over_its_own_block():
    from tapelab.kernels import blas
    for shape, dtype in (((3, 5), np.float32), ((64, 512), np.float32), ((2, 3, 4), np.float64)):
        a = blas.empty(shape, dtype, 2)
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
        assert a.ctypes.data % 64 == 0
        assert a.base is not None and a.base.base is None and a.base.nbytes == a.nbytes + 64


@pytest.mark.parametrize("x_shape,bias,x_grad", [((64, 512), True, False), ((16, 64, 128), True, True),
                                                  ((8, 100), False, True), ((100,), True, True)])
def test_linear_array_vjp_is_the_dispatched_vjp(x_shape, bias, x_grad):
    """The walk's array backward (``_array_vjp``) gives the arrays the dispatched ``_vjp`` wraps, and a
    step's gradients equal torch's."""
    from tapelab.nn import _fused_linear
    rng = np.random.default_rng(len(x_shape))
    n_out, n_in = 48, x_shape[-1]
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (x_shape, (n_out, n_in), (n_out,)))
    g = rng.standard_normal(x_shape[:-1] + (n_out,)).astype(np.float32)
    X = tapelab.tensor(x, requires_grad=x_grad)
    W, B = tapelab.tensor(w, requires_grad=True), tapelab.tensor(b, requires_grad=True)
    inputs = (X, W, B) if bias else (X, W)
    arrays = _fused_linear._array_vjp(g, None, inputs, {})
    with tapelab.no_grad():
        tensors = _fused_linear._vjp(tapelab.tensor(g), None, *inputs)
    assert len(arrays) == len(tensors) == len(inputs)
    for a, t in zip(arrays, tensors):
        assert (a is None) == (t is None)
        if a is not None:
            assert type(a) is np.ndarray and a.shape == t.shape and np.array_equal(a, t.numpy())
    if len(x_shape) < 2:
        return   # (a vector input's product is numpy's below MKL's size: torch's floats only from a matrix)
    grads = []
    for lib in (torch, tapelab):
        Xl = lib.tensor(x.copy(), requires_grad=x_grad)
        Wl, Bl = lib.tensor(w.copy(), requires_grad=True), lib.tensor(b.copy(), requires_grad=True)
        lib.nn.functional.linear(Xl, Wl, Bl if bias else None).backward(lib.tensor(g.copy()))
        grads.append([t.grad.numpy() for t in (Xl, Wl, Bl) if t.grad is not None])
    assert len(grads[0]) == len(grads[1]) and all(np.array_equal(t, o) for t, o in zip(*grads))
