"""The convolution rows' passes at one and two intra-op threads (issue 17, session 24): forward and
gradients bit for bit the same at 1 and 2 threads (the pool's timed choice runs both ways over the
repeated calls), with the OpenMP regions too, and PyTorch's within float32 rounding; the Winograd
F(2, 3) output loop that writes NCHW directly (``output_f23_nchw``) against the numpy formula."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.kernels import enabled, loops

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")

# (N, C, O, H, W, padding, bias): the CNN's two layers and its Winograd input gradient, the ResNet
# block's 32 -> 32, odd output sizes (a cropped last tile row and column), 64 channels
SHAPES = [(32, 1, 16, 28, 28, 1, True), (32, 16, 32, 14, 14, 1, True), (16, 32, 32, 16, 16, 1, False),
          (32, 32, 16, 14, 14, 1, True), (5, 32, 32, 13, 11, 1, True), (3, 48, 32, 9, 10, 0, False),
          (7, 64, 64, 8, 8, 1, False)]


@pytest.fixture
def one_mkl_thread(monkeypatch):
    """MKL's GEMM at one thread (on its own threads it cuts a weight gradient's long sums as PyTorch
    does at two, tests/test_blas_mkl.py)."""
    monkeypatch.setattr(importlib.import_module("tapelab.kernels.gemm"), "_mkl_team", lambda n: 1)


def _data(n, c, o, h, w, bias):
    rng = np.random.default_rng(n * 1000 + c * 10 + o)
    return (rng.standard_normal((n, c, h, w)).astype(np.float32),
            (rng.standard_normal((o, c, 3, 3)) * 0.1).astype(np.float32),
            rng.standard_normal(o).astype(np.float32) if bias else None)


def _run(m, x, w, b, pad, g=None):
    """conv2d -> relu -> 2x2 max-pool and its gradients, in module ``m``; returns numpy arrays."""
    xt, wt = m.tensor(x, requires_grad=True), m.tensor(w, requires_grad=True)
    bt = m.tensor(b, requires_grad=True) if b is not None else None
    y = m.nn.functional.conv2d(xt, wt, bt, padding=pad)
    z = m.nn.functional.max_pool2d(m.relu(y), 2) if min(y.shape[2:]) >= 2 else y
    g = np.random.default_rng(1).standard_normal(tuple(z.shape)).astype(np.float32) if g is None else g
    (z * m.tensor(g)).sum().backward()
    grads = [xt.grad, wt.grad] + ([bt.grad] if bt is not None else [])
    return [a.detach().numpy().copy() for a in [y] + grads], g


@pytest.mark.parametrize("n,c,o,h,w,pad,bias", SHAPES)
def test_one_and_two_threads_bitwise_and_torch(n, c, o, h, w, pad, bias, one_mkl_thread):
    x, wt, b = _data(n, c, o, h, w, bias)
    tapelab.set_num_threads(1)
    one, g = _run(tapelab, x, wt, b, pad)
    tapelab.set_num_threads(2)
    for _ in range(6):      # the first call of each size class splits, later ones run the faster way
        two, _ = _run(tapelab, x, wt, b, pad, g)
        for a, e in zip(two, one):
            assert np.array_equal(a, e)
    ref, _ = _run(torch, x, wt, b, pad, g)
    for a, e in zip(one, ref):
        scale = max(1.0, float(np.abs(e).max()))
        np.testing.assert_allclose(a, e, rtol=0, atol=2e-5 * scale)


@pytest.mark.parametrize("n,c,o,h,w,pad,bias", SHAPES[2:5])
def test_regions_bitwise(n, c, o, h, w, pad, bias, one_mkl_thread):
    """With the passes' blocks as OpenMP regions (TAPELAB_NATIVE_POOL=1) the same floats."""
    x, wt, b = _data(n, c, o, h, w, bias)
    tapelab.set_num_threads(1)
    one, g = _run(tapelab, x, wt, b, pad)
    tapelab.set_num_threads(2)
    old = kernels.set_native(True)
    try:
        for _ in range(4):
            two, _ = _run(tapelab, x, wt, b, pad, g)
            for a, e in zip(two, one):
                assert np.array_equal(a, e)
    finally:
        kernels.set_native(old)


