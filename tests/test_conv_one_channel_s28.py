"""A one-channel stem's forward by kernel offsets (``kernels/conv.py`` ``forward_stride1``), session 28:
torch's values (here its floats too), the same floats split over two threads as whole, bias, padding and
kernel sizes; the cases it leaves to im2col keep working."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.kernels.switch import enabled
from tapelab.nn import _ops

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")
RNG = np.random.default_rng(28)


@pytest.mark.parametrize("n, o, size, k, pad, bias", [(32, 16, 28, 3, 1, False), (8, 6, 28, 5, 2, True), (4, 3, 9, 3, 1, True),
                                                       (5, 16, 12, 3, 0, False), (3, 7, 10, 3, (2, 0), True), (2, 4, 8, 1, 0, False)])
def test_one_channel_forward_is_torchs_at_one_and_two_threads(n, o, size, k, pad, bias, stem_forward_calls):
    x = RNG.standard_normal((n, 1, size, size)).astype(np.float32)
    w = RNG.standard_normal((o, 1, k, k)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32) if bias else None
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), None if b is None else torch.tensor(b), padding=pad)
    outs = []
    for threads in (1, 2):
        tapelab.set_num_threads(threads)
        got = tapelab.nn.functional.conv2d(tapelab.tensor(x), tapelab.tensor(w), None if b is None else tapelab.tensor(b),
                                           padding=pad)
        outs.append(got.numpy())
    assert stem_forward_calls[:1] == [(0, n)]                               # one thread: one call, whole
    np.testing.assert_array_equal(outs[0], outs[1])                        # the images' split changes no float
    np.testing.assert_allclose(outs[0], want.numpy(), rtol=1e-5, atol=1e-5)


def test_what_it_leaves_to_im2col(stem_forward_calls):
    """``_LAST_MIN_C`` input channels, stride 2, dilation: the other paths."""
    cases = [((4, _ops._LAST_MIN_C, 12, 12), (8, _ops._LAST_MIN_C, 3, 3), dict(padding=1)),
             ((4, 1, 12, 12), (8, 1, 3, 3), dict(stride=2)),
             ((4, 1, 12, 12), (8, 1, 3, 3), dict(dilation=2))]
    for xs, ws, kw in cases:
        x, w = RNG.standard_normal(xs).astype(np.float32), RNG.standard_normal(ws).astype(np.float32)
        got = tapelab.nn.functional.conv2d(tapelab.tensor(x), tapelab.tensor(w), **kw).numpy()
        want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **kw).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert stem_forward_calls == []


def test_gradients_through_a_one_channel_stem():
    x = RNG.standard_normal((4, 1, 14, 14)).astype(np.float32)
    w = RNG.standard_normal((8, 1, 3, 3)).astype(np.float32)
    grads = []
    for m in (tapelab, torch):
        xs, ws = m.tensor(x, requires_grad=True), m.tensor(w, requires_grad=True)
        (m.nn.functional.conv2d(xs, ws, padding=1) ** 2).sum().backward()
        grads.append((xs.grad.numpy(), ws.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
