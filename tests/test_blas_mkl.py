"""MKL's GEMM behind ``kernels.gemm`` (``engine/kernels/blas.py``): with the ``[mkl]`` extra (the MKL
PyTorch's wheels bundle) float32/float64 products from ``gemm.MKL_MIN`` multiply-adds give torch.mm's
floats bit for bit over operand layouts, row-strided outputs, stacks and a stack times a matrix; nn.Linear's
forward and gradients equal torch's; smaller products, ``set_enabled(False)`` and ``TAPELAB_MKL=0`` keep
numpy's route."""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tapelab
from tapelab.kernels import blas
from _mkl_bits import assert_torchs_floats

gemm_module = importlib.import_module("tapelab.kernels.gemm")

pytestmark = pytest.mark.skipif(not blas.available(), reason="MKL is not installed (the [mkl] extra)")


def _torchs_mkl() -> bool:
    try:
        return importlib.metadata.version("mkl") == "2024.2.0"
    except importlib.metadata.PackageNotFoundError:
        return False


bitwise = pytest.mark.skipif(not _torchs_mkl(), reason="another MKL than PyTorch 2.13's (2024.2.0)")
RNG = np.random.default_rng(25)


@pytest.fixture(autouse=True)
def one_thread():
    """Bit for bit holds thread for thread: one each (MKL's own threads, as torch runs them, and
    tapelab's blocks cut a product where a single call does not)."""
    torch.set_num_threads(1)
    tapelab.set_num_threads(1)


def _matrix(rows, cols, form, dtype):
    """(rows, cols): ``n`` C-contiguous, ``t`` a transposed view, ``s`` every other column of a wider one."""
    if form == "t":
        return RNG.standard_normal((cols, rows)).astype(dtype).T
    if form == "s":
        return RNG.standard_normal((rows, 2 * cols)).astype(dtype)[:, ::2]
    return RNG.standard_normal((rows, cols)).astype(dtype)


@bitwise
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "sn", "ns"])
@pytest.mark.parametrize("m, k, n", [(64, 784, 512), (20, 200, 800), (1024, 128, 64), (33, 1000, 97)])
def test_products_are_torchs_bit_for_bit(m, k, n, layout, dtype):
    assert m * k * n >= gemm_module.MKL_MIN
    a, b = _matrix(m, k, layout[0], dtype), _matrix(k, n, layout[1], dtype)
    got = tapelab.kernels.gemm(np, a, b)
    want = torch.from_numpy(a).mm(torch.from_numpy(b)).numpy()
    assert got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


@bitwise
def test_a_row_strided_output_is_written_in_place_and_its_margins_untouched():
    a, b = _matrix(64, 300, "n", np.float32), _matrix(300, 100, "n", np.float32)
    wide = np.full((64, 130), 7.0, np.float32)
    out = wide[:, 10:110]
    assert gemm_module._matmul(a, b, out) is out
    np.testing.assert_array_equal(out, torch.from_numpy(a).mm(torch.from_numpy(b)).numpy())
    assert (wide[:, :10] == 7).all() and (wide[:, 110:] == 7).all()


def test_an_output_sharing_memory_with_an_operand_gets_the_right_product():
    a = RNG.standard_normal((128, 128)).astype(np.float32)
    want = a @ a.T
    gemm_module._matmul(a, a.T, a)
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-4)


@bitwise
@pytest.mark.parametrize("form", ["n", "t"])
def test_stacks_and_a_stack_times_a_matrix_are_torchs(form):
    a = RNG.standard_normal((2, 4, 64, 96)).astype(np.float32)
    b = RNG.standard_normal((2, 4, 96, 80)).astype(np.float32)
    if form == "t":
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2)).swapaxes(-1, -2)
    np.testing.assert_array_equal(tapelab.kernels.gemm(np, a, b), torch.from_numpy(a).matmul(torch.from_numpy(b)).numpy())
    w = RNG.standard_normal((96, 300)).astype(np.float32)
    np.testing.assert_array_equal(tapelab.kernels.gemm(np, a, w), torch.from_numpy(a).matmul(torch.from_numpy(w)).numpy())


@bitwise
def test_linear_forward_and_gradients_equal_torchs():
    x = RNG.standard_normal((64, 784)).astype(np.float32)
    w = (RNG.standard_normal((512, 784)) * 0.03).astype(np.float32)
    bias = RNG.standard_normal(512).astype(np.float32)
    out = {}
    for m in (torch, tapelab):
        xt, wt, bt = (m.tensor(v, requires_grad=True) for v in (x, w, bias))
        y = m.nn.functional.linear(xt, wt, bt)
        (y * y).sum().backward()
        out[m.__name__] = [t.detach().numpy() for t in (y, xt.grad, wt.grad, bt.grad)]
    for got, want in zip(out["tapelab"], out["torch"]):
        np.testing.assert_array_equal(got, want)


