"""tapelab.linalg beyond the op database: PyTorch's exception types and messages for singular,
non-square and non-positive-definite input (LinAlgError is a RuntimeError), the ``*_ex`` variants'
``info`` with and without ``check_errors``, the degenerate-spectrum gradients PyTorch documents
(inf/nan through eigenvectors or singular vectors, finite through the values alone), gradcheck of
the factorisations on gauge-invariant functions, that every torch.linalg name is there, det/slogdet/logdet
gradients at singular input (PyTorch's values, finite for det), and PyTorch's same-dtype errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.autograd import gradcheck, gradgradcheck

SINGULAR = [[1.0, 2.0], [2.0, 4.0]]
NOT_PD = [[1.0, 2.0], [2.0, 1.0]]


def _both(values):
    return torch.tensor(values, dtype=torch.float64), tapelab.tensor(values, dtype=tapelab.float64)


def _same_error(call, values, *extra):
    """``call(m, A, *extra)`` raises the same type with the same message in torch and tapelab."""
    t, lt = _both(values)
    with pytest.raises(Exception) as want:
        call(torch, t, *extra)
    with pytest.raises(Exception) as got:
        call(tapelab, lt, *extra)
    assert isinstance(got.value, RuntimeError)
    assert isinstance(got.value, tapelab.linalg.LinAlgError) == isinstance(want.value, torch.linalg.LinAlgError)
    assert str(got.value) == str(want.value)


def test_every_torch_linalg_name_is_there():
    names = [n for n in dir(torch.linalg) if not n.startswith("_") and n != "common_notes"]
    assert [n for n in names if not hasattr(tapelab.linalg, n)] == []
    assert issubclass(tapelab.linalg.LinAlgError, RuntimeError)


@pytest.mark.parametrize("call", [
    lambda m, A: m.linalg.inv(A), lambda m, A: m.linalg.solve(A, A[:, :1]),
    lambda m, A: m.linalg.lu_factor(A), lambda m, A: m.linalg.inv_ex(A, check_errors=True),
    lambda m, A: m.linalg.solve_ex(A, A[:, 0], check_errors=True),
    lambda m, A: m.linalg.lu_factor_ex(A, check_errors=True),
    lambda m, A: m.linalg.inv(m.stack([m.eye(2, dtype=A.dtype), A])),
    lambda m, A: m.linalg.solve(m.stack([m.eye(2, dtype=A.dtype), A]), m.ones(2, 2, dtype=A.dtype)),
], ids=["inv", "solve", "lu_factor", "inv_ex", "solve_ex", "lu_factor_ex", "inv_batched", "solve_batched"])
def test_singular_input_errors_match_torch(call):
    _same_error(call, SINGULAR)


@pytest.mark.parametrize("call", [
    lambda m, A: m.linalg.cholesky(A), lambda m, A: m.linalg.cholesky_ex(A, check_errors=True),
], ids=["cholesky", "cholesky_ex"])
def test_not_positive_definite_errors_match_torch(call):
    _same_error(call, NOT_PD)


@pytest.mark.parametrize("name", ["inv", "det", "slogdet", "eigh", "eigvalsh", "matrix_exp", "cholesky"])
def test_non_square_errors_match_torch(name):
    _same_error(lambda m, A: getattr(m.linalg, name)(A), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


def test_shape_errors_match_torch():
    _same_error(lambda m, A: m.linalg.solve(A, m.ones(3, 1, dtype=A.dtype)), [[2.0, 0.0], [0.0, 2.0]])
    _same_error(lambda m, A: m.linalg.svd(A), [1.0, 2.0])
    _same_error(lambda m, A: m.linalg.tensorinv(A, ind=1), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    _same_error(lambda m, A: m.linalg.multi_dot([A]), [[1.0]])
    _same_error(lambda m, A: m.linalg.cross(A, A), [1.0, 2.0])
    _same_error(lambda m, A: m.linalg.inv(A.long()), [[1.0]])


def test_info_outputs_match_torch():
    values = np.stack([np.eye(2), SINGULAR, np.array(NOT_PD)])
    t, lt = torch.tensor(values), tapelab.tensor(values)
    for name in ("inv_ex", "lu_factor_ex", "cholesky_ex"):
        want, got = getattr(torch.linalg, name)(t).info, getattr(tapelab.linalg, name)(lt).info
        assert got.dtype == tapelab.int32 and got.tolist() == want.tolist(), name
    assert tapelab.linalg.solve_ex(lt, lt).info.tolist() == torch.linalg.solve_ex(t, t).info.tolist()
    # the factor of a non-positive-definite matrix is LAPACK's partial result, as PyTorch's
    np.testing.assert_allclose(tapelab.linalg.cholesky_ex(lt).L.numpy(), torch.linalg.cholesky_ex(t).L.numpy())
    sign, logabs = tapelab.linalg.slogdet(lt)
    assert sign.tolist()[1] == 0.0 and logabs.tolist()[1] == -np.inf
    assert float(tapelab.linalg.det(tapelab.tensor(SINGULAR))) == 0.0


def test_degenerate_spectrum_gradients_as_torch():
    """Through eigenvectors / singular vectors of a repeated spectrum: nan, as PyTorch; through the
    values alone: finite (the identity's gradient is the identity)."""
    for fn in (lambda m, A: m.linalg.eigh(A)[1].sum(), lambda m, A: (lambda U, S, Vh: (U @ Vh).sum() + U.sum())(
            *m.linalg.svd(A)), lambda m, A: m.linalg.eigvalsh(A).sum(), lambda m, A: m.linalg.svdvals(A).sum()):
        t = torch.eye(3, dtype=torch.float64, requires_grad=True)
        lt = tapelab.eye(3, dtype=tapelab.float64, requires_grad=True)
        (want,) = torch.autograd.grad(fn(torch, t), t)
        (got,) = tapelab.autograd.grad(fn(tapelab, lt), lt)
        np.testing.assert_array_equal(np.isnan(got.numpy()), np.isnan(want.numpy()))
        np.testing.assert_allclose(np.nan_to_num(got.numpy()), np.nan_to_num(want.numpy()), atol=1e-12)


def test_eig_values_match_torch():
    """Complex eigenpairs (geev's order and normalisation) in float64; in float32 each eigenvector may
    differ by a phase (numpy computes single precision in double), so magnitudes are compared there."""
    A = np.random.default_rng(5).standard_normal((2, 4, 4))
    for dtype, exact in ((np.float64, True), (np.float32, False)):
        tw, tv = torch.linalg.eig(torch.tensor(A.astype(dtype)))
        lw, lv = tapelab.linalg.eig(tapelab.tensor(A.astype(dtype)))
        assert str(lw.dtype).split(".")[-1] == str(tw.dtype).split(".")[-1]
        np.testing.assert_allclose(lw.numpy(), tw.numpy(), atol=1e-5)
        np.testing.assert_allclose(lv.numpy() if exact else np.abs(lv.numpy()), tv.numpy() if exact else
                                   np.abs(tv.numpy()), atol=1e-5)
        np.testing.assert_allclose(tapelab.linalg.eigvals(tapelab.tensor(A.astype(dtype))).numpy(), tw.numpy(),
                                   atol=1e-5)


R = np.random.default_rng(3)


def _t(*shape):
    return tapelab.tensor(R.standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2)], ids=["square", "wide", "tall"])
