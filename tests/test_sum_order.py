"""float32/float64 ``sum`` and ``mean`` over all, the trailing or the leading dims of a contiguous cpu
tensor equal torch's bit for bit (``kernels/sum_order.py``: ATen's cascade sum in 8-float vectors,
four at a time; a whole-tensor sum of 32768 elements or more cut into one chunk per thread, a
column sum's columns cut per thread at 128-byte lines). numpy's pairwise sum
differed from torch's in the last bit for ~77% of random 1-D float32 losses, which ``print(loss.item())``
shows. Both torch and tapelab are imported; every test compares real values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from _threads import thread_counts

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason="ATen's order is a numba loop")


threads = thread_counts([1, 2, 3], ids=lambda t: f"threads{t}")


def _values(rng, n: int, dtype) -> np.ndarray:
    kind = rng.integers(3)
    if kind == 0:
        x = rng.standard_normal(n)
    elif kind == 1:
        x = rng.random(n) * 10.0 ** rng.uniform(-3, 3)
    else:  # magnitudes spread over ~9 decades: every rounding step shows
        x = rng.standard_normal(n) * np.exp(rng.standard_normal(n) * 3)
    return x.astype(dtype)


def _same(got, want) -> bool:
    got, want = got.detach().numpy(), want.numpy()
    return got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_whole_sum_and_mean_random_lengths(dtype):
    rng = np.random.default_rng(0)
    sizes = [*range(1, 70), *rng.integers(70, 5000, 150), 32767, 32768, 32769, 65536 + 5, 98305]
    for n in sizes:
        x = _values(rng, int(n), dtype)
        a, t = tapelab.tensor(x), torch.tensor(x)
        assert a.sum().item() == t.sum().item(), n
        assert a.mean().item() == t.mean().item(), n


@pytest.mark.parametrize("n", [40000, 100003, 1_000_001])
def test_whole_sum_chunked_per_thread(threads, n):
    x = _values(np.random.default_rng(n), n, np.float32)
    a, t = tapelab.tensor(x), torch.tensor(x)
    assert a.sum().item() == t.sum().item()
    assert a.mean().item() == t.mean().item()


@pytest.mark.parametrize("shape, dim, keepdim", [
    ((7, 1), -1, False), ((5, 7), -1, False), ((9, 8), 1, True), ((3, 4, 33), -1, False),
    ((3, 4, 33), (1, 2), False), ((3, 4, 33), (-2, -1), True), ((2, 3, 5, 7), (2, 3), False),
    ((4, 3000), -1, False), ((1, 40000), -1, False), ((3, 50), (0, 1), False), ((6, 5), (-2, -1), True),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_trailing_dims_match_torch(shape, dim, keepdim, dtype):
    x = _values(np.random.default_rng(len(shape)), int(np.prod(shape)), dtype).reshape(shape)
    a, t = tapelab.tensor(x), torch.tensor(x)
    assert _same(a.sum(dim, keepdim=keepdim), t.sum(dim, keepdim=keepdim))
    assert _same(a.mean(dim, keepdim=keepdim), t.mean(dim, keepdim=keepdim))


@pytest.mark.parametrize("dim, seed, count, rows, cols", [(-1, 1, 200, (2, 12), (1, 2000)),   # row sums
                                                    (0, 4, 150, (1, 400), (2, 300))])    # column sums
def test_random_shapes_match_torch(dim, seed, count, rows, cols):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        shape = (int(rng.integers(*rows)), int(rng.integers(*cols)))
        x = _values(rng, shape[0] * shape[1], np.float32).reshape(shape)
        a, t = tapelab.tensor(x), torch.tensor(x)
        assert _same(a.sum(dim), t.sum(dim)), shape
        assert _same(a.mean(dim), t.mean(dim)), shape


@pytest.mark.parametrize("shape, dim", [
    ((5, 1), 0), ((5, 2), 0), ((7, 3), 0), ((300, 5), 0), ((9, 8), 0), ((33, 31), 0), ((17, 40), 0), ((1, 77), 0),
    ((1000, 100), 0), ((2000, 77), 0), ((4, 8, 65), (0, 1)), ((3, 5, 6, 7), (0, 1)), ((50000, 3), 0), ((3, 40000), 0),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leading_dims_match_torch(threads, shape, dim, dtype):
    x = _values(np.random.default_rng(shape[0]), int(np.prod(shape)), dtype).reshape(shape)
    a, t = tapelab.tensor(x), torch.tensor(x)
    for keepdim in (False, True):
        assert _same(a.sum(dim, keepdim=keepdim), t.sum(dim, keepdim=keepdim))
        assert _same(a.mean(dim, keepdim=keepdim), t.mean(dim, keepdim=keepdim))


@pytest.mark.parametrize("values", [[-0.0], [-0.0] * 20, [np.inf, 1.0], [np.inf, -np.inf], [np.nan] + [1.0] * 20,
                                    [3e38] * 20, [1e-45] * 33, [2.5]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signed_zero_inf_nan_subnormal(values, dtype):
    x = np.array(values, dtype)
    for a, t in ((tapelab.tensor(x), torch.tensor(x)), (tapelab.tensor(x[:1].reshape(())), torch.tensor(x[:1].reshape(())))):
        assert _same(a.sum(), t.sum())  # an all -0.0 sum is +0.0 in torch (it adds to a zero), -0.0 in numpy
        assert _same(a.mean(), t.mean())
        assert _same(a.sum(-1, keepdim=True), t.sum(-1, keepdim=True))


def test_mean_divides_by_the_count_rounded_to_float():
    x = np.full(2 ** 24 + 3, 0.5, np.float32)  # the count is not a float32
    assert tapelab.tensor(x).mean().item() == torch.tensor(x).mean().item()


def test_other_inputs_keep_numpy_sum():
    x = _values(np.random.default_rng(2), 6 * 700, np.float32).reshape(6, 700)
    a, t = tapelab.tensor(x), torch.tensor(x)
    np.testing.assert_allclose(a.t().sum(-1).numpy(), t.t().sum(-1).numpy(), rtol=1e-5)  # non-contiguous
    np.testing.assert_allclose(a.reshape(6, 7, 100).sum(1).numpy(), t.reshape(6, 7, 100).sum(1).numpy(), rtol=1e-5)
    np.testing.assert_allclose(a.sum(dtype=tapelab.float64).item(), t.sum(dtype=torch.float64).item())
    assert a.to(tapelab.int32).sum().item() == t.to(torch.int32).sum().item()
    assert a.sum(-1).dtype == tapelab.float32 and a[:0].sum().item() == 0.0
    assert np.isnan(a[:0].mean().item())
    b = a.to(tapelab.bfloat16)
    assert b.sum().item() == t.to(torch.bfloat16).sum().item()


def test_gradients_unchanged():
    x = _values(np.random.default_rng(3), 12, np.float32).reshape(3, 4)
    a, t = tapelab.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (a.sum(-1) * 2 + a.mean()).sum().backward()
    (t.sum(-1) * 2 + t.mean()).sum().backward()
    assert np.array_equal(a.grad.numpy(), t.grad.numpy())


def test_bias_gradient_matches_torch():
    x = _values(np.random.default_rng(5), 64 * 30, np.float32).reshape(64, 30)
    w = _values(np.random.default_rng(6), 20 * 30, np.float32).reshape(20, 30)
    lin, ref = tapelab.nn.Linear(30, 20), torch.nn.Linear(30, 20)
    with tapelab.no_grad(), torch.no_grad():
        lin.weight.copy_(tapelab.tensor(w)), ref.weight.copy_(torch.tensor(w))
        lin.bias.zero_(), ref.bias.zero_()
    g = _values(np.random.default_rng(7), 64 * 20, np.float32).reshape(64, 20)
    (lin(tapelab.tensor(x)) * tapelab.tensor(g)).sum().backward()
    (ref(torch.tensor(x)) * torch.tensor(g)).sum().backward()
    assert np.array_equal(lin.bias.grad.numpy(), ref.bias.grad.numpy())