"""A sum over every dim but the channels' (a convolution bias's gradient) through kernels/pairwise.py:
numpy's add.reduce floats bit for bit (the path it replaced), at one and two threads; torch's values."""
import numpy as np
import pytest
import torch

import tapelab

from _threads import thread_counts

SHAPES = [(32, 16, 28, 28), (32, 32, 14, 14), (16, 32, 16, 16), (3, 5, 7, 11), (2, 3, 129, 3), (64, 8, 1, 1),
          (1, 1, 1, 1), (4, 3, 9, 13), (2, 4, 5), (2, 3, 2, 3, 5), (1, 2, 300, 300)]


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 10 ** rng.uniform(-3, 3, shape)).astype(np.float32)


threads = thread_counts([1, 2])


@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_floats_and_torch_values(shape, threads):
    x = _data(shape)
    dims = (0,) + tuple(range(2, len(shape)))
    got = tapelab.tensor(x).sum(dims).numpy()
    want = np.add.reduce(x, axis=dims)
    assert got.dtype == np.float32 and got.shape == (shape[1],)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    ref = torch.from_numpy(x.astype(np.float64)).sum(dims).numpy()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(x).sum(dims).max())


def test_specials_keepdim_and_negative_dims(threads):
    x = np.full((3, 4, 6, 5), -0.0, np.float32)
    x[0, 1, 2, 3], x[2, 2, 0, 0], x[1, 3, 5, 4] = np.nan, np.inf, -np.inf
    x[:, 0] = _data((3, 6, 5), 1)
    t = tapelab.tensor(x)
    want = np.add.reduce(x, axis=(0, 2, 3))
    assert np.array_equal(t.sum((0, 2, 3)).numpy().view(np.int32), want.view(np.int32))
    assert np.array_equal(t.sum((-4, -1, -2)).numpy().view(np.int32), want.view(np.int32))
    kept = t.sum((0, 2, 3), keepdim=True)
    assert tuple(kept.shape) == (1, 4, 1, 1)
    assert np.array_equal(kept.numpy().reshape(-1).view(np.int32), want.view(np.int32))
    assert np.array_equal(torch.from_numpy(x).sum((0, 2, 3)).isnan().numpy(), np.isnan(want))


def test_conv_bias_gradient(threads):
    x, w, b = _data((8, 3, 12, 12), 2), _data((6, 3, 3, 3), 3), _data((6,), 4)
    g = _data((8, 6, 12, 12), 5)
    grads = []
    for m in (tapelab, torch):
        xs, ws, bs = (m.tensor(a, requires_grad=True) for a in (x, w, b))
        m.nn.functional.conv2d(xs, ws, bs, padding=1).backward(m.tensor(g))
        grads.append(bs.grad.numpy())
    assert np.array_equal(grads[0].view(np.int32), np.add.reduce(g, axis=(0, 2, 3)).view(np.int32))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-4)


def test_other_dtypes_and_layouts_unchanged():
    x = _data((4, 3, 5, 6)).astype(np.float64)
    assert np.array_equal(tapelab.tensor(x).sum((0, 2, 3)).numpy(), np.add.reduce(x, axis=(0, 2, 3)))
    y = _data((4, 5, 3, 6)).transpose(0, 2, 1, 3)          # not contiguous: numpy's sum as before
    assert np.array_equal(tapelab.tensor(y).sum((0, 2, 3)).numpy().view(np.int32),
                          np.add.reduce(y, axis=(0, 2, 3)).view(np.int32))