def test_lu_and_qr_gradgradcheck(shape):
    def lu(a):
        _, L, U = tapelab.linalg.lu(a)
        return L, U
    a = _t(*shape)
    assert gradcheck(lu, (a,)) and gradgradcheck(lu, (a,))
    q = lambda a: tuple(tapelab.linalg.qr(a))   # noqa: E731   (QR: m >= n and m < n, as PyTorch documents)
    assert gradcheck(q, (a,)) and gradgradcheck(q, (a,))


def test_svd_and_eigh_gradcheck_on_invariants():
    def svd(a):
        U, S, Vh = tapelab.linalg.svd(a, full_matrices=False)
        return U @ Vh, S
    def eigh(a):
        L, V = tapelab.linalg.eigh(a + a.mT)
        return L, (V * L.unsqueeze(-2)) @ V.mT, V.abs()
    for shape in ((3, 3), (2, 4), (4, 2)):
        a = _t(*shape)
        assert gradcheck(svd, (a,)) and gradgradcheck(svd, (a,))
    a = _t(3, 3)
    assert gradcheck(eigh, (a,)) and gradgradcheck(eigh, (a,))


def test_linalg_ops_are_recorded_on_the_tape():
    a = tapelab.tensor(R.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True)
    with tapelab.tape() as t:
        (tapelab.linalg.solve(a, tapelab.ones(3, dtype=tapelab.float64)).sum() + tapelab.linalg.svdvals(a).sum()
         + tapelab.linalg.eigvalsh(a).sum())
    ops = {n.op for n in t.nodes}
    assert {"linalg_lu_factor_ex", "solve_triangular", "linalg_svd", "linalg_eigh"} <= ops


def test_deprecated_top_level_forms_match_torch():
    """torch.lu, torch.geqrf/ormqr, torch.nuclear_norm (PyTorch keeps them, with warnings)."""
    rng = np.random.default_rng(9)
    A, C = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 2))
    ta, tt = torch.geqrf(torch.tensor(A))
    la, lt = tapelab.geqrf(tapelab.tensor(A))
    np.testing.assert_allclose(la.numpy(), ta.numpy(), atol=1e-12)
    np.testing.assert_allclose(lt.numpy(), tt.numpy(), atol=1e-12)
    for left, transpose in ((True, False), (True, True), (False, False)):
        other = C if left else np.swapaxes(C, -1, -2)
        np.testing.assert_allclose(tapelab.ormqr(la, lt, tapelab.tensor(other), left, transpose).numpy(),
                                   torch.ormqr(ta, tt, torch.tensor(other), left, transpose).numpy(), atol=1e-12)
    sq = rng.standard_normal((3, 3))
    with pytest.warns(UserWarning):
        want = torch.lu(torch.tensor(sq), get_infos=True)
    for got, ref in zip(tapelab.lu(tapelab.tensor(sq), get_infos=True), want):
        np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-12)
    assert float(tapelab.nuclear_norm(tapelab.tensor(sq))) == pytest.approx(float(torch.nuclear_norm(torch.tensor(sq))))


