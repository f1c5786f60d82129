"""tapelab.linalg on complex tensors: values against PyTorch in complex64 and complex128, batched,
for every function torch.linalg takes complex input to (decompositions compared through what their
phase freedom leaves fixed). Gradients and complex128 gradcheck/gradgradcheck are in the op
database (tests/opdb/linalg.py, the ``complex.linalg_*`` entries)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

_rng = np.random.default_rng(7)


def _c(*shape) -> np.ndarray:
    return _rng.standard_normal(shape) + 1j * _rng.standard_normal(shape)


def _sq(*batch, n=3) -> np.ndarray:
    """Well-conditioned complex square matrices."""
    return _c(*batch, n, n) / 2 + 2 * np.eye(n)


def _hpd(*batch, n=3) -> np.ndarray:
    b = _c(*batch, n, n)
    return b @ np.conj(np.swapaxes(b, -1, -2)) + n * np.eye(n)


def _herm(*batch, n=3) -> np.ndarray:
    b = _c(*batch, n, n)
    return b + np.conj(np.swapaxes(b, -1, -2))


def _svd_fixed(m, a):
    U, S, Vh = m.linalg.svd(a, full_matrices=False)
    return U @ Vh, S, (U * S.unsqueeze(-2).to(U.dtype)) @ U.mH


def _eigh_fixed(m, a):
    L, V = m.linalg.eigh(a)
    return L, (V * L.unsqueeze(-2).to(V.dtype)) @ V.mH, V.abs()


def _eig_fixed(m, a):
    L, V = m.linalg.eig(a)
    order = L.real.argsort(-1)              # LAPACK's order is not PyTorch's contract; the spectrum is
    return L.gather(-1, order), (V @ m.diag_embed(L) @ m.linalg.inv(V))


def _qr(m, a, mode="reduced"):
    return tuple(m.linalg.qr(a, mode=mode))


CASES = {
    "det": (lambda m, a: m.linalg.det(a), [_sq(2)]),
    "slogdet": (lambda m, a: tuple(m.linalg.slogdet(a)), [_sq(2)]),
    "logdet": (lambda m, a: m.logdet(a), [_sq(2)]),
    "inv": (lambda m, a: m.linalg.inv(a), [_sq(2)]),
    "inv_ex": (lambda m, a: tuple(m.linalg.inv_ex(a)), [_sq(2)]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [_sq(2), _c(2, 3, 2)]),
    "solve_left_false": (lambda m, a, b: m.linalg.solve(a, b, left=False), [_sq(2), _c(2, 2, 3)]),
    "solve_ex": (lambda m, a, b: tuple(m.linalg.solve_ex(a, b)), [_sq(2), _c(2, 3)]),
    "solve_triangular": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True), [_sq(2), _c(2, 3, 2)]),
    "solve_triangular_right": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False, left=False),
                               [_sq(2), _c(2, 2, 3)]),
    "cholesky": (lambda m, a: m.linalg.cholesky(a), [_hpd(2)]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(a, upper=True), [_hpd(2)]),
    "cholesky_ex": (lambda m, a: tuple(m.linalg.cholesky_ex(a)), [_hpd(2)]),
    "cholesky_solve": (lambda m, a, b: m.cholesky_solve(b, m.linalg.cholesky(a)), [_hpd(2), _c(2, 3, 2)]),
    "cholesky_inverse": (lambda m, a: m.cholesky_inverse(m.linalg.cholesky(a)), [_hpd()]),
    "eigh": (_eigh_fixed, [_herm(2)]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a, UPLO="U"), [_herm(2)]),
    "eig": (_eig_fixed, [_sq(2)]),
    "eigvals": (lambda m, a: m.linalg.eigvals(a).abs().sort(-1).values, [_sq(2)]),
    "svd": (_svd_fixed, [_c(2, 4, 3)]),
    "svd_wide": (_svd_fixed, [_c(3, 5)]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), [_c(2, 3, 4)]),
    "qr": (_qr, [_c(2, 4, 3)]),
    "qr_wide": (_qr, [_c(3, 4)]),
    "qr_complete": (lambda m, a: _qr(m, a, "complete"), [_c(4, 3)]),
    "lu": (lambda m, a: tuple(m.linalg.lu(a)), [_c(2, 3, 4)]),
    "lu_factor": (lambda m, a: tuple(m.linalg.lu_factor(a)), [_c(2, 3, 3)]),
    "lu_solve": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b), [_sq(2), _c(2, 3, 2)]),
    "lu_solve_adjoint": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, adjoint=True),
                         [_sq(2), _c(2, 3, 2)]),
    "lu_solve_right": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, left=False),
                       [_sq(2), _c(2, 2, 3)]),
    "pinv": (lambda m, a: m.linalg.pinv(a), [_c(2, 4, 3)]),
    "pinv_hermitian": (lambda m, a: m.linalg.pinv(a, hermitian=True), [_herm()]),
    "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b).solution, [_c(2, 5, 3), _c(2, 5, 2)]),
    "matrix_rank": (lambda m, a: m.linalg.matrix_rank(a), [_c(2, 4, 3)]),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), [_c(2, 3, 3)]),
    "matrix_power": (lambda m, a: m.linalg.matrix_power(a, 3), [_c(2, 3, 3)]),
    "matrix_power_neg": (lambda m, a: m.linalg.matrix_power(a, -2), [_sq(2)]),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a, 3, dim=-1), [_c(2, 4)]),
    "norm": (lambda m, a: m.linalg.norm(a), [_c(2, 4)]),
    "cond": (lambda m, a: m.linalg.cond(a), [_sq(2)]),
    "householder_product": (lambda m, a, t: m.linalg.householder_product(a, t), [_c(2, 4, 3), _c(2, 3)]),
    "cross": (lambda m, a, b: m.linalg.cross(a, b), [_c(2, 3), _c(2, 3)]),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b), [_c(2, 4), _c(4)]),
    "multi_dot": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [_c(3), _c(3, 4), _c(4, 2)]),
    "vander": (lambda m, a: m.linalg.vander(a, N=4), [_c(2, 3)]),
    "tensorinv": (lambda m, a: m.linalg.tensorinv(a, ind=1), [_sq(n=4)]),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a, b), [_sq(n=4).reshape(2, 2, 4), _c(2, 2)]),
    "ldl": (lambda m, a, b: m.linalg.ldl_solve(*m.linalg.ldl_factor(a, hermitian=True), b, hermitian=True),
            [_herm(), _c(3, 2)]),
    "geqrf_ormqr": (lambda m, a, b: m.ormqr(*m.geqrf(a), b, transpose=True), [_c(4, 3), _c(4, 2)]),
    "svd_old": (lambda m, a: (lambda u, s, v: (u @ v.mH, s))(*m.svd(a)), [_c(4, 3)]),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1), [_c(2, 3, 4)]),
}
for _o in ("fro", "nuc", 2, -2, 1, -1, float("inf"), -float("inf")):
    CASES[f"matrix_norm_{_o}"] = (lambda m, a, o=_o: m.linalg.matrix_norm(a, o), [_c(2, 3, 4)])


def _np(t):
    return t.detach().resolve_conj().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach())


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_values_match_torch(name, dtype):
    fn, inputs = CASES[name]
    want = fn(torch, *[torch.tensor(x, dtype=getattr(torch, dtype)) for x in inputs])
    got = fn(tapelab, *[tapelab.tensor(x, dtype=getattr(tapelab, dtype)) for x in inputs])
    want, got = (list(x) if isinstance(x, tuple) else [x] for x in (want, got))
    assert len(got) == len(want)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "complex64" else dict(rtol=1e-9, atol=1e-9)
    for w, g in zip(want, got):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], name
        assert tuple(g.shape) == tuple(w.shape), name
        np.testing.assert_allclose(_np(g), _np(w), **tol, err_msg=name)


GAUGE = {
    "svd": lambda m, a: m.linalg.svd(a, full_matrices=False).U.real.sum(),
    "svd_vh": lambda m, a: m.linalg.svd(a).Vh.imag.sum(),
    "eigh": lambda m, a: m.linalg.eigh(a + a.mH).eigenvectors.real.sum(),
    "eig": lambda m, a: m.linalg.eig(a).eigenvectors.real.sum(),
}


@pytest.mark.parametrize("name", sorted(GAUGE))
def test_phase_dependent_loss_raises_as_torch(name):
    """A loss that depends on the phases of singular or eigenvectors: PyTorch's RuntimeError and message."""
    x = _sq(n=3)
    with pytest.raises(RuntimeError) as want:
        GAUGE[name](torch, torch.tensor(x, requires_grad=True)).backward()
    with pytest.raises(RuntimeError) as got:
        GAUGE[name](tapelab, tapelab.tensor(x, requires_grad=True)).backward()
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("name", ["svd", "eigh", "eig"])
def test_phase_invariant_loss_gradient_matches_torch(name):
    """The same decompositions through a phase-invariant loss (|U|, |V|): gradients as PyTorch's."""
    x = _sq(2, n=3)
    fn = {"svd": lambda m, a: m.linalg.svd(a).U.abs().sum() + m.linalg.svd(a).Vh.abs().sum(),
          "eigh": lambda m, a: m.linalg.eigh(a + a.mH).eigenvectors.abs().sum(),
          "eig": lambda m, a: m.linalg.eig(a).eigenvectors.abs().sum()}[name]
    t, lt = torch.tensor(x, requires_grad=True), tapelab.tensor(x, requires_grad=True)
    fn(torch, t).backward()
    fn(tapelab, lt).backward()
    np.testing.assert_allclose(np.asarray(lt.grad), t.grad.numpy(), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("left,right", [("complex64", "float32"), ("float32", "complex128"),
                                        ("complex64", "complex128")])
def test_matmul_of_mixed_real_and_complex_operands_raises_as_torch(left, right):
    a, b = torch.randn(2, 3, dtype=getattr(torch, left)), torch.randn(3, 2, dtype=getattr(torch, right))
    with pytest.raises(RuntimeError) as theirs:
        a @ b
    with pytest.raises(RuntimeError) as ours:
        tapelab.from_numpy(a.numpy()) @ tapelab.from_numpy(b.numpy())
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("left,right", [("complex64", "float32"), ("float32", "complex64"), ("float32", "float64"),
                                        ("int64", "float32")])
def test_cross_of_two_dtypes_raises_as_torch(left, right):
    a, b = torch.ones(2, 3, dtype=getattr(torch, left)), torch.ones(2, 3, dtype=getattr(torch, right))
    for fn in (lambda m, x, y: m.linalg.cross(x, y), lambda m, x, y: m.cross(x, y, dim=1)):
        with pytest.raises(RuntimeError) as theirs:
            fn(torch, a, b)
        with pytest.raises(RuntimeError) as ours:
            fn(tapelab, tapelab.from_numpy(a.numpy()), tapelab.from_numpy(b.numpy()))
        assert str(ours.value) == str(theirs.value)
