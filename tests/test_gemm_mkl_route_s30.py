"""``gemm``'s one MKL call on MKL's threads, taken straight from ``gemm`` for a new 2-D product (a linear's
gradient GEMMs): the floats of ``_matmul``'s route and of PyTorch's ``mm``, and ``mkl.threaded``'s answer
decided once."""
import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab.kernels import blas, mkl

gemm_module = importlib.import_module("tapelab.kernels.gemm")

pytestmark = pytest.mark.skipif(not blas.available(), reason="MKL's GEMM not loaded")

# (g, w) and (gᵀ, x) of 1024 x 128 -> 128 and -> 384 linears, and a float64 product
PRODUCTS = [((1024, 128), (128, 128), False, np.float32), ((1024, 384), (384, 128), False, np.float32),
            ((1024, 128), (1024, 128), True, np.float32), ((1024, 384), (1024, 128), True, np.float32),
            ((300, 77), (77, 1500), False, np.float64)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("a_shape,b_shape,transposed,dtype", PRODUCTS)
def test_gemm_equals_matmul_route_and_torch(a_shape, b_shape, transposed, dtype, threads):
    old, old_torch = tapelab.get_num_threads(), torch.get_num_threads()
    tapelab.set_num_threads(threads)
    torch.set_num_threads(threads)
    try:
        rng = np.random.default_rng(3)
        a = rng.standard_normal(a_shape).astype(dtype)
        b = rng.standard_normal(b_shape).astype(dtype)
        a = a.T if transposed else a          # the weight gradient's gᵀ: a transposed view, as the backward passes it
        assert gemm_module._mkl_takes(a, b)
        got = gemm_module.gemm(np, a, b)
        team = gemm_module._mkl_team(threads)
        np.testing.assert_array_equal(got, gemm_module._matmul(a, b, None, team))
        assert got.flags.c_contiguous and (team < 2 or got.ctypes.data % 64 == 0)
        np.testing.assert_array_equal(got, torch.from_numpy(a).mm(torch.from_numpy(b)).numpy())
    finally:
        tapelab.set_num_threads(old)
        torch.set_num_threads(old_torch)


def test_threaded_is_the_layers_answer():
    assert mkl.threaded() == (mkl.threading_layer() not in (None, "sequential"))