def test_small_products_and_the_switch_keep_the_other_routes():
    """Below ``MKL_MIN`` a product is what the routes without MKL give; switched off, so is a large one."""
    small = _matrix(8, 128, "n", np.float32), _matrix(128, 512, "n", np.float32)
    large = _matrix(64, 784, "n", np.float32), _matrix(784, 512, "n", np.float32)
    assert small[0].size * small[1].shape[1] < gemm_module.MKL_MIN <= large[0].size * large[1].shape[1]
    with_mkl = [gemm_module._matmul(*pair) for pair in (small, large)]
    old = blas.set_enabled(False)
    try:
        assert not blas.available()
        without = [gemm_module._matmul(*pair) for pair in (small, large)]
    finally:
        blas.set_enabled(old)
    assert blas.available()
    np.testing.assert_array_equal(with_mkl[0], without[0])
    np.testing.assert_allclose(with_mkl[1], without[1], rtol=1e-4, atol=1e-3)
    if _torchs_mkl():
        want = torch.from_numpy(large[0]).mm(torch.from_numpy(large[1])).numpy()
        assert np.array_equal(with_mkl[1], want) and not np.array_equal(without[1], want)


def test_integer_broadcast_and_empty_products_are_numpys():
    a = RNG.integers(-5, 5, (64, 200, 100)).astype(np.int64)
    b = RNG.integers(-5, 5, (100, 200)).astype(np.int64)
    np.testing.assert_array_equal(tapelab.kernels.gemm(np, a, b), a @ b)
    x = RNG.standard_normal((1, 64, 200)).astype(np.float32)
    y = RNG.standard_normal((3, 200, 100)).astype(np.float32)
    assert blas.matmul(x, y) is None
    np.testing.assert_allclose(tapelab.kernels.gemm(np, x, y), x @ y, rtol=1e-5, atol=1e-4)
    assert tapelab.kernels.gemm(np, np.ones((0, 5000), np.float32), np.ones((5000, 300), np.float32)).shape == (0, 300)


def test_tapelab_mkl_0_keeps_mkl_unloaded():
    code = ("import numpy as np, tapelab; from tapelab.kernels import blas, vml; "
            "assert not blas.available() and not vml.available(); "
            "a = np.ones((64, 784), np.float32); b = np.ones((784, 512), np.float32); "
            "np.testing.assert_array_equal(tapelab.kernels.gemm(np, a, b), a @ b)")
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TAPELAB_MKL="0"), check=True)


@bitwise
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lu_det_and_slogdet_of_a_singular_matrix_are_torchs(dtype):
    """MKL's getrf (``kernels/lapack.py``) as PyTorch calls it: ``det``/``slogdet`` factor a real
    C-contiguous A through A^T, ``lu_factor`` A itself; pivots and U's last bits agree even where the
    CPU's code leaves a rounding error in place of U's zero pivot."""
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype)
    batch = np.stack([a, 2 * np.eye(3, dtype=dtype) + 0.1 * np.arange(9, dtype=dtype).reshape(3, 3)])
    for x in (a, batch, np.ascontiguousarray(batch.transpose(0, 2, 1)).transpose(0, 2, 1)):
        tt, tl = torch.from_numpy(x), tapelab.tensor(x)
        np.testing.assert_array_equal(tapelab.linalg.det(tl).numpy(), torch.linalg.det(tt).numpy())
        for got, want in zip(tapelab.linalg.slogdet(tl), torch.linalg.slogdet(tt)):
            assert_torchs_floats(got.numpy(), want.numpy())   # log|det|: the last bit of a log of U's diagonal
        lu_got, piv_got, _ = tapelab.linalg.lu_factor_ex(tl)
        lu_want, piv_want, _ = torch.linalg.lu_factor_ex(tt)
        np.testing.assert_array_equal(lu_got.numpy(), lu_want.numpy())
        np.testing.assert_array_equal(piv_got.numpy(), piv_want.numpy())


