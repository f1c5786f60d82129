"""OpInfos for matrix products, contractions and diagonals."""
from __future__ import annotations

import math

import numpy as np

from .core import ErrorInput, OpInfo, Sample, arr, carr
from .elementwise import values


def _err(args, match, kwargs=None, exc=RuntimeError):
    return ErrorInput(Sample(args, kwargs or {}), exc, match)


def _spd(*shape) -> np.ndarray:
    """Symmetric positive-definite n x n matrices, ``shape = (*batch, n)`` (halved: the OpInfos pass ``a + a.mT``)."""
    n = shape[-1]
    b = arr(*shape, n)
    return (b @ np.swapaxes(b, -1, -2) + n * np.eye(n)) / 2


def _sym(a):
    """``a + a.mH`` (PyTorch's gradcheck_wrapper_hermitian_input) for batches of square matrices; other
    inputs as they are (the error cases)."""
    return a + a.mH if a.ndim >= 2 and a.shape[-1] == a.shape[-2] else a


def _einsum(eq):
    return lambda m, *ops: m.einsum(eq, *ops)


EINSUM = [
    ("mm", "ij,jk->ik", (arr(3, 4), arr(4, 5))),
    ("implicit", "ij,jk", (arr(3, 4), arr(4, 5))),
    ("batched_ellipsis", "...ij,...jk->...ik", (arr(2, 1, 3, 4), arr(5, 4, 2))),
    ("ellipsis_implicit", "b...i,bi", (arr(2, 3, 4), arr(2, 4))),
    ("trace", "ii", (arr(3, 3),)),
    ("diag", "ii->i", (arr(3, 3),)),
    ("sum_alone", "ij->i", (arr(3, 4),)),
    ("transpose", "ij->ji", (arr(3, 4),)),
    ("outer", "i,j->ij", (arr(3), arr(4))),
    ("three", "ab,bc,cd->ad", (arr(2, 3), arr(3, 4), arr(4, 2))),
    ("bcast_label", "ij,j->i", (arr(3, 1), arr(4))),
    ("repeated_other", "iij,j->i", (arr(3, 3, 2), arr(2))),
    ("attention", "bhqd,bhkd->bhqk", (arr(2, 2, 3, 4), arr(2, 2, 5, 4))),
    ("zero_d", ",ij->ij", (arr(), arr(2, 3))),
    ("spaces", "i j , j k", (arr(3, 4), arr(4, 2))),
]

def _sq(*batch, n=3):
    """Well-conditioned square matrices (the identity plus a small random part)."""
    return arr(*batch, n, n) / 2 + 2 * np.eye(n)


def _svd_invariant(m, a):
    """What the SVD fixes whatever the signs LAPACK picks for each singular pair: U Vh, S and U S U^T."""
    U, S, Vh = m.linalg.svd(a, full_matrices=False)
    return U @ Vh, S, (U * S.unsqueeze(-2)) @ U.mH


def _eigh_invariant(m, a, **kw):
    L, V = m.linalg.eigh(_sym(a), **kw)
    return L, (V * L.unsqueeze(-2)) @ V.mH, V.abs()


def _eig_invariant(m, a):
    """The eigenvalues and |V| (LAPACK normalises each eigenvector to norm 1; its phase is free)."""
    L, V = m.linalg.eig(a)
    return L, V.abs()


def _csq(*batch, n=3):
    """Well-conditioned complex square matrices."""
    return carr(*batch, n, n) / 2 + 2 * np.eye(n)


def _hpd(*shape) -> np.ndarray:
    """Hermitian positive-definite matrices, halved (the OpInfos pass ``a + a.mH``), ``shape = (*batch, n)``."""
    n = shape[-1]
    b = carr(*shape, n)
    return (b @ np.conj(np.swapaxes(b, -1, -2)) + n * np.eye(n)) / 2


def _norms(m, a):
    return tuple(m.linalg.matrix_norm(a, o) for o in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf))


_SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
_NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])

