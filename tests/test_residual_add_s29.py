"""``add`` of two large float32 tensors of one shape at two threads (the residual add of a transformer
block), which runs as ``fma(b, 1, a)`` cut over the threads: torch's floats bit for bit, signed zeros,
infinities and NaNs where torch has them, whatever the size's split, and autograd's gradients unchanged."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from _threads import thread_counts


threads = thread_counts([1, 2])


@pytest.mark.parametrize("shape", [(16, 64, 128), (kernels.PARALLEL_MIN,), (kernels.PARALLEL_MIN + 7,), (3, 50001)])
def test_add_is_torch_bit_for_bit(threads, shape):
    rng = np.random.default_rng(len(shape))
    a = (rng.standard_normal(shape) * 1e3).astype(np.float32)
    b = (rng.standard_normal(shape) * 1e-3).astype(np.float32)
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    flat_a[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0]
    flat_b[:6] = [-0.0, -0.0, -np.inf, 1.0, 2.0, np.nan]
    ours = (tapelab.tensor(a) + tapelab.tensor(b)).numpy()
    theirs = (torch.tensor(a) + torch.tensor(b)).numpy()
    assert np.array_equal(ours.view(np.int32)[~np.isnan(theirs)], theirs.view(np.int32)[~np.isnan(theirs)])
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.signbit(ours.reshape(-1)[1]) and not np.signbit(ours.reshape(-1)[0])


def test_add_gradients(threads):
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal((16, 64, 128)).astype(np.float32) for _ in range(2))
    g = rng.standard_normal((16, 64, 128)).astype(np.float32)
    ta, tb = tapelab.tensor(a, requires_grad=True), tapelab.tensor(b, requires_grad=True)
    (ta + tb).backward(tapelab.tensor(g))
    assert np.array_equal(ta.grad.numpy(), g) and np.array_equal(tb.grad.numpy(), g)
