"""Linear's forward with a bias as one compiled call (fill + MKL's GEMM, ``kernels.gemm.gemm_bias``):
the same floats as the two steps it replaces, and PyTorch's ``F.linear``."""
import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab.kernels import blas
from tapelab.nn import _fused_linear

gemm_module = importlib.import_module("tapelab.kernels.gemm")

pytestmark = pytest.mark.skipif(not blas.available(), reason="MKL's GEMM not loaded")

SHAPES = [((1024, 128), 128), ((1024, 128), 384), ((64, 784), 512), ((4, 256, 128), 256), ((300, 77), 1500)]


def _two_steps(x, w, b):
    """The route before the one call: the aligned output, the bias's rows, then ``gemm_add``."""
    rows = x.reshape(-1, x.shape[-1])
    out = gemm_module.product_out(np, rows, w.T, (rows.shape[0], w.shape[0]))
    _fused_linear._fill_bias(np, out, b)
    gemm_module.gemm_add(np, rows, w.T, out)
    return out.reshape(x.shape[:-1] + w.shape[:1])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,n_out", SHAPES)
def test_one_call_equals_two_steps_and_torch(shape, n_out, threads):
    old = tapelab.get_num_threads()
    old_torch = torch.get_num_threads()
    tapelab.set_num_threads(threads)
    torch.set_num_threads(threads)
    try:
        rng = np.random.default_rng(7)
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((n_out, shape[-1])).astype(np.float32)
        b = rng.standard_normal(n_out).astype(np.float32)
        rows = x.reshape(-1, shape[-1])
        parts = tapelab.kernels.split_count(rows.shape[0] * n_out)
        fused = gemm_module.gemm_bias(np, rows, w.T, b, parts)
        assert fused is not None        # the shapes all take MKL's route
        np.testing.assert_array_equal(fused.reshape(shape[:-1] + (n_out,)), _two_steps(x, w, b))
        got = tapelab.nn.functional.linear(tapelab.tensor(x), tapelab.tensor(w), tapelab.tensor(b)).numpy()
        np.testing.assert_array_equal(got, _two_steps(x, w, b))
        want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)).numpy()
        np.testing.assert_array_equal(got, want)
    finally:
        tapelab.set_num_threads(old)
        torch.set_num_threads(old_torch)


def test_strided_weight_and_bias_gradients_match_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((512, 96)).astype(np.float32)
    w = rng.standard_normal((96, 256)).astype(np.float32).T      # a transposed (unit row stride) weight
    b = rng.standard_normal(256).astype(np.float32)
    X, W, B = (tapelab.tensor(a, requires_grad=True) for a in (x, w, b))
    TX, TW, TB = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    y = tapelab.nn.functional.linear(X, W, B)
    ty = torch.nn.functional.linear(TX, TW, TB)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    y.sum().backward()
    ty.sum().backward()
    for ours, theirs in ((X, TX), (W, TW), (B, TB)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_other_dtypes_and_shapes_of_bias_take_the_old_route():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1024, 128))
    w = rng.standard_normal((128, 128))
    assert gemm_module.gemm_bias(np, x, w.T, rng.standard_normal(128), 1) is None            # float64
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    assert blas.linear(x32, w32.T, np.ones((1, 128), np.float32), 1, 1) is None           # a 2-D bias