# tapelab.linalg (engine/linalg.py, engine/ops/linalg_decomp.py); tests/test_linalg_errors.py has the rest
LINALG = [
    OpInfo("linalg_det", lambda m, a: m.linalg.det(a),
           lambda: [Sample((_sq(),)), Sample((_sq(2),), name="batched"), Sample((_sq(n=1),), name="one"),
                    Sample((_sq(n=4),), noncontig=True, name="noncontig")],
           errors=lambda: [_err((arr(2, 3),), "A must be batches of square matrices, but they are 2 by 3"),
                           _err((arr(3),), "at least 2 dimensions")]),
    OpInfo("linalg_slogdet", lambda m, a: m.linalg.slogdet(a).logabsdet,
           lambda: [Sample((_sq(),)), Sample((-_sq(2),), name="negative")]),
    values("linalg_slogdet_sign", lambda m, a: tuple(m.linalg.slogdet(a)),
           lambda: [Sample((-_sq(2),)), Sample((_SINGULAR,), name="singular")]),
    OpInfo("logdet", lambda m, a: m.logdet(a), lambda: [Sample((_sq(),))]),
    OpInfo("linalg_inv", lambda m, a: m.linalg.inv(a), lambda: [Sample((_sq(),)), Sample((_sq(2, 1),), name="batched")],
           errors=lambda: [_err((_SINGULAR,), "linalg.inv: The diagonal element 2 is zero, the inversion could not "
                                              "be completed because the input matrix is singular", exc=RuntimeError),
                           _err((np.arange(4).reshape(2, 2),), "Expected a floating point")]),
    OpInfo("linalg_solve", lambda m, a, b, **kw: m.linalg.solve(a, b, **kw),
           lambda: [Sample((_sq(), arr(3, 2))), Sample((_sq(2), arr(2, 3)), name="vector"),
                    Sample((_sq(2), arr(3, 2)), name="bcast_b"), Sample((_sq(), arr(2, 3)), {"left": False}, name="right")],
           errors=lambda: [_err((_SINGULAR, arr(2, 1)), "The solver failed because the input matrix is singular"),
                           _err((_sq(), arr(4, 1)), r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x1\)")]),
    OpInfo("linalg_solve_triangular", lambda m, a, b, **kw: m.linalg.solve_triangular(a, b, **kw),
           lambda: [Sample((_sq(), arr(3, 2)), {"upper": True}), Sample((_sq(2), arr(2, 3, 2)), {"upper": False}, name="lower"),
                    Sample((_sq(), arr(2, 3)), {"upper": True, "left": False}, name="right"),
                    Sample((_sq(), arr(3, 2)), {"upper": False, "unitriangular": True}, name="unit")]),
    OpInfo("linalg_lu_factor", lambda m, a: tuple(m.linalg.lu_factor(a)),
           lambda: [Sample((arr(3, 3),)), Sample((arr(2, 4, 4),), name="batched")], grad_atol=1e-3,
           errors=lambda: [_err((_SINGULAR,), r"U\[2,2\] is zero and using it on lu_solve")]),
    values("linalg_lu_p", lambda m, a: m.linalg.lu(a).P, lambda: [Sample((arr(2, 4, 4),)), Sample((arr(3, 5),))]),
    OpInfo("linalg_lu", lambda m, a: tuple(m.linalg.lu(a))[1:],
           lambda: [Sample((arr(3, 3),)), Sample((arr(3, 5),), name="wide"), Sample((arr(5, 3),), name="tall"),
                    Sample((arr(2, 3, 3),), name="batched")], grad_atol=1e-3),
    OpInfo("linalg_lu_solve", lambda m, a, b, **kw: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, **kw),
           lambda: [Sample((_sq(), arr(3, 2))), Sample((_sq(), arr(3, 2)), {"adjoint": True}, name="adjoint"),
                    Sample((_sq(), arr(2, 3)), {"left": False}, name="right")], gradgrad=False),
    OpInfo("lu_unpack", lambda m, a: tuple(m.lu_unpack(*m.linalg.lu_factor(a)))[1:], lambda: [Sample((arr(2, 3, 3),))],
           grad_atol=1e-3, gradgrad=False),
    OpInfo("linalg_cholesky_ex", lambda m, a: tuple(m.linalg.cholesky_ex(_sym(a))),
           lambda: [Sample((_spd(3),)), Sample((_spd(2, 3),), name="batched")], grad_atol=1e-3),
    values("linalg_cholesky_ex_info", lambda m, a: tuple(m.linalg.cholesky_ex(a)),
           lambda: [Sample((_NOT_PD,)), Sample((np.stack([_spd(2) * 2, -_spd(2) * 2]),), name="batched")]),
    values("linalg_ex_info", lambda m, a: (m.linalg.inv_ex(a).info, m.linalg.solve_ex(a, a).info,
                                           m.linalg.lu_factor_ex(a).info, m.linalg.lu_factor_ex(a).pivots),
           lambda: [Sample((_SINGULAR,)), Sample((np.stack([np.eye(2), _SINGULAR]),), name="batched")]),
    OpInfo("cholesky_solve", lambda m, b, a, **kw: m.cholesky_solve(b, m.linalg.cholesky(_sym(a)), **kw),
           lambda: [Sample((arr(3, 2), _spd(3))), Sample((arr(3, 2), _spd(3)), {"upper": False}, name="lower")],
           grad_atol=1e-3),
    OpInfo("cholesky_inverse", lambda m, a: m.cholesky_inverse(m.linalg.cholesky(_sym(a))), lambda: [Sample((_spd(3),))],
           grad_atol=1e-3, gradgrad=False),
    OpInfo("linalg_eigh", _eigh_invariant,
           lambda: [Sample((arr(4, 4),)), Sample((arr(2, 3, 3),), name="batched"),
                    Sample((arr(3, 3),), {"UPLO": "U"}, name="upper")], grad_atol=1e-3, atol=1e-4),
    OpInfo("linalg_eigvalsh", lambda m, a: m.linalg.eigvalsh(_sym(a)), lambda: [Sample((arr(2, 4, 4),))]),
    OpInfo("linalg_svd", _svd_invariant,
           lambda: [Sample((arr(4, 3),), name="tall"), Sample((arr(3, 5),), name="wide"),
                    Sample((arr(2, 3, 3),), name="batched")], grad_atol=1e-3, atol=1e-4),
    OpInfo("linalg_svdvals", lambda m, a: m.linalg.svdvals(a), lambda: [Sample((arr(4, 3),)), Sample((arr(2, 3, 5),))]),
    OpInfo("linalg_pinv", lambda m, a: m.linalg.pinv(a), lambda: [Sample((arr(4, 3),)), Sample((arr(3, 5),), name="wide")],
           grad_atol=1e-3, gradgrad=False),
    OpInfo("linalg_lstsq", lambda m, a, b: m.linalg.lstsq(a, b).solution,
           lambda: [Sample((arr(5, 3), arr(5, 2))), Sample((arr(2, 4, 3), arr(2, 4, 1)), name="batched")],
           grad_atol=1e-3, gradgrad=False),
    values("linalg_matrix_rank", lambda m, a: (m.linalg.matrix_rank(a), m.linalg.lstsq(a, a).rank),
           lambda: [Sample((arr(4, 3),)), Sample((np.ones((3, 3)),), name="rank_one")], dtypes=("float64",)),
    *[OpInfo(f"linalg_matrix_norm_{o}", lambda m, a, o=o: m.linalg.matrix_norm(a, o),
             lambda: [Sample((arr(2, 3, 4),))], grad_atol=1e-3)
      for o in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)],
    OpInfo("linalg_norm", lambda m, a, **kw: m.linalg.norm(a, **kw),
           lambda: [Sample((arr(3, 4),)), Sample((arr(3, 4),), {"ord": 1}, name="ord1"),
                    Sample((arr(2, 3, 4),), {"ord": 3, "dim": 2}, name="vector"),
                    Sample((arr(2, 3, 4),), {"ord": "nuc", "dim": (0, 2)}, name="nuc_dims")], grad_atol=1e-3, gradgrad=False),
    OpInfo("linalg_cond", lambda m, a: m.linalg.cond(a), lambda: [Sample((_sq(),))], grad_atol=1e-3, gradgrad=False),
    OpInfo("linalg_matrix_power", lambda m, a, k: m.linalg.matrix_power(a, k),
           lambda: [Sample((_sq(), 3)), Sample((_sq(2), -2), name="negative"), Sample((_sq(), 1), name="one")], gradgrad=False),
    OpInfo("linalg_matrix_exp", lambda m, a: m.linalg.matrix_exp(a),
           lambda: [Sample((arr(3, 3),)), Sample((arr(2, 2) * 3,), name="scaled"), Sample((arr(4, 4) / 40,), name="small"),
                    Sample((arr(2, 3, 3),), name="batched")]),
    OpInfo("linalg_multi_dot", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]),
           lambda: [Sample((arr(3), arr(3, 4), arr(4, 2))), Sample((arr(2, 3), arr(3, 4), arr(4)), name="vec_last")], gradgrad=False),
    OpInfo("linalg_cross", lambda m, a, b: m.linalg.cross(a, b),
           lambda: [Sample((arr(2, 3), arr(1, 3)))],
           errors=lambda: [_err((arr(2), arr(2)), "inputs dimension -1 must have length 3")]),
    OpInfo("linalg_vecdot", lambda m, a, b: m.linalg.vecdot(a, b), lambda: [Sample((arr(2, 3), arr(3)))]),
    OpInfo("linalg_diagonal", lambda m, a: m.linalg.diagonal(a, offset=1), lambda: [Sample((arr(2, 3, 4),))]),
    OpInfo("linalg_vander", lambda m, a: m.linalg.vander(a, N=4), lambda: [Sample((arr(2, 3),))], gradgrad=False),
    OpInfo("linalg_householder_product", lambda m, a, t: m.linalg.householder_product(a, t),
           lambda: [Sample((arr(4, 3), arr(3))), Sample((arr(2, 3, 3), arr(2, 2)), name="batched")], gradgrad=False),
    OpInfo("linalg_tensorinv", lambda m, a: m.linalg.tensorinv(a, ind=2), lambda: [Sample((_sq(n=6).reshape(2, 3, 6),))], gradgrad=False),
    OpInfo("linalg_tensorsolve", lambda m, a, b: m.linalg.tensorsolve(a, b),
           lambda: [Sample((_sq(n=6).reshape(2, 3, 6), arr(2, 3)))], gradgrad=False),
    values("linalg_ldl", lambda m, a, b: (*m.linalg.ldl_factor(_sym(a)), m.linalg.ldl_solve(*m.linalg.ldl_factor(_sym(a)), b)),
           lambda: [Sample((arr(4, 4), arr(4, 2))), Sample((_spd(2, 3), arr(2, 3, 1)), name="batched")]),
    OpInfo("torch_svd", lambda m, a: (lambda u, s, v: (u @ v.mT, s))(*m.svd(a)), lambda: [Sample((arr(4, 3),))],
           grad_atol=1e-3, gradgrad=False),
    OpInfo("triangular_solve", lambda m, b, a: tuple(m.triangular_solve(b, a)), lambda: [Sample((arr(3, 2), _sq()))]),
    OpInfo("pinverse", lambda m, a: m.pinverse(a), lambda: [Sample((arr(4, 3),))], grad_atol=1e-3, gradgrad=False),
]

