"""linalg.matrix_exp against torch: tapelab computes it with PyTorch's algorithm (the optimized Taylor
polynomials of Bader, Blanes and Casas, engine/ops/linalg_matrix_exp.py), so values and gradients are
bitwise torch's where the matrix products are (under 400 multiply-adds, ATen's own loop) and within
a few units of roundoff of the result's norm where the BLAS's products differ; at the norms around
each degree's bound (where the degree changes), tiny and large (scaling and squaring), single and
batched (a batch always takes degree 18), real and complex; second derivatives too."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.autograd import gradcheck, gradgradcheck
from tapelab.ops.linalg_matrix_exp import _THETAS

DTYPES = ("float32", "float64", "complex64", "complex128")
_rng = np.random.default_rng(7)


def _real(dtype: str) -> np.dtype:
    return np.finfo(np.dtype(dtype)).dtype


def _matrix(shape, norm: float, dtype: str) -> np.ndarray:
    """Random matrices of ``shape`` whose largest column 1-norm is ``norm`` (approximately)."""
    a = _rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * _rng.standard_normal(shape)
    return (a * (norm / np.abs(a).sum(-2).max())).astype(dtype)


def _at_norm(shape, norm, dtype: str) -> np.ndarray:
    """Matrices whose 1-norm is exactly ``norm`` in the working precision: column 0 is (norm, 0, ...),
    the others sum to about norm / 2."""
    a = _matrix(shape, float(norm) / 2, dtype)
    a[..., :, 0] = 0
    a[..., 0, 0] = norm
    return a


def _norms(dtype: str) -> list:
    """0, tiny, each bound, the floats either side of it and 0.1% either side; large norms to square."""
    real = _real(dtype)
    out = [real.type(0), real.type(1e-30)]
    for theta in (real.type(t) for t in _THETAS[real]):
        out += [theta * real.type(0.999), np.nextafter(theta, real.type(0)), theta,
                np.nextafter(theta, real.type(np.inf)), theta * real.type(1.001)]
    return out + [real.type(5), real.type(40)]


def _both(fn, a: np.ndarray):
    return fn(torch, torch.from_numpy(a.copy())).numpy(), fn(tapelab, tapelab.from_numpy(a.copy())).numpy()


def _exp(m, a):
    return m.linalg.matrix_exp(a)


def _normwise(want: np.ndarray, got: np.ndarray) -> float:
    """max |want - got| in units of roundoff of max |want|."""
    eps = np.finfo(want.dtype).eps
    return float(np.abs(want - got).max() / (np.abs(want).max() * eps))


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (1, 7, 7), (3, 3, 3), (2, 2, 5, 5)], ids=str)
def test_values_are_torchs_bitwise_at_every_degree(dtype, shape):
    for norm in _norms(dtype):
        want, got = _both(_exp, _at_norm(shape, norm, dtype))
        assert np.array_equal(want, got), (norm, _normwise(want, got))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 8), (2, 12, 12), (30, 30)], ids=str)
def test_values_with_blas_products_are_within_roundoff(dtype, shape):
    """Products of 8 x 8 and up are the BLAS's (MKL in torch, numpy's OpenBLAS here), whose rounding
    differs in the last bits (complex more: four real products each); squarings amplify that (up to ~60
    units of the norm at norm 40)."""
    unsquared = 8 if np.dtype(dtype).kind == "f" else 32
    for norm in (1e-6, 0.04, 0.5, 1.2, 2.5, 10.0, 40.0):
        want, got = _both(_exp, _matrix(shape, norm, dtype))
        assert _normwise(want, got) < (unsquared if norm < 3 else 128), norm


def test_a_batch_takes_degree_18_as_torchs_does():
    """The same matrix alone (degree 4 at this norm) and in a batch of two (degree 18) round differently,
    in torch and here alike."""
    a = _matrix((6, 6), 0.04, "float32")
    alone, batched = _both(_exp, a), _both(_exp, np.stack([a, a]))
    assert np.array_equal(alone[0], alone[1]) and np.array_equal(batched[0], batched[1])
    assert not np.array_equal(alone[1], batched[1][0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_by_one_is_exp(dtype):
    a = _matrix((4, 1, 1), 3.0, dtype)
    got = tapelab.linalg.matrix_exp(tapelab.from_numpy(a))
    assert np.array_equal(got.numpy(), tapelab.exp(tapelab.from_numpy(a)).numpy())
    np.testing.assert_allclose(got.numpy(), torch.linalg.matrix_exp(torch.from_numpy(a)).numpy(),
                               rtol=2 * np.finfo(_real(dtype)).eps)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)], ids=str)
def test_empty(shape):
    want, got = _both(_exp, np.zeros(shape, np.float32))
    assert got.shape == want.shape and got.dtype == want.dtype


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("batch", [(), (2,)], ids=str)
def test_nan_and_inf_as_torch(bad, batch):
    a = np.broadcast_to(np.eye(3, dtype=np.float32), batch + (3, 3)).copy()
    a[..., 0, 1] = bad
    want, got = _both(_exp, a)
    assert np.array_equal(want, got, equal_nan=True)


def test_overflow_as_torch():
    for dtype, value in (("float32", 400.0), ("float64", 1e30)):
        want, got = _both(_exp, np.full((2, 2), value, dtype))
        assert np.array_equal(want, got, equal_nan=True)


def test_transposed_input():
    a = _matrix((5, 5), 2.0, "float64").T
    want, got = _both(_exp, a)
    assert np.array_equal(want, got)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_runs_in_float32(dtype):
    """PyTorch's half-precision kernel overflows (inf/nan); here float32's result, rounded once."""
    a = tapelab.tensor(_matrix((3, 3), 2.0, "float32"))
    got = tapelab.linalg.matrix_exp(a.to(getattr(tapelab, dtype)))
    assert got.dtype == getattr(tapelab, dtype)
    want = tapelab.linalg.matrix_exp(a.to(getattr(tapelab, dtype)).float()).to(getattr(tapelab, dtype))
    assert torch.equal(torch.from_numpy(got.float().numpy()), torch.from_numpy(want.float().numpy()))


def test_meta_device_gives_the_shape():
    out = tapelab.linalg.matrix_exp(tapelab.empty(2, 4, 4, device="meta"))
    assert out.shape == (2, 4, 4) and out.device.type == "meta"


def test_the_three_spellings_are_one_op():
    a = _matrix((2, 3, 3), 1.0, "float64")
    x = tapelab.from_numpy(a).requires_grad_()
    outs = [tapelab.linalg.matrix_exp(x), tapelab.matrix_exp(x), x.matrix_exp()]
    assert all(np.array_equal(o.detach().numpy(), outs[0].detach().numpy()) for o in outs)
    assert {o.grad_fn.name() for o in outs} == {torch.linalg.matrix_exp(
        torch.from_numpy(a).requires_grad_()).grad_fn.name()} == {"LinalgMatrixExpBackward0"}


@pytest.mark.parametrize("values", [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[1, 2], [3, 4]], [1.0, 2.0]],
                         ids=["non_square", "integer", "vector"])
def test_errors_as_torch(values):
    with pytest.raises(RuntimeError) as want:
        torch.linalg.matrix_exp(torch.tensor(values))
    with pytest.raises(RuntimeError) as got:
        tapelab.linalg.matrix_exp(tapelab.tensor(values))
    assert str(got.value) == str(want.value)


# ---------------------------------------------------------------- gradients
def _grad(m, a, g):
    x = m.from_numpy(a.copy()).requires_grad_()
    return m.autograd.grad(m.linalg.matrix_exp(x), x, m.from_numpy(g.copy()))[0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (4, 3, 3)], ids=str)
def test_gradient_is_torchs_bitwise(dtype, shape):
    """PyTorch's backward is the exponential of the 2n x 2n block matrix [[A^H, G], [0, A^H]]: for n <= 3
    its products are ATen's own loop too."""
    for norm in (1e-5, 0.03, 0.4, 1.2, 2.9, 9.0):
        a, g = _matrix(shape, norm, dtype), _matrix(shape, 1.0, dtype)
        want, got = _grad(torch, a, g).numpy(), _grad(tapelab, a, g).numpy()
        assert np.array_equal(want, got), (norm, _normwise(want, got))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 8, 8)], ids=str)
