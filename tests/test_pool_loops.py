"""The 2-D block max-pool's numba loops equal the numpy block path (values and the gradient at
each window's first maximum, first NaN) and PyTorch on ReLU-style ties."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels

pytest.importorskip("numba")


def _pool(x, k, g, loops):
    old = kernels.set_enabled(loops)
    try:
        tx = tapelab.tensor(x, requires_grad=True)
        y = tapelab.nn.functional.max_pool2d(tx, k)
        y.backward(tapelab.tensor(g))
        return y.detach().numpy(), tx.grad.numpy()
    finally:
        kernels.set_enabled(old)


@pytest.mark.parametrize("shape, k", [((4, 3, 12, 12), 2), ((2, 3, 12, 12), 3), ((2, 3, 8, 6), (2, 3))])
def test_block_max_pool_loops_match_numpy(shape, k):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, :4, :4] = 0                      # all-tie windows
    x[1, 1, 2, 2] = x[1, 1, 0, 1] = np.nan
    x[0, 1, 0, 0], x[0, 2, 1, 1] = np.inf, -np.inf
    out = tuple(n // kk for n, kk in zip(shape[2:], (k, k) if isinstance(k, int) else k))
    g = rng.standard_normal(shape[:2] + out).astype(np.float32)
    y1, gx1 = _pool(x, k, g, True)
    y0, gx0 = _pool(x, k, g, False)
    assert np.array_equal(y1, y0, equal_nan=True)
    assert np.array_equal(gx1, gx0)


def test_block_max_pool_loops_match_torch_after_relu():
    rng = np.random.default_rng(1)
    x = np.maximum(rng.standard_normal((4, 8, 14, 14)).astype(np.float32), 0)
    g = rng.standard_normal((4, 8, 7, 7)).astype(np.float32)
    y, gx = _pool(x, 2, g, True)
    px = torch.tensor(x, requires_grad=True)
    py = torch.nn.functional.max_pool2d(px, 2)
    py.backward(torch.tensor(g))
    assert np.array_equal(y, py.detach().numpy())
    assert np.array_equal(gx, px.grad.numpy())