def _c(name, fn, samples, **kw):
    return OpInfo(f"complex.linalg_{name}", fn, samples, **kw)


# complex64/complex128 (carr samples): values and gradients against torch, gradcheck and gradgradcheck in
# complex128, for every function torch.linalg differentiates on complex input; eig/eigvals also on real input
COMPLEX = [
    OpInfo("linalg_eig", _eig_invariant, lambda: [Sample((_sq(),)), Sample((_sq(2, n=2),), name="batched")],
           grad_atol=1e-3),
    OpInfo("linalg_eigvals", lambda m, a: m.linalg.eigvals(a), lambda: [Sample((_sq(2),))], grad_atol=1e-3),
    _c("det", lambda m, a: m.linalg.det(a), lambda: [Sample((_csq(),)), Sample((_csq(2, n=2),), name="batched")]),
    _c("slogdet", lambda m, a: tuple(m.linalg.slogdet(a)), lambda: [Sample((_csq(2, n=2),))]),
    _c("logdet", lambda m, a: m.logdet(a), lambda: [Sample((_csq(n=2),))]),
    _c("inv_ex", lambda m, a: tuple(m.linalg.inv_ex(a)), lambda: [Sample((_csq(2, n=2),))]),
    _c("solve", lambda m, a, b, **kw: m.linalg.solve(a, b, **kw),
       lambda: [Sample((_csq(2, n=2), carr(2, 2, 1))), Sample((_csq(n=2), carr(1, 2)), {"left": False}, name="right")]),
    _c("solve_ex", lambda m, a, b: tuple(m.linalg.solve_ex(a, b)), lambda: [Sample((_csq(2, n=2), carr(2, 2)))]),
    _c("solve_triangular", lambda m, a, b, **kw: m.linalg.solve_triangular(a, b, **kw),
       lambda: [Sample((_csq(2, n=2), carr(2, 2, 1)), {"upper": True}),
                Sample((_csq(n=2), carr(1, 2)), {"upper": False, "left": False}, name="right"),
                Sample((_csq(n=2), carr(2, 1)), {"upper": False, "unitriangular": True}, name="unit")]),
    _c("cholesky", lambda m, a, **kw: m.linalg.cholesky(_sym(a), **kw),
       lambda: [Sample((_hpd(2, 2),)), Sample((_hpd(3),), {"upper": True}, name="upper")], grad_atol=1e-3),
    _c("cholesky_ex", lambda m, a: tuple(m.linalg.cholesky_ex(_sym(a))), lambda: [Sample((_hpd(3),))], grad_atol=1e-3),
    _c("cholesky_solve", lambda m, b, a: m.cholesky_solve(b, m.linalg.cholesky(_sym(a))),
       lambda: [Sample((carr(2, 1), _hpd(2)))], grad_atol=1e-3),
    _c("cholesky_inverse", lambda m, a: m.cholesky_inverse(m.linalg.cholesky(_sym(a))),
       lambda: [Sample((_hpd(2),))], grad_atol=1e-3),
    _c("eigh", _eigh_invariant, lambda: [Sample((carr(2, 2, 2),)), Sample((carr(2, 2),), {"UPLO": "U"}, name="upper")],
       grad_atol=1e-3, atol=1e-4),
    _c("eigvalsh", lambda m, a: m.linalg.eigvalsh(_sym(a)), lambda: [Sample((carr(2, 2, 2),))], grad_atol=1e-3),
    _c("eig", _eig_invariant, lambda: [Sample((_csq(2, n=2),))], grad_atol=1e-3),
    _c("eigvals", lambda m, a: m.linalg.eigvals(a), lambda: [Sample((_csq(),))], grad_atol=1e-3),
    _c("svd", _svd_invariant, lambda: [Sample((carr(3, 2),), name="tall"), Sample((carr(2, 3),), name="wide"),
                                        Sample((carr(2, 2, 2),), name="batched")], grad_atol=1e-3, atol=1e-4),
    _c("svdvals", lambda m, a: m.linalg.svdvals(a), lambda: [Sample((carr(2, 2, 3),))], grad_atol=1e-3),
    _c("qr", lambda m, a, **kw: tuple(m.linalg.qr(a, **kw)),
       lambda: [Sample((carr(3, 2),), name="tall"), Sample((carr(2, 3),), name="wide"),
                Sample((carr(2, 2, 2),), name="batched"), Sample((carr(2, 3),), {"mode": "complete"}, name="complete")],
       grad_atol=1e-3),
    _c("lu", lambda m, a: tuple(m.linalg.lu(a))[1:],
       lambda: [Sample((carr(2, 2, 2),)), Sample((carr(2, 3),), name="wide"), Sample((carr(3, 2),), name="tall")],
       grad_atol=1e-3),
    _c("lu_factor", lambda m, a: tuple(m.linalg.lu_factor_ex(a)), lambda: [Sample((carr(3, 3),))], grad_atol=1e-3),
    _c("lu_solve", lambda m, a, b, **kw: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, **kw),
       lambda: [Sample((_csq(n=2), carr(2, 1)), {"adjoint": True}, name="adjoint"),
                Sample((_csq(n=2), carr(1, 2)), {"left": False}, name="right")]),
    _c("pinv", lambda m, a: m.linalg.pinv(a), lambda: [Sample((carr(3, 2),)), Sample((carr(2, 3),), name="wide")],
       grad_atol=1e-3),
    _c("lstsq", lambda m, a, b: m.linalg.lstsq(a, b).solution, lambda: [Sample((carr(3, 2), carr(3, 1)))],
       grad_atol=1e-3),
    _c("matrix_exp", lambda m, a: m.linalg.matrix_exp(a),
       lambda: [Sample((carr(2, 2, 2),)), Sample((carr(3, 3) / 20,), name="single")]),
    _c("matrix_power", lambda m, a, k: m.linalg.matrix_power(a, k),
       lambda: [Sample((_csq(n=2), 3)), Sample((_csq(2, n=2), -2), name="negative")]),
    _c("vector_norm", lambda m, a: m.linalg.vector_norm(a, 3, dim=-1), lambda: [Sample((carr(2, 4),))]),
    _c("matrix_norm", _norms, lambda: [Sample((carr(3, 2),))], grad_atol=1e-3),
    _c("norm", lambda m, a: (m.linalg.norm(a), m.linalg.norm(a, 1, dim=-1)), lambda: [Sample((carr(3, 4),))]),
    _c("cond", lambda m, a: m.linalg.cond(a), lambda: [Sample((_csq(),))], grad_atol=1e-3),
    _c("householder_product", lambda m, a, t: m.linalg.householder_product(a, t),
       lambda: [Sample((carr(3, 2), carr(2) / 2)), Sample((carr(2, 2, 2), carr(2, 1) / 2), name="batched")]),
    _c("cross", lambda m, a, b: m.linalg.cross(a, b), lambda: [Sample((carr(2, 3), carr(1, 3)))]),
    _c("vecdot", lambda m, a, b: m.linalg.vecdot(a, b), lambda: [Sample((carr(2, 3), carr(3)))]),
    _c("multi_dot", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]),
       lambda: [Sample((carr(2), carr(2, 3), carr(3, 2)))]),
    _c("vander", lambda m, a: m.linalg.vander(a, N=4), lambda: [Sample((carr(2, 3),))]),
    _c("diagonal", lambda m, a: m.linalg.diagonal(a, offset=1), lambda: [Sample((carr(2, 3, 4),))]),
    _c("tensorinv", lambda m, a: m.linalg.tensorinv(a, ind=1), lambda: [Sample((_csq(n=2),))]),
    _c("tensorsolve", lambda m, a, b: m.linalg.tensorsolve(a, b),
       lambda: [Sample((_csq(n=2).reshape(2, 1, 2), carr(2, 1)))]),
    _c("torch_svd", lambda m, a: (lambda u, s, v: (u @ v.mH, s))(*m.svd(a)), lambda: [Sample((carr(3, 2),))],
       grad_atol=1e-3),
    _c("ormqr", lambda m, a, t, c: m.ormqr(a, t, c), lambda: [Sample((carr(3, 2), carr(2) / 2, carr(3, 1)))]),
]