@pytest.mark.parametrize("n,o,oh,ow", [(8, 32, 16, 16), (3, 16, 13, 11), (2, 48, 1, 7), (4, 64, 2, 3)])
def test_output_f23_nchw(n, o, oh, ow):
    """The loop's NCHW result equals the transform's (4, T O) result laid out by numpy, by image ranges too."""
    W = loops("winograd")
    th, tw = -(-oh // 2), -(-ow // 2)
    prod = np.random.default_rng(2).standard_normal((16, n * th * tw * o)).astype(np.float32)
    ys = np.empty((4, prod.shape[1]), np.float32)
    W.output_transform_f23(prod, ys, np.empty((8, 100), np.float32), 0, prod.shape[1])
    full = ys.reshape(2, 2, n, th, tw, o).transpose(2, 5, 3, 0, 4, 1).reshape(n, o, 2 * th, 2 * tw)
    y = np.full((n, o, oh, ow), np.nan, np.float32)
    W.output_f23_nchw(prod, y, 0, n)
    assert np.array_equal(y, full[:, :, :oh, :ow])
    parts = np.full_like(y, np.nan)
    for lo, hi in ((0, n // 2), (n // 2, n)):
        W.output_f23_nchw(prod, parts, lo, hi)
    assert np.array_equal(parts, y)
    # against the A^T M A formula in float64
    at = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)
    m = prod.astype(np.float64).reshape(4, 4, n, th, tw, o)
    ref = np.einsum("ai,ijntuo,bj->notaub", at, m, at).reshape(n, o, 2 * th, 2 * tw)[:, :, :oh, :ow]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_loops_off_matches(one_mkl_thread):
    """The numpy path (loops off) gives the loops' results within float32 rounding."""
    x, wt, b = _data(*SHAPES[4][:5], True)
    tapelab.set_num_threads(2)
    on, g = _run(tapelab, x, wt, b, 1)
    kernels.set_enabled(False)
    off, _ = _run(tapelab, x, wt, b, 1, g)
    for a, e in zip(on, off):
        np.testing.assert_allclose(a, e, rtol=0, atol=2e-5 * max(1.0, float(np.abs(e).max())))


def test_split_blocks_run_once_and_late_worker_leaves_its_block(one_mkl_thread):
    """Each block runs exactly once whichever thread takes it; with the worker held up, the caller
    runs every block itself and returns without waiting for it; a block's error reaches the caller."""
    import threading
    from tapelab.base import pool
    tapelab.set_num_threads(2)
    for n in (2, 3, 5):
        ran = []
        pool.run_blocks(lambda i: ran.append(i), [(i,) for i in range(n)])
        assert sorted(ran) == list(range(n))
    gate, ran = threading.Event(), []
    pool.run_blocks(lambda i: ran.append(i), [(0,), (1,)])      # the worker exists
    worker = pool._WORKERS[0]
    hold = pool._Job(lambda: gate.wait(10), [(), ()])
    hold.next = iter([1])
    worker.job = hold
    worker.go.release()                       # the worker is now busy with another job's block
    try:
        ran.clear()
        pool.run_blocks(lambda i: ran.append((i, threading.get_ident())), [(0,), (1,)])
        assert ran == [(0, threading.get_ident()), (1, threading.get_ident())]
    finally:
        gate.set()

    def bad(i):
        if i == 1:
            raise ValueError("block 1 failed")
    with pytest.raises(ValueError, match="block 1"):
        pool.run_blocks(bad, [(0,), (1,)])


@pytest.mark.parametrize("n,c,h,w,k,pads", [(3, 16, 14, 14, (3, 3), ((1, 1), (1, 1))), (2, 5, 7, 9, (3, 2), ((2, 0), (0, 1))),
                                            (1, 8, 4, 4, (1, 1), ((0, 0), (0, 0))), (2, 4, 6, 5, (5, 5), ((2, 2), (2, 2)))])
def test_im2col_loop_equals_the_window_copy(n, c, h, w, k, pads):
    """``im2col_stride1`` gives the strided window view's copy bit for bit (asymmetric pads, 1x1, 5x5)."""
    from tapelab.nn import _ops
    x = np.random.default_rng(3).standard_normal((n, c, h, w)).astype(np.float32)
    v, out = _ops._cols_view(np, x, k, (1, 1), pads, (1, 1))
    want = np.ascontiguousarray(v).reshape(n * out[0] * out[1], -1)
    got = np.full_like(want, np.nan)
    loops("conv").im2col_stride1(x, pads[0][0], pads[1][0], k[0], k[1], out[0], out[1], got)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("fn,xs,ws,kw", [("conv2d", (16, 8, 20, 20), (16, 4, 3, 3), dict(groups=2, padding=1)),
                                         ("conv2d", (16, 8, 20, 20), (8, 1, 3, 3), dict(groups=8, stride=2)),
                                         ("conv2d", (32, 3, 32, 32), (16, 3, 5, 5), dict(dilation=2, padding=2)),
                                         ("conv1d", (32, 4, 400), (8, 4, 5), dict(padding=2)),
                                         ("conv3d", (4, 2, 12, 12, 12), (4, 2, 3, 3, 3), dict(padding=1))])
def test_channel_major_columns_split_by_images(fn, xs, ws, kw, one_mkl_thread):
    """Grouped, few-channel, dilated, 1-D and 3-D forwards (their column copies split with the images):
    1 and 2 threads bit for bit, PyTorch within float32 rounding."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    tapelab.set_num_threads(1)
    one = getattr(tapelab.nn.functional, fn)(tapelab.tensor(x), tapelab.tensor(w), **kw).numpy()
    tapelab.set_num_threads(2)
    for _ in range(4):
        assert np.array_equal(getattr(tapelab.nn.functional, fn)(tapelab.tensor(x), tapelab.tensor(w), **kw).numpy(), one)
    ref = getattr(torch.nn.functional, fn)(torch.tensor(x), torch.tensor(w), **kw).numpy()
    np.testing.assert_allclose(one, ref, rtol=0, atol=2e-5 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.parametrize("shape", [(32, 16, 28, 28), (3, 5, 6, 10), (1, 1, 2, 2)])
def test_max2x2_loop_equals_numpy_passes(shape, one_mkl_thread):
    """The 2x2 max-pool loop gives numpy's maximum passes bit for bit (NaN, signed zeros), at 1 and
    2 threads, and PyTorch's values."""
    from tapelab.nn import _ops
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    x[0, 0, 0, :2], x[0, 0, 1, :2] = [-0.0, 0.0], [0.0, -0.0]
    if shape[3] >= 4:
        x[0, 0, 0, 2:4], x[0, 0, 1, 2:4] = [1.0, np.nan], [5.0, 2.0]
    want = np.empty((shape[0], shape[1], shape[2] // 2, shape[3] // 2), np.float32)
    _ops._max_blocks_into(want, x, np, (2, 2))
    for n in (1, 2):
        tapelab.set_num_threads(n)
        for _ in range(3):
            got = tapelab.nn.functional.max_pool2d(tapelab.tensor(x), 2).numpy()
            assert np.array_equal(got.view(np.int32), want.view(np.int32))
    ref = torch.nn.functional.max_pool2d(torch.tensor(x), 2).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(got[~np.isnan(got)], ref[~np.isnan(ref)])


def test_workers_do_not_keep_the_last_blocks_alive(one_mkl_thread):
    """After a split returns, no worker holds its blocks' arrays (a conv's buffers are megabytes)."""
    import gc
    import threading
    import time
    import weakref
    from tapelab.base import pool
    tapelab.set_num_threads(2)
    arrays = [np.ones(1 << 16, np.float32) for _ in range(2)]
    refs = [weakref.ref(a) for a in arrays]
    taken = threading.Event()

    def block(i, a):
        if i == 1:
            taken.set()
        elif pool._BUSY.locked():
            taken.wait(5)              # let the worker take block 1
        a += 1
    pool.run_blocks(block, [(i, a) for i, a in enumerate(arrays)])
    del arrays
    deadline = time.time() + 5
    while any(r() is not None for r in refs) and time.time() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert all(r() is None for r in refs)
