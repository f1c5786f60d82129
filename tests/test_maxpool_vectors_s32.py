"""2x2 max-pool's loops with a row's outputs as vectors (``kernels/pool.py`` ``_row_pairs``: 8 or 4 at a
time, the last block ending at the row's end, rows under 4 as scalars): forward maxima and backward
gradients bit for bit the numpy block path's, for row widths around the vector widths, with NaNs, signed
zeros, infinities and ties in every slot; torch's values and gradients where windows have no ties."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab import kernels

pytest.importorskip("numba")

WIDTHS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15, 16, 17, 23, 24]


def _run(x, g, loops):
    old = kernels.set_enabled(loops)
    try:
        tx = tl.tensor(x, requires_grad=True)
        y = tl.nn.functional.max_pool2d(tx, 2)
        y.backward(tl.tensor(g))
        return y.detach().numpy(), tx.grad.numpy()
    finally:
        kernels.set_enabled(old)


def _data(seed, ow, oh=3, n=2, c=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, 2 * oh, 2 * ow)).astype(np.float32)
    specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, 1.0], np.float32)
    x[0, 1] = rng.choice(specials, x[0, 1].shape)          # NaN, zeros and ties in every slot
    x[1, 2] = np.round(x[1, 2])                            # many ties
    g = rng.standard_normal((n, c, oh, ow)).astype(np.float32)
    g[0, 0, 0, :] = -1.0                                   # negative gradients: the other slots stay +0.0
    g[1, 0, -1, -1] = np.nan
    return x, g


@pytest.mark.parametrize("ow", WIDTHS)
def test_equal_numpy_block_path(ow):
    x, g = _data(ow, ow)
    (y, gx), (want_y, want_gx) = _run(x, g, True), _run(x, g, False)
    assert np.array_equal(y.view(np.int32), want_y.view(np.int32))
    assert np.array_equal(gx.view(np.int32), want_gx.view(np.int32))


@pytest.mark.parametrize("ow", [3, 7, 14, 16])
def test_torch_values_and_gradients(ow):
    rng = np.random.default_rng(ow)
    x = rng.standard_normal((4, 5, 2 * 3, 2 * ow)).astype(np.float32)
    g = rng.standard_normal((4, 5, 3, ow)).astype(np.float32)
    px = torch.tensor(x, requires_grad=True)
    py = torch.nn.functional.max_pool2d(px, 2)
    py.backward(torch.tensor(g))
    y, gx = _run(x, g, True)
    assert np.array_equal(y, py.detach().numpy()) and np.array_equal(gx, px.grad.numpy())


def test_loops_direct_every_output_written():
    loops = kernels.loops("pool")
    for ow in WIDTHS:
        x, g = _data(100 + ow, ow)
        y = np.full(g.shape, 5.0, np.float32)
        loops.max2x2(y, x, False)
        res = np.full(x.shape, 9.0, np.float32)
        loops.max2x2_put(x, y, res, g, False)
        assert not (res == 9.0).any() and not (y == 5.0).any()
        # each window's four slots hold its gradient once and +0.0 elsewhere (NaN gradients aside)
        wins = res.reshape(x.shape[0], x.shape[1], x.shape[2] // 2, 2, ow, 2)
        nonzero = (wins != 0).sum(axis=(3, 5))
        assert (nonzero <= 1).all()
        assert not np.signbit(res[res == 0]).any()
