"""Gaps met running PyTorch's own tutorials (session 34, helper h7): the per-sample-gradients tutorial's
loop of batch-1 steps through ``Linear(9216, 128)``.

At batch 1 a linear's weight gradient ``gᵀ x`` is an outer product (one term per number); MKL's GEMM took
1.4 ms for it at 128 x 9216 against PyTorch's whole batch-1 step of 0.4 ms. It is now the broadcast product:
each number the one product, as PyTorch's, the sign of a zero included (MKL's call gave +0.0 where PyTorch
gives -0.0).
"""
import numpy as np
import pytest
import torch

import tapelab

# (rows, columns) of the product, under and over MKL_MIN (a row or column result is PyTorch's vector
# product, which sums from +0.0: not an outer product, left out)
SHAPES = [(128, 9216), (10, 128), (3, 5), (2, 2), (700, 2000)]


def _signed(a):
    """Bits, so that -0.0 and 0.0 differ."""
    return a.view(np.int32 if a.dtype == np.float32 else np.int64)


@pytest.mark.parametrize("m,n", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_one_term_product_is_torchs_bit_for_bit(m, n, dtype, threads):
    rng = np.random.default_rng(m * n)
    a = rng.standard_normal((m, 1)).astype(dtype)
    b = rng.standard_normal((1, n)).astype(dtype)
    a[0, 0] = -abs(a[0, 0])
    b[0, ::4] = 0.0                                  # zeros times negatives: -0.0 in PyTorch
    old = tapelab.get_num_threads()
    tapelab.set_num_threads(threads)
    try:
        ours = (tapelab.tensor(a) @ tapelab.tensor(b)).numpy()
    finally:
        tapelab.set_num_threads(old)
    theirs = (torch.tensor(a) @ torch.tensor(b)).numpy()
    np.testing.assert_array_equal(_signed(ours), _signed(theirs))
    assert ours[0, 0] == 0 and np.signbit(ours[0, 0])


@pytest.mark.parametrize("features,out", [(9216, 128), (320, 50), (50, 10)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_one_linear_weight_gradient_is_torchs(features, out, dtype):
    """The tutorial's ``compute_grad``: a linear at batch 1, backward; the weight gradient is PyTorch's bit
    for bit, the bias's too; the input gradient to float tolerance (a GEMV: another order of sums)."""
    rng = np.random.default_rng(features)
    x = rng.standard_normal((1, features)).astype(dtype)
    w = (rng.standard_normal((out, features)) / np.sqrt(features)).astype(dtype)
    b = rng.standard_normal(out).astype(dtype)
    g = rng.standard_normal((1, out)).astype(dtype)
    g[0, ::5] = 0.0

    def run(lib):
        xt, wt, bt = (lib.tensor(v, requires_grad=True) for v in (x, w, b))
        lib.nn.functional.linear(xt, wt, bt).backward(lib.tensor(g))
        return xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()

    (gx, gw, gb), (tx, tw, tb) = run(tapelab), run(torch)
    np.testing.assert_array_equal(_signed(gw), _signed(tw))
    np.testing.assert_array_equal(gb, tb)
    np.testing.assert_allclose(gx, tx, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_batched_one_term_products_keep_matmul():
    """Stacks of one-term products and mixed dtypes are not outer products of two matrices: matmul's values."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6, 1)).astype(np.float32)
    b = rng.standard_normal((4, 1, 7)).astype(np.float32)
    np.testing.assert_array_equal((tapelab.tensor(a) @ tapelab.tensor(b)).numpy(),
                                  (torch.tensor(a) @ torch.tensor(b)).numpy())
    c = rng.standard_normal((1, 7))
    with pytest.raises(RuntimeError):
        torch.tensor(a[0]) @ torch.tensor(c)
    with pytest.raises(RuntimeError):
        tapelab.tensor(a[0]) @ tapelab.tensor(c)