@bitwise
@pytest.mark.skipif(blas.mkl.threading_layer() != "gnu", reason="MKL is not on GNU OpenMP (PyTorch's layer)")
@pytest.mark.parametrize("m, k, n", [(64, 784, 512), (7, 1000, 300), (16, 4096, 64), (512, 512, 512)])
def test_two_threads_give_torchs_floats_at_two_threads(m, k, n):
    """On MKL's own threads a product is cut as in PyTorch at the same thread count: long sums over
    few outputs (64x784x512, a weight gradient's 16x4096x64) are split across the threads, so the
    floats differ from one thread's, and equal torch's at two threads; ``linear``'s GEMM with its
    bias (beta 1) too."""
    a, b = _matrix(m, k, "n", np.float32), _matrix(k, n, "n", np.float32)
    bias = RNG.standard_normal(n).astype(np.float32)
    torch.set_num_threads(2)
    tapelab.set_num_threads(2)
    want = torch.from_numpy(a).mm(torch.from_numpy(b)).numpy()
    np.testing.assert_array_equal(tapelab.kernels.gemm(np, a, b), want)
    added = gemm_module.gemm_add(np, a, b, np.broadcast_to(bias, (m, n)).copy())
    np.testing.assert_array_equal(added, torch.addmm(torch.from_numpy(bias), torch.from_numpy(a), torch.from_numpy(b)).numpy())


def test_a_pool_block_keeps_mkl_to_its_own_thread(monkeypatch):
    """Inside a split's block (``pool.in_block``) a product runs on the calling thread alone: MKL's
    threads there would share the CPUs the pool's blocks already use."""
    from tapelab.base import pool
    tapelab.set_num_threads(2)
    a, b = _matrix(64, 784, "n", np.float32), _matrix(784, 512, "n", np.float32)
    seen = []
    real = blas.matmul_into
    monkeypatch.setattr(blas, "matmul_into",
                        lambda *args, threads=1, **kw: seen.append(("threads", threads)) or real(*args, **kw))
    monkeypatch.setattr(blas, "matmul", lambda a, b, n=1: seen.append(("threads", n)) or a @ b)
    pool.run_blocks(lambda: seen.append(("block", pool.in_block())) or gemm_module.gemm(np, a, b), [(), ()])
    assert ("block", True) in seen and set(seen) == {("block", True), ("threads", 1)} and not pool.in_block()
    seen.clear()
    gemm_module.gemm(np, a, b)
    assert seen == [("threads", 2 if blas.mkl.threaded() else 1)]


@pytest.mark.skipif(blas.mkl.threading_layer() != "gnu", reason="MKL is not on GNU OpenMP")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", ["n", "t"])
def test_a_stack_at_two_threads_is_cut_by_products_with_one_threads_floats(dtype, form, monkeypatch):
    """Attention's per-head products at two threads: the batch is cut over the threads (the stack's
    ``_parts`` call, one range per thread), each product on one thread, so every float is the
    one-thread product's (and torch's bmm at one thread, for MKL 2024.2)."""
    a = RNG.standard_normal((16, 4, 64, 32)).astype(dtype)
    b = RNG.standard_normal((16, 4, 32, 64)).astype(dtype)
    if form == "t":
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2)).swapaxes(-1, -2)
    one = tapelab.kernels.gemm(np, a, b)
    ready = blas._calls(np.dtype(dtype))
    parts = []
    monkeypatch.setitem(blas._READY, np.dtype(dtype),
                        ready[:4] + (lambda *args: parts.append(args[-1]) or ready[4](*args),))
    tapelab.set_num_threads(2)
    two = tapelab.kernels.gemm(np, a, b)
    assert parts == ([2] if blas.mkl.threaded() else [])
    np.testing.assert_array_equal(two, one)
    if _torchs_mkl():
        np.testing.assert_array_equal(one, torch.from_numpy(a).matmul(torch.from_numpy(b)).numpy())


@bitwise
@pytest.mark.skipif(blas.mkl.threading_layer() != "gnu", reason="MKL is not on GNU OpenMP (PyTorch's layer)")
def test_linear_at_two_threads_is_torchs_addmm():
    """``linear``'s bias is copied into its output over the threads (``_fused_linear._fill_bias``), then
    the GEMM adds the product (beta 1) on MKL's threads: torch's floats at two threads."""
    x = RNG.standard_normal((1024, 128)).astype(np.float32)
    w = RNG.standard_normal((384, 128)).astype(np.float32)
    b = RNG.standard_normal(384).astype(np.float32)
    torch.set_num_threads(2)
    tapelab.set_num_threads(2)
    want = torch.nn.functional.linear(*map(torch.from_numpy, (x, w, b))).numpy()
    for _ in range(3):     # split or whole, as the pool's timing chooses
        got = tapelab.nn.functional.linear(*map(tapelab.tensor, (x, w, b))).numpy()
        np.testing.assert_array_equal(got, want)
