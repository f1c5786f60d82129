"""A float32 add whose second operand is one row of the first's trailing dims (GPT's ``wte(idx) +
wpe(pos)``) runs as ``pointwise.add_rows`` cut over the threads above ATen's grain (issue 17, session 31):
the same floats as numpy's and PyTorch's add, infs and nans included, on row counts the threads cut
unevenly, with the gradients of both operands unchanged."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("numba")
import tapelab  # noqa: E402
from tapelab import kernels  # noqa: E402


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shape,row", [((8, 64, 384), (64, 384)), ((7, 64, 128), (64, 128)),
                                       ((5, 3, 4099), (4099,)), ((2, 9, 2048), (9, 2048))])
def test_broadcast_add_is_torchs_bit_for_bit(threads, shape, row):
    assert np.prod(shape) > kernels.PARALLEL_MIN   # the split's size
    rng = np.random.default_rng(len(shape) + shape[-1])
    a = rng.standard_normal(shape).astype(np.float32) * 1e3
    b = rng.standard_normal(row).astype(np.float32)
    a.reshape(-1)[[3, 1000, -2]] = [np.inf, np.nan, -np.inf]
    b.reshape(-1)[[1, -1]] = [-np.inf, 3e38]
    tapelab.set_num_threads(threads)   # the conftest restores the counts
    torch.set_num_threads(threads)
    ta, tb = tapelab.tensor(a, requires_grad=True), tapelab.tensor(b, requires_grad=True)
    pa, pb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, want = ta + tb, pa + pb
    np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
    g = rng.standard_normal(shape).astype(np.float32)
    out.backward(tapelab.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_array_equal(ta.grad.numpy(), pa.grad.numpy())
    np.testing.assert_allclose(tb.grad.numpy(), pb.grad.numpy(), rtol=1e-5, atol=1e-3)


def test_the_row_loop_against_numpy_on_uneven_blocks():
    """The loop itself over a row count that does not halve, each block a slice of the same arrays."""
    rng = np.random.default_rng(0)
    a, row = rng.standard_normal((37, 300)).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    out = np.full_like(a, np.nan)
    loop = kernels.loops("pointwise").add_rows
    loop(a[:19], out[:19], row)
    loop(a[19:], out[19:], row)
    np.testing.assert_array_equal(out, a + row)