_RANK2 = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]
_SINGULAR_DETS = {
    "rank2": np.array(_RANK2),
    "rank1": np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0]),
    "zero": np.zeros((3, 3)),
    "batched": np.stack([np.array(_RANK2), 2 * np.eye(3) + 0.1 * np.arange(9.0).reshape(3, 3),
                         np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])]),
    "complex_rank2": np.array(_RANK2) * (1 + 1j) + np.array([[0, 0, 0], [0, 0, 0], [1j - 1, 0, 2j]]),
}


def _det_grad(m, x, create_graph):
    a = m.tensor(x, requires_grad=True)
    d = m.linalg.det(a)
    loss = (1.5 * d.real + 0.5 * d.imag).sum() if d.is_complex() else (1.5 * d).sum()
    g, = m.autograd.grad(loss, [a], create_graph=create_graph)
    return a, g


@pytest.mark.parametrize("create_graph", [False, True], ids=["first_order", "create_graph"])
@pytest.mark.parametrize("name", sorted(_SINGULAR_DETS))
def test_det_gradient_at_singular_input_matches_torch(name, create_graph):
    """PyTorch's det backward at an exactly singular A: 0 in a plain backward (its LU solve, zeros on U's
    diagonal nudged to eps, of a zero right-hand side), the adjugate (its SVD form) when the backward
    records; finite either way, and the same on a batch that mixes singular and invertible matrices."""
    x = _SINGULAR_DETS[name]
    _, want = _det_grad(torch, x, create_graph)
    _, got = _det_grad(tapelab, x, create_graph)
    assert np.isfinite(np.asarray(got.detach())).all()
    np.testing.assert_allclose(np.asarray(got.detach()), want.detach().numpy(), rtol=1e-10, atol=1e-12)


def _second(m, x):
    a, g = _det_grad(m, x, True)
    gg = m.view_as_real(g) if g.is_complex() else g
    h, = m.autograd.grad((gg * gg).sum(), [a])
    return np.asarray(h.detach()) if m is tapelab else h.numpy()


@pytest.mark.parametrize("name", ["rank2", "rank1", "batched"])
def test_det_second_derivative_at_singular_input_matches_torch(name):
    x = _SINGULAR_DETS[name]
    np.testing.assert_allclose(_second(tapelab, x), _second(torch, x), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("fn", ["slogdet", "logdet"])
@pytest.mark.parametrize("name", sorted(_SINGULAR_DETS))
def test_log_determinant_gradient_at_singular_input_matches_torch(name, fn):
    """slogdet/logdet are not differentiable at a singular A: PyTorch's plain backward is a LAPACK solve
    (a real row-major A through the LU of A^T) that leaves ±inf, nan and some finite entries, or, where
    the CPU's getrf leaves a rounding error on U's diagonal (MKL's AVX-512 code), entries near 1e16 (and
    logdet's nan for the then negative determinant takes no gradient); tapelab factors and solves the
    same way with the same LAPACK, so the pattern and the values agree."""
    grads = []
    for m in (torch, tapelab):
        a = m.tensor(_SINGULAR_DETS[name], requires_grad=True)
        y = m.linalg.slogdet(a).logabsdet if fn == "slogdet" else m.logdet(a)
        (y.real if y.is_complex() else y).sum().backward()
        grads.append(np.asarray(a.grad.detach()) if m is tapelab else a.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)


MIXED = {
    "solve": lambda m, a, b: m.linalg.solve(a, b),
    "solve_right": lambda m, a, b: m.linalg.solve(a, b.mT, left=False),
    "lu_solve": lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b),
    "cholesky_solve": lambda m, a, b: m.cholesky_solve(b, a),
    "lstsq": lambda m, a, b: m.linalg.lstsq(a, b),
    "vecdot": lambda m, a, b: m.linalg.vecdot(a, b.expand(2, 2)),
}


@pytest.mark.parametrize("b_dtype", ["float32", "complex128"])
@pytest.mark.parametrize("name", sorted(MIXED))
def test_operands_of_two_dtypes_raise_as_torch(name, b_dtype):
    """linalg does not promote: A and B of different dtypes (real and complex alike) raise PyTorch's message."""
    a, b = np.eye(2) * 2, np.ones((2, 1))
    with pytest.raises(RuntimeError) as want:
        MIXED[name](torch, torch.tensor(a), torch.tensor(b, dtype=getattr(torch, b_dtype)))
    with pytest.raises(RuntimeError) as got:
        MIXED[name](tapelab, tapelab.tensor(a), tapelab.tensor(b, dtype=getattr(tapelab, b_dtype)))
    assert str(got.value) == str(want.value)
