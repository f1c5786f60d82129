"""Our own float32 GEMM (engine/kernels/sgemm.py) behind ``kernels.gemm``: values against float64
products and torch.mm over edge shapes and operand layouts, the choice of path, bitwise equality
of split and whole products, prepacked weights, and the layers whose products it runs."""

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.kernels import blas

pytest.importorskip("numba")   # the [jit] extra: without it every product is np.matmul

SG = kernels.loops("sgemm")


@pytest.fixture(autouse=True)
def faster(monkeypatch):
    """The kernel taken as the faster one at every size, on any host (``sgemm.MAX_ROWS``: only
    with AVX-512), so the wiring is tested everywhere; correct it is on every host. MKL's GEMM,
    which takes products first where it is loaded (tests/test_blas_mkl.py), is off meanwhile."""
    monkeypatch.setattr(SG, "MAX_ROWS", float("inf"))
    old = blas.set_enabled(False)
    yield
    blas.set_enabled(old)


@pytest.fixture
def own_calls(monkeypatch):
    """The products our kernel ran while the test ran (their first operand's shape)."""
    calls = []
    for name in ("matmul_into", "matmul_batch_into"):
        real = getattr(SG, name)
        monkeypatch.setattr(SG, name, lambda a, b, out, *parts, real=real: (calls.append(a.shape),
                                                                              real(a, b, out, *parts))[1])
    return calls


def _operands(m, k, n, layout, rng):
    """``a (m, k)`` and ``b (k, n)`` float32 as ``layout`` says: n plain, t a transposed view,
    s every other column of a wider array."""
    def make(rows, cols, form):
        if form == "t":
            return rng.standard_normal((cols, rows), dtype=np.float32).T
        if form == "s":
            return rng.standard_normal((rows, 2 * cols), dtype=np.float32)[:, ::2]
        return rng.standard_normal((rows, cols), dtype=np.float32)
    return make(m, k, layout[0]), make(k, n, layout[1])