OPS = [
    OpInfo("matmul", lambda m, a, b: a @ b,
           lambda: [Sample((arr(3, 4), arr(4, 5)), name="mm"), Sample((arr(2, 3, 4), arr(4, 2)), name="batched"),
                    Sample((arr(4), arr(4, 3)), name="vec_mat"), Sample((arr(3, 4), arr(4)), name="mat_vec"),
                    Sample((arr(2, 1, 3, 4), arr(5, 4, 2)), name="bcast"), Sample((arr(4), arr(4)), name="dot"),
                    Sample((arr(3), arr(2, 3, 4)), name="vec_batched"), Sample((arr(2, 3, 4), arr(4)), name="batched_vec"),
                    Sample((arr(0, 3), arr(3, 4)), name="empty_rows"), Sample((arr(2, 0), arr(0, 3)), name="empty_k"),
                    Sample((arr(4, 3), arr(3, 3)), noncontig=True, name="noncontig")],
           errors=lambda: [_err((arr(3, 4), arr(3, 4)), r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)"),
                           _err((arr(3), arr(4)), r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"),
                           _err((arr(3, 4), arr(5)), r"size mismatch, got input \(3\), mat \(3x4\), vec \(5\)"),
                           _err((arr(3), arr(4, 5)), r"\(1x3 and 4x5\)"),
                           _err((arr(2, 3, 4), arr(2, 3, 4)), r"batch2 tensor to be: \[2, 4\] but got: \[2, 3\]"),
                           _err((arr(2, 3, 4), arr(3, 4, 5)), "must match the size")]),
    OpInfo("matmul_0d", lambda m, a, b: m.matmul(a, b), lambda: [],
           errors=lambda: [_err((arr(), arr(3)), "both arguments to matmul need to be at least 1D")]),
    OpInfo("matmul_int", lambda m, a, b: a @ b,
           lambda: [Sample((np.arange(6).reshape(2, 3), np.arange(3)))], grad=False,
           errors=lambda: [_err((arr(2, 3), np.arange(3)), "addmv input tensors must have the same dtype, but got Long, Float, and Long")]),
    OpInfo("mm", lambda m, a, b: m.mm(a, b), lambda: [Sample((arr(3, 4), arr(4, 5))),
                                                      Sample((arr(5, 3), arr(3, 4)), noncontig=True, name="noncontig")],
           errors=lambda: [_err((arr(3), arr(3, 4)), "self must be a matrix"),
                           _err((arr(3, 4), arr(4)), "mat2 must be a matrix"),
                           _err((arr(3, 4), arr(3, 4)), r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)")]),
    OpInfo("bmm", lambda m, a, b: m.bmm(a, b), lambda: [Sample((arr(2, 3, 4), arr(2, 4, 5)))],
           errors=lambda: [_err((arr(3, 4), arr(3, 4)), "batch1 must be a 3D tensor"),
                           _err((arr(2, 3, 4), arr(3, 4, 4)), r"to be: \[2, 4\] but got: \[3, 4\]")]),
    OpInfo("mv", lambda m, a, b: a.mv(b), lambda: [Sample((arr(3, 4), arr(4)))],
           errors=lambda: [_err((arr(3, 4), arr(3)), r"size mismatch, got input \(3\), mat \(3x4\), vec \(3\)"),
                           _err((arr(3, 4), arr(4, 1)), "vector \\+ matrix @ vector expected, got 1, 2, 2")]),
    OpInfo("dot", lambda m, a, b: m.dot(a, b), lambda: [Sample((arr(4), arr(4))), Sample((arr(0), arr(0)), name="empty")],
           errors=lambda: [_err((arr(3), arr(4)), "inconsistent tensor size"),
                           _err((arr(3, 1), arr(3)), "1D tensors expected, but got 2D and 1D tensors")]),
    OpInfo("vdot", lambda m, a, b: m.vdot(a, b), lambda: [Sample((arr(4), arr(4)))]),
    OpInfo("inner", lambda m, a, b: m.inner(a, b), lambda: [Sample((arr(2, 4), arr(3, 4))),
                                                            Sample((arr(), arr(3)), name="0d")]),
    OpInfo("outer", lambda m, a, b: m.outer(a, b), lambda: [Sample((arr(3), arr(4)))],
           errors=lambda: [_err((arr(3), arr(3, 1)), "outer: Expected 1-D argument vec2, but got 2-D")]),
    OpInfo("addmm", lambda m, c, a, b, **kw: m.addmm(c, a, b, **kw),
           lambda: [Sample((arr(3), arr(2, 4), arr(4, 3))),
                    Sample((arr(2, 3), arr(2, 4), arr(4, 3)), {"beta": 0.5, "alpha": 2.0}, name="scaled")]),
    OpInfo("addmm_beta0", lambda m, c, a, b: m.addmm(c, a, b, beta=0),
           lambda: [Sample((np.full((2, 3), np.nan), arr(2, 4), arr(4, 3)))], differentiable_args=(1, 2)),
    OpInfo("baddbmm", lambda m, c, a, b, **kw: c.baddbmm(a, b, **kw),
           lambda: [Sample((arr(2, 3, 5), arr(2, 3, 4), arr(2, 4, 5))),
                    Sample((arr(5), arr(2, 3, 4), arr(2, 4, 5)), {"alpha": -1.5}, name="alpha")]),
    *[OpInfo(f"einsum_{name}", _einsum(eq), lambda ops=ops: [Sample(ops)]) for name, eq, ops in EINSUM],
    OpInfo("einsum_list", lambda m, a, b: m.einsum("ij,jk", [a, b]), lambda: [Sample((arr(2, 3), arr(3, 2)))]),
    OpInfo("einsum_errors", lambda m, eq, *ops: m.einsum(eq, *ops), lambda: [],
           errors=lambda: [_err(("ij,jk->ik", arr(3, 4), arr(5, 5)), "subscript j has size 5 for operand 1"),
                           _err(("ij->ik", arr(3, 4)), "output subscript k does not appear"),
                           _err(("ij,jk->ii", arr(3, 4), arr(4, 3)), "appears more than once in the output"),
                           _err(("ij,jk", arr(3, 4)), "fewer operands were provided"),
                           _err(("ij", arr(3, 4), arr(4)), "more operands were provided"),
                           _err(("ijk,jk", arr(3, 4), arr(4, 3)), r"number of subscripts in the equation \(3\)")]),
    OpInfo("tensordot", lambda m, a, b, **kw: m.tensordot(a, b, **kw),
           lambda: [Sample((arr(3, 4, 5), arr(4, 5, 2))), Sample((arr(3, 4), arr(4, 5)), {"dims": 1}, name="dims1"),
                    Sample((arr(3, 4), arr(2, 5)), {"dims": 0}, name="dims0"),
                    Sample((arr(3, 4, 5), arr(5, 4, 2)), {"dims": ([1, 2], [1, 0])}, name="lists")],
           errors=lambda: [_err((arr(3, 4, 5), arr(4, 5, 6)), "contracted dimensions need to match",
                                {"dims": ([1], [1])})]),
    OpInfo("trace", lambda m, a: m.trace(a), lambda: [Sample((arr(3, 3),)), Sample((arr(3, 5),), name="rect")],
           errors=lambda: [_err((arr(2, 2, 2),), "trace: expected a matrix")]),
    OpInfo("trace_int", lambda m, a: a.trace(), lambda: [Sample((np.arange(9).reshape(3, 3),))], grad=False),
    OpInfo("diagonal", lambda m, a, **kw: m.diagonal(a, **kw),
           lambda: [Sample((arr(3, 4),)), Sample((arr(3, 4),), {"offset": 1}, name="offset"),
                    Sample((arr(2, 3, 4),), {"offset": -1, "dim1": -1, "dim2": 0}, name="dims"),
                    Sample((arr(3, 4),), {"offset": 5}, name="empty"),
                    Sample((arr(4, 3),), noncontig=True, name="noncontig")],
           errors=lambda: [_err((arr(3, 4),), "diagonal dimensions cannot be identical", {"dim1": 1, "dim2": 1}),
                           _err((arr(3, 4),), "Dimension out of range", {"dim1": 2}, IndexError)]),
    OpInfo("diag", lambda m, a, *k: m.diag(a, *k),
           lambda: [Sample((arr(3),)), Sample((arr(3), -1), name="vec_offset"), Sample((arr(3, 4),), name="mat"),
                    Sample((arr(3, 4), 2), name="mat_offset")],
           errors=lambda: [_err((arr(2, 2, 2),), "Supports 1D or 2D tensors")]),
    OpInfo("kron", lambda m, a, b: m.kron(a, b),
           lambda: [Sample((arr(2, 3), arr(4, 2))), Sample((arr(2), arr(3, 2)), name="mixed_nd")]),
    # Q and R are unique for full-rank inputs (R's diagonal signs are LAPACK's, as in PyTorch)
    OpInfo("linalg_qr", lambda m, a, **kw: tuple(m.linalg.qr(a, **kw)),
           lambda: [Sample((arr(5, 3),), name="tall"), Sample((arr(3, 3),), name="square"),
                    Sample((arr(3, 5),), name="wide"), Sample((arr(2, 4, 3),), name="batched"),
                    Sample((arr(2, 3, 4),), {"mode": "complete"}, name="complete_wide"),
                    Sample((arr(3, 3),), {"mode": "complete"}, name="complete_square"),
                    Sample((arr(4, 3),), noncontig=True, name="noncontig"),
                    Sample((arr(0, 3),), name="empty_rows"), Sample((arr(3, 0),), name="empty_cols")],
           grad_atol=1e-3,
           errors=lambda: [_err((arr(3),), "must have at least 2 dimensions"),
                           _err((arr(3, 3),), "unrecognized mode 'full'", {"mode": "full"}),
                           _err((np.arange(9).reshape(3, 3),), "Expected a floating point")]),
    # the input is symmetrised (A + A^T) as PyTorch's gradcheck_wrapper_hermitian_input does: the
    # factorisation reads one triangle, so finite differences of a free matrix are not its gradient
    OpInfo("linalg_cholesky", lambda m, a, **kw: m.linalg.cholesky(_sym(a), **kw),
           lambda: [Sample((_spd(3),), name="square"), Sample((_spd(2, 4),), name="batched"),
                    Sample((_spd(3),), {"upper": True}, name="upper"),
                    Sample((_spd(2, 1, 3),), {"upper": True}, name="batched_upper"),
                    Sample((_spd(4),), noncontig=True, name="noncontig"),
                    Sample((arr(1, 1) ** 2 + 1,), name="one_by_one"), Sample((arr(2, 0, 0),), name="empty")],
           grad_atol=1e-3,
           errors=lambda: [_err((arr(3),), "must have at least 2 dimensions"),
                           _err((arr(2, 3),), "must be batches of square matrices"),
                           _err((np.arange(4).reshape(2, 2),), "Expected a floating point"),
                           _err((-_spd(3),), "leading minor of order 1 is not positive-definite"),
                           _err((np.stack([_spd(2), np.array([[1.0, 2.0], [2.0, -4.0]])]),),
                                r"\(Batch element 1\): The factorization could not be completed")]),
    OpInfo("cholesky", lambda m, a, **kw: m.cholesky(_sym(a), **kw),
           lambda: [Sample((_spd(3),), name="lower"), Sample((_spd(2, 3),), {"upper": True}, name="upper")],
           grad_atol=1e-3,
           errors=lambda: [_err((-_spd(2),), "^cholesky: The factorization could not be completed")]),
    # the forward only: PyTorch refuses these backwards (tests/test_op_declarations.py checks the messages)
    OpInfo("linalg_qr_nograd", lambda m, a, **kw: tuple(m.linalg.qr(a, **kw)),
           lambda: [Sample((arr(5, 3),), {"mode": "r"}, name="r"), Sample((arr(3, 5),), {"mode": "r"}, name="r_wide"),
                    Sample((arr(5, 3),), {"mode": "complete"}, name="complete_tall")],
           grad=False),
    *LINALG,
    *COMPLEX,
]