def test_gradient_with_blas_products_is_within_roundoff(dtype, shape):
    for norm in (1e-5, 0.03, 0.4, 1.2, 2.9, 9.0):
        a, g = _matrix(shape, norm, dtype), _matrix(shape, 1.0, dtype)
        want, got = _grad(torch, a, g).numpy(), _grad(tapelab, a, g).numpy()
        assert _normwise(want, got) < 64, norm


@pytest.mark.parametrize("shape,norm", [((3, 3), 0.2), ((2, 3, 3), 5.0), ((4, 4), 1.0)], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_gradcheck(shape, norm, dtype):
    x = tapelab.from_numpy(_matrix(shape, norm, dtype)).requires_grad_()
    assert gradcheck(tapelab.linalg.matrix_exp, (x,))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_gradgradcheck(dtype):
    x = tapelab.from_numpy(_matrix((2, 3, 3), 1.5, dtype)).requires_grad_()
    assert gradgradcheck(tapelab.linalg.matrix_exp, (x,))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,norm", [((2, 2), 0.3), ((3, 3, 3), 3.0), ((5, 5), 2.0)], ids=str)
def test_second_derivatives_match_torch(dtype, shape, norm):
    """d/dA and d/dG of <grad, V>: the backward differentiates through the op again (a 4n x 4n block)."""
    a, g, v = _matrix(shape, norm, dtype), _matrix(shape, 1.0, dtype), _matrix(shape, 1.0, dtype)
    results = []
    for m in (torch, tapelab):
        x, cot = m.from_numpy(a.copy()).requires_grad_(), m.from_numpy(g.copy()).requires_grad_()
        (gx,) = m.autograd.grad(m.linalg.matrix_exp(x), x, cot, create_graph=True)
        results.append([r.detach().numpy() for r in m.autograd.grad((gx * m.from_numpy(v.copy())).sum(), (x, cot))])
    for want, got in zip(*results):
        assert _normwise(want, got) < 16