def _check(got, a, b):
    """Within float32 accumulation of the float64 product (``sqrt(K)``-scaled rounding of the terms'
    magnitudes), and equal to torch.mm within float32 rounding."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    err = np.abs(got - a64 @ b64)
    bound = 4 * np.sqrt(a.shape[1]) * np.finfo(np.float32).eps * (np.abs(a64) @ np.abs(b64)) + 1e-30
    assert (err <= bound).all(), f"max error/bound {(err / bound).max():.2f} for {a.shape} @ {b.shape}"
    want = torch.from_numpy(np.ascontiguousarray(a)).mm(torch.from_numpy(np.ascontiguousarray(b))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(a.shape[1]))


@pytest.mark.parametrize("m, k, n", [
    (2, 16, 32), (20, 200, 800), (20, 800, 200), (37, 301, 71), (13, 17, 33), (97, 257, 131),
    (14, 512, 64), (128, 128, 128), (3, 1031, 45), (700, 200, 10 + 32), (64, 784, 512),
])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt", "sn", "ns"])
def test_values_against_float64_and_torch(m, k, n, layout, own_calls):
    rng = np.random.default_rng(m * 7919 + k * 31 + n)
    a, b = _operands(m, k, n, layout, rng)
    got = kernels.gemm(np, a, b)
    assert own_calls and got.shape == (m, n) and got.dtype == np.float32
    _check(got, a, b)
    out = np.full((m, n), np.nan, np.float32)
    assert kernels.gemm(np, a, b, out=out) is out
    np.testing.assert_array_equal(out, got)


def test_out_with_a_row_stride_and_its_margins_untouched(own_calls):
    rng = np.random.default_rng(1)
    a, b = _operands(30, 50, 70, "nn", rng)
    wide = np.full((30, 90), 7.0, np.float32)
    kernels.gemm(np, a, b, out=wide[:, 10:80])
    assert own_calls
    _check(wide[:, 10:80], a, b)
    assert (wide[:, :10] == 7).all() and (wide[:, 80:] == 7).all()


def test_out_sharing_memory_with_an_operand_is_numpys_buffered_product(own_calls):
    a = np.random.default_rng(2).standard_normal((40, 40), dtype=np.float32)
    want = a @ a
    kernels.gemm(np, a, a, out=a)
    assert not own_calls
    np.testing.assert_array_equal(a, want)


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (1, 200, 800), (5, 3, 4), (40, 7, 33), (9, 40, 31), (6, 0, 40)])
def test_the_kernel_itself_at_shapes_below_the_thresholds(m, k, n):
    """``gemm`` sends these to numpy (``OWN_MIN_*``); the kernel is right on them too."""
    rng = np.random.default_rng(m + k + n)
    a, b = _operands(m, k, n, "nn", rng)
    got = SG.matmul_into(a, b, np.full((m, n), np.nan, np.float32))
    if k == 0:
        assert (got == 0).all()
    else:
        _check(got, a, b)


def test_small_vector_and_non_float32_products_are_numpys(own_calls):
    a = np.random.default_rng(3).standard_normal((64, 64))
    f = a.astype(np.float32)
    for x, y in [(f[:1], f), (f[:, :10], f[:10]), (f, f[:, :31]), (a, a)]:     # M 1, K 10, N 31, float64
        np.testing.assert_array_equal(kernels.gemm(np, x, y), np.matmul(x, y))
    assert not own_calls


def test_loops_off_means_numpy(own_calls):
    a = np.random.default_rng(4).standard_normal((64, 64), dtype=np.float32)
    kernels.set_enabled(False)
    np.testing.assert_array_equal(kernels.gemm(np, a, a), np.matmul(a, a))
    assert not own_calls


def test_products_past_the_rows_where_ours_wins_are_numpys(own_calls, monkeypatch):
    monkeypatch.setattr(SG, "MAX_ROWS", 32)          # OpenBLAS with its AVX-512 kernels
    monkeypatch.setattr(SG, "MAX_ROWS_LONG", 64)
    a = np.random.default_rng(4).standard_normal((64, 64), dtype=np.float32)
    w = kernels.prepack(np, a)
    np.testing.assert_array_equal(kernels.gemm(np, a, a), np.matmul(a, a))
    np.testing.assert_array_equal(kernels.gemm_here(np, a, w), np.matmul(a, a))
    np.testing.assert_array_equal(kernels.gemm(np, a[None], a[None]), np.matmul(a[None], a[None]))
    assert not own_calls
    kernels.gemm_here(np, a[:20], w)
    kernels.gemm(np, a[:32], a)
    assert own_calls == [(20, 64), (32, 64)]
    monkeypatch.setattr(SG, "MAX_ROWS", 0)           # no AVX-512 on the host
    monkeypatch.setattr(SG, "MAX_ROWS_LONG", 0)
    assert kernels.prepack(np, a) is a


def test_up_to_64_rows_ours_takes_products_of_many_terms_and_columns(own_calls, monkeypatch):
    """Against OpenBLAS's AVX-512 kernels a one-off product of 33-64 rows is ours when it has at
    least ``LONG_MIN_K`` terms and ``LONG_MIN_N`` columns (an MLP b64 step's), numpy's when either
    is few (attention's per-head products) or it has more rows."""
    monkeypatch.setattr(SG, "MAX_ROWS", 32)
    monkeypatch.setattr(SG, "MAX_ROWS_LONG", 64)
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((64, 784), dtype=np.float32), rng.standard_normal((784, 512), dtype=np.float32)
    np.testing.assert_allclose(kernels.gemm(np, x, w), x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
    assert own_calls and set(own_calls) == {(64, 784)}      # whole, or in column blocks over the threads
    own_calls.clear()
    q, k = rng.standard_normal((8, 64, 32), dtype=np.float32), rng.standard_normal((8, 32, 64), dtype=np.float32)
    np.testing.assert_array_equal(kernels.gemm(np, q, k), np.matmul(q, k))              # few terms
    np.testing.assert_array_equal(kernels.gemm(np, x[:, :128], w[:128, :64]), x[:, :128] @ w[:128, :64])  # few columns
    np.testing.assert_array_equal(kernels.gemm(np, np.vstack([x, x[:1]]), w), np.vstack([x, x[:1]]) @ w)  # 65 rows
    assert own_calls == []


def test_max_rows_by_host_and_openblas_core():
    from llvmlite import binding
    from threadpoolctl import threadpool_info
    cores = {lib.get("architecture") for lib in threadpool_info() if lib.get("internal_api") == "openblas"}
    if not binding.get_host_cpu_features().get("avx512f", False):
        assert SG._max_rows() == 0
    elif cores == {"Haswell"}:                     # the two settings measured (bench/README.md)
        assert SG._max_rows() == float("inf")
    elif cores == {"SkylakeX"}:
        assert SG._max_rows() == 32


def test_split_over_two_threads_equals_whole_bitwise(own_calls):
    """Rows and columns of the output come out the same from any block: results do not depend on
    the pool's timing."""
    rng = np.random.default_rng(5)
    a, b = _operands(300, 513, 700, "nn", rng)
    c, d = _operands(1000, 300, 120, "tn", rng)
    one = (kernels.gemm(np, a, b), kernels.gemm(np, c, d))
    tapelab.set_num_threads(2)
    for _ in range(3):
        np.testing.assert_array_equal(kernels.gemm(np, a, b), one[0])
        np.testing.assert_array_equal(kernels.gemm(np, c, d), one[1])
    np.testing.assert_array_equal(SG.matmul_into(a, b[:, 350:], np.empty((300, 350), np.float32)), one[0][:, 350:])
    np.testing.assert_array_equal(SG.matmul_into(c[500:], d, np.empty((500, 120), np.float32)), one[1][500:])
    assert own_calls


@pytest.mark.parametrize("n", [200, 800, 33])
def test_prepacked_weight_equals_the_plain_product(n, own_calls):
    rng = np.random.default_rng(n)
    w = rng.standard_normal((200, n), dtype=np.float32)
    packed = kernels.prepack(np, w)
    h = rng.standard_normal((20, 200), dtype=np.float32)
    out = np.empty((20, n), np.float32)
    assert kernels.gemm_here(np, h, packed, out=out) is out
    np.testing.assert_array_equal(out, kernels.gemm(np, h, w))
    np.testing.assert_array_equal(kernels.gemm_here(np, h[:1], packed), h[:1] @ w)     # one row: numpy's
    w64, h64 = w.astype(np.float64), h.astype(np.float64)
    assert kernels.prepack(np, w64) is w64
    np.testing.assert_array_equal(kernels.gemm_here(np, h64, kernels.prepack(np, w64)), h64 @ w64)


def test_accuracy_no_worse_than_numpys():
    rng = np.random.default_rng(6)
    a, b = _operands(64, 784, 512, "nn", rng)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    ours = np.abs(SG.matmul_into(a, b, np.empty((64, 512), np.float32)) - exact).max()
    assert ours <= 1.5 * np.abs(np.matmul(a, b) - exact).max()


def test_linear_and_matmul_gradients_equal_torchs(own_calls):
    rng = np.random.default_rng(7)
    x, w, bias = (rng.standard_normal(s, dtype=np.float32) for s in [(3, 40, 200), (96, 200), (96,)])
    gy = rng.standard_normal((3, 40, 96), dtype=np.float32)
    ours = [tapelab.tensor(v, requires_grad=True) for v in (x, w, bias)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (x, w, bias)]
    for mod, (tx, tw, tb) in ((tapelab, ours), (torch, theirs)):
        y = mod.nn.functional.linear(tx, tw, tb)
        z = (y @ tw) * 0.5
        (y * mod.tensor(gy)).sum().backward(retain_graph=True)
        z.sum().backward()
    assert own_calls
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("form", ["plain", "b transposed", "a transposed", "a sliced"])
def test_stacked_products_against_float64_and_torch(form, own_calls):
    """Attention's per-head products ``(B, H, T, d) @ (B, H, d, T)``: one batch shape, merged."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((3, 4, 37, 48), dtype=np.float32)
    b = rng.standard_normal((3, 4, 48, 33), dtype=np.float32)
    if form == "b transposed":
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2)).swapaxes(-1, -2)
    elif form == "a transposed":
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
    elif form == "a sliced":
        a = rng.standard_normal((3, 4, 37, 96), dtype=np.float32)[..., ::2]
    got = kernels.gemm(np, a, b)
    assert own_calls == [a.shape] and got.shape == (3, 4, 37, 33)
    for i in range(3):
        for h in range(4):
            _check(got[i, h], a[i, h], b[i, h])
    want = torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    out = np.full(got.shape, np.nan, np.float32)
    assert kernels.gemm(np, a, b, out=out) is out
    np.testing.assert_array_equal(out, got)
    np.testing.assert_array_equal(got[1, 2], kernels.gemm(np, a[1, 2], b[1, 2]))     # as the 2-D product


def test_broadcast_stacks_are_numpys(own_calls):
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((1, 40, 64), dtype=np.float32), rng.standard_normal((3, 64, 40), dtype=np.float32)
    np.testing.assert_array_equal(kernels.gemm(np, a, b), np.matmul(a, b))
    assert not own_calls


def test_broadcast_operands_read_in_place(own_calls):
    """A zero row stride (``broadcast_to``) is a layout the kernel reads as it is: every row the same."""
    rng = np.random.default_rng(10)
    row, col = rng.standard_normal((1, 50), dtype=np.float32), rng.standard_normal((1, 40), dtype=np.float32)
    a, b = np.broadcast_to(row, (30, 50)), np.broadcast_to(col, (50, 40))
    got = kernels.gemm(np, a, b)
    assert own_calls
    _check(got, a, b)


def test_few_rows_against_a_transposed_weight_equal_the_plain_product_bitwise(own_calls):
    """``x @ w.T`` with few rows runs as ``(w @ x.T).T`` (x and the result transposed, not w): the
    same fused multiply-adds in the same order as with ``w.T`` copied contiguous first."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((21, 300), dtype=np.float32), rng.standard_normal((270, 300), dtype=np.float32)
    got = kernels.gemm(np, x, w.T)
    np.testing.assert_array_equal(got, SG.matmul_into(x, np.ascontiguousarray(w.T), np.empty((21, 270), np.float32)))
    _check(got, x, w.T)
