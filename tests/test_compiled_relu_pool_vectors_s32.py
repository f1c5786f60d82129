"""The compiled fused ReLU + 2x2 max-pool (``compiler/pool.py``) on eager's vector loops
(``kernels/pool.py`` ``max2x2`` / ``max2x2_put`` with ``relu``): values and gradients bit for bit
eager's ``relu`` then ``max_pool2d`` (what the scalar loops gave) over row widths that take every
branch (scalar rows, one and two 4-blocks, 8-blocks with an overlapping tail), with NaNs, ties,
signed zeros and all-negative windows, at one and two threads; and PyTorch's values and gradients."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
import tapelab.compiler.cpu as ccpu
from tapelab import kernels

pytestmark = pytest.mark.skipif(not ccpu.numba_available(), reason="the fused loops need numba")

F = tapelab.nn.functional
WIDTHS = (2, 6, 8, 10, 14, 16, 22, 28, 34)


def _data(seed: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 4, w)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan                               # a NaN keeps its window's maximum
    x[0, 1, :2, :2] = -1.0                               # all negative: output 0, no gradient
    x[1, 0, :2, :2] = 0.75                               # a four-way tie: the first takes the gradient
    x[1, 1, :2, :2] = [[-0.0, 0.0], [0.0, -0.0]]         # zeros: output +0.0, no gradient
    x[1, 2, 2:4, -2:] = [[0.5, np.nan], [0.5, 0.5]]      # NaN after a larger-or-equal value
    x[0, 2, 2:4, -2:] = 0.0
    g = rng.standard_normal((2, 3, 2, w // 2)).astype(np.float32)
    g[0, 0, 1, -1] = np.nan                              # a NaN gradient passes where it is taken
    return x, g


def _pool(x):
    return F.max_pool2d(F.relu(x), 2)


def _run(fn, xs, gs):
    x = tapelab.tensor(xs, requires_grad=True)
    y = fn(x)
    y.backward(tapelab.tensor(gs))
    return y.detach().numpy(), x.grad.numpy()


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.int32)


@pytest.mark.parametrize("w", WIDTHS)
def test_compiled_relu_pool_is_eager_bit_for_bit(w):
    xs, gs = _data(w, w)
    compiled = tapelab.compile(_pool)
    want = _run(_pool, xs, gs)
    for n in (1, 2):
        tapelab.set_num_threads(n)
        try:
            for _ in range(2):                           # traced, then the compiled graph
                got = _run(compiled, xs, gs)
                for a, b in zip(got, want):
                    assert np.array_equal(_bits(a), _bits(b))
        finally:
            tapelab.set_num_threads(1)
    (entry,) = compiled.cache.values()
    assert "relu_max_pool2d" in [getattr(n.target, "__name__", "") for n in entry.graph.graph.nodes]


@pytest.mark.parametrize("w", WIDTHS)
def test_compiled_relu_pool_matches_torch(w):
    xs, gs = _data(100 + w, w)
    gs[0, 0, 1, -1] = 1.0
    y, gx = _run(tapelab.compile(_pool), xs, gs)
    px = torch.tensor(xs, requires_grad=True)
    py = torch.nn.functional.max_pool2d(torch.relu(px), 2)
    py.backward(torch.tensor(gs))
    np.testing.assert_array_equal(y, py.detach().numpy())
    np.testing.assert_array_equal(gx, px.grad.numpy())


def test_relu_loops_write_every_element_and_leave_eager_unchanged():
    loops = kernels.loops("pool")
    for w in WIDTHS:
        xs, gs = _data(200 + w, w)
        y, plain = np.full(gs.shape, 5.0, np.float32), np.empty(gs.shape, np.float32)
        loops.max2x2(y, xs, True)
        loops.max2x2(plain, xs, False)
        quads = (xs[..., ::2, ::2], xs[..., ::2, 1::2], xs[..., 1::2, ::2], xs[..., 1::2, 1::2])
        assert np.array_equal(_bits(plain), _bits(np.maximum(np.maximum(np.maximum(*quads[:2]), quads[2]), quads[3])))
        relued = np.empty(gs.shape, np.float32)      # eager's relu (x < 0 ? 0 : x, -0.0 kept) then the pool
        loops.max2x2(relued, np.where(xs < 0, np.float32(0.0), xs), False)
        assert np.array_equal(_bits(y), _bits(relued))
        assert np.array_equal(_bits(y), _bits(torch.nn.functional.max_pool2d(torch.relu(torch.tensor(xs)), 2).numpy()))
        gx = np.full(xs.shape, 9.0, np.float32)
        loops.max2x2_put(xs, y, gx, gs, True)
        assert not (gx == 9.0).any() and not np.signbit(gx[gx == 0]).any()
        px = torch.tensor(xs, requires_grad=True)
        torch.nn.functional.max_pool2d(torch.relu(px), 2).backward(torch.tensor(gs))
        np.testing.assert_array_equal(gx, px.grad.numpy())


@pytest.mark.parametrize("shape", [(32, 16, 28, 28), (32, 32, 14, 14)])
def test_compiled_relu_pool_split_over_threads_is_eager_bit_for_bit(shape):
    """The CNN's shapes: large enough that two threads split the images."""
    rng = np.random.default_rng(7)
    xs = rng.standard_normal(shape).astype(np.float32)
    gs = rng.standard_normal((shape[0], shape[1], shape[2] // 2, shape[3] // 2)).astype(np.float32)
    compiled = tapelab.compile(_pool)
    want = _run(_pool, xs, gs)
    tapelab.set_num_threads(2)
    try:
        for _ in range(2):
            got = _run(compiled, xs, gs)
            for a, b in zip(got, want):
                assert np.array_equal(_bits(a), _bits(b))
    finally:
        tapelab.set_num_threads(1)
