"""The backward walk's running sum of two gradients for one input (``_sum_arrays``, session 30): a vjp's tensor
is summed into the waiting array in place, and float32 gradients over ATen's grain are added over the threads;
the floats are the two parts' float32 sum, at one and two threads, for sizes with and without a tail."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

RNG = np.random.default_rng(30)


def _parts(x, w):
    """x's gradient through a convolution (a vjp that returns a tensor) and through relu (an array vjp),
    summed by the walk, and each part alone."""
    def grad(conv: bool, act: bool):
        xs = tapelab.tensor(x, requires_grad=True)
        out = 0
        if conv:
            out = tapelab.nn.functional.conv2d(xs, tapelab.tensor(w), padding=1)
        if act:
            out = out + xs.relu() * 3.0
        out.sum().backward()
        return xs.grad.numpy()
    return grad(True, True), grad(True, False), grad(False, True)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(16, 32, 16, 16), (5, 32, 15, 17), (2, 32, 8, 8)])
def test_two_gradients_sum_as_their_float32_sum(shape, threads):
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((32, shape[1], 3, 3)).astype(np.float32)
    tapelab.set_num_threads(threads)
    both, conv, act = _parts(x, w)
    np.testing.assert_array_equal(both, conv + act)
    xt = torch.tensor(x, requires_grad=True)
    (torch.nn.functional.conv2d(xt, torch.tensor(w), padding=1) + xt.relu() * 3.0).sum().backward()
    np.testing.assert_allclose(both, xt.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_a_float64_sum_and_a_held_gradient_stay_numpys():
    """float64 takes numpy's sum; a gradient a hook keeps is not summed into (the walk then hands over)."""
    x = RNG.standard_normal((4, 8, 64, 64))
    xs = tapelab.tensor(x, requires_grad=True)
    (xs * 2.0 + xs.relu()).sum().backward()
    np.testing.assert_array_equal(xs.grad.numpy(), 2.0 + (x > 0))
    kept = []
    xs = tapelab.tensor(x.astype(np.float32), requires_grad=True)
    y = xs * 2.0
    y.register_hook(lambda g: kept.append(g) or None)
    (y + xs.relu()).sum().backward()
    np.testing.assert_array_equal(kept[0].numpy(), np.ones(x.shape, np.float32))
    np.testing.assert_array_equal(xs.grad.numpy(), (2.0 + (x > 0)).astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, dims, keepdim", [((16, 32, 16, 16), (2, 3), True), ((4, 5, 6), (1,), False),
                                                  ((4, 5, 6), (0, 2), False), ((3, 4), (-1,), True)])
def test_a_mean_over_dims_backward_is_the_quotient_spread(shape, dims, keepdim, dtype):
    """mean's array vjp over some dims (a global average pool's): every element the reduced gradient over the
    count, as the dispatched expand then divide; torch's gradient given the same upstream gradient."""
    x = RNG.standard_normal(shape).astype(dtype)
    xs = tapelab.tensor(x, requires_grad=True)
    m = xs.mean(dims, keepdim=keepdim)
    up = RNG.standard_normal(m.shape).astype(dtype)
    m.backward(tapelab.tensor(up))
    xt = torch.tensor(x, requires_grad=True)
    xt.mean(dims, keepdim=keepdim).backward(torch.tensor(up))
    np.testing.assert_array_equal(xs.grad.numpy(), xt.grad.numpy())
