"""``tapelab.linalg`` (re-exported by engine/linalg.py): all of ``torch.linalg``, batched, with gradients,
and the older top-level forms (``torch.det``, ``torch.svd``, ...) that are also Tensor methods.

The factorisations are declared ops (qr, cholesky and the triangular solve in engine/ops/linalg.py;
LU, eigh, SVD, LDL^T in engine/ops/linalg_decomp.py; matrix_exp, as PyTorch computes it, in
engine/ops/linalg_matrix_exp.py); everything else is a short composite of them and of Tensor ops
(solve = LU + two triangular solves, det = the product of U's diagonal, pinv and lstsq from the SVD),
so every result is on the tape and differentiates through the ops it is made of. Errors are
PyTorch's: ``LinAlgError`` (a RuntimeError) with its messages for singular and non-positive-definite input.
"""
from __future__ import annotations

import math

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from .. import return_types as rt
from ..core import batching as _batching
from ..core.arguments import refuse_non_tensors
from ..core.creation import eye, zeros
from ..core.dispatch import apply, composite
from . import linalg_decomp as _d
from .linalg import _INEXACT, LinAlgError, QRResult, _cholesky_as, _solve_triangular, matmul, qr  # noqa: F401
from .linalg import diagonal as _diagonal
from .compare import maximum
from .linalg_matrix_exp import matrix_exp_op as _matrix_exp_op
from .movement import stack
from .reduce import vector_norm
from .shaping import cross as _cross
from ._util import warn_once

# the public names of tapelab.linalg (engine/linalg.py re-exports them)
LINALG = ("vector_norm", "matrix_norm", "norm", "matmul", "vecdot", "diagonal", "qr", "cholesky", "cholesky_ex",
           "LinAlgError", "det", "slogdet", "inv", "inv_ex", "solve", "solve_ex", "solve_triangular", "lstsq",
           "lu", "lu_factor", "lu_factor_ex", "lu_solve", "svd", "svdvals", "eig", "eigvals", "eigh", "eigvalsh",
           "pinv", "matrix_power", "matrix_exp", "matrix_rank", "cond", "cross", "multi_dot", "householder_product",
           "tensorinv", "tensorsolve", "vander", "ldl_factor", "ldl_factor_ex", "ldl_solve")
__all__: list = []      # nothing at the top level through this module: TOPLEVEL and METHODS below

# torch.return_types.linalg_*
SlogdetResult, InvExResult, SolveExResult = rt.linalg_slogdet, rt.linalg_inv_ex, rt.linalg_solve_ex
CholeskyExResult, LUResult, LUFactorResult = rt.linalg_cholesky_ex, rt.linalg_lu, rt.linalg_lu_factor
LUFactorExResult, LstsqResult, SVDResult = rt.linalg_lu_factor_ex, rt.linalg_lstsq, rt.linalg_svd
EighResult, EigResult = rt.linalg_eigh, rt.linalg_eig
LDLFactorResult, LDLFactorExResult = rt.linalg_ldl_factor, rt.linalg_ldl_factor_ex


# ---------------------------------------------------------------- checks (PyTorch's messages)
def _check(name: str, A, square: bool = True) -> None:
    try:
        kind = A._data.dtype.kind
    except AttributeError:
        refuse_non_tensors(name, A)
        raise
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if kind not in _INEXACT:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {A.dtype.scalar_type}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _same_dtype(name: str, a, b, a_name: str, b_name: str) -> None:
    """PyTorch's refusal of operands of two dtypes (it does not promote in linalg, complex or not)."""
    try:
        same = a._data.dtype == b._data.dtype
    except AttributeError:
        refuse_non_tensors(name, a, b)
        raise
    if not same:
        raise RuntimeError(f"{name}: Expected {a_name} and {b_name} to have the same dtype, but found {a_name} of "
                           f"type {a.dtype.scalar_type} and {b_name} of type {b.dtype.scalar_type} instead")


def _first_failure(info) -> tuple | None:
    """(batch index, info value) of the first failed matrix, or None (no values on meta: None). Inside
    vmap the check reads the physical ``info`` (every slice's), as PyTorch's ``_linalg_check_errors``."""
    info = _batching.unwrap_all(info)[0]
    if info.device.type == "meta":
        return None
    flat = info.detach().cpu().numpy().reshape(-1)
    bad = np.flatnonzero(flat)
    return (int(bad[0]), int(flat[bad[0]])) if bad.size else None


def _raise_if(info, batched: bool, message) -> None:
    failure = _first_failure(info)
    if failure is not None:
        where = f"(Batch element {failure[0]}): " if batched or _batching.unwrap_all(info)[1] else ""
        raise LinAlgError(message(where, failure[1]))


# ---------------------------------------------------------------- LU family
def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False) -> LUFactorExResult:
    """``LU`` packed (L below the diagonal, unit diagonal implied; U on and above), LAPACK's 1-based
    ``pivots`` (int32) and ``info`` (k > 0: U[k,k] is exactly zero)."""
    _check("linalg.lu_factor_ex", A, square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    packed, info = apply(_d.lu_factor_op, A)
    m, n = A.shape[-2:]
    LU = packed[..., :m, :]
    pivots = packed[..., m, :min(m, n)].detach().real.to(dtype=_int32())
    if check_errors:
        _raise_singular_lu("torch.linalg.lu_factor_ex", info, A.ndim > 2)
    return LUFactorExResult(LU, pivots, info)


def _raise_singular_lu(name: str, info, batched: bool) -> None:
    """PyTorch's RuntimeError (not LinAlgError) for an exact zero on U's diagonal."""
    failure = _first_failure(info)
    if failure is not None:
        where = f"(Batch element {failure[0]}): " if batched or _batching.unwrap_all(info)[1] else ""
        k = failure[1]
        raise RuntimeError(f"{name}: {where}U[{k},{k}] is zero and using it on lu_solve would result in a division "
                           f"by zero. If you still want to perform the factorization, consider calling "
                           f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _int32():
    from ..base import dtype as _dt
    return _dt.int32


def lu_factor(A, *, pivot: bool = True) -> LUFactorResult:
    """``torch.linalg.lu_factor``: raises (RuntimeError, as PyTorch) when U has an exact zero on its diagonal."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    _raise_singular_lu("torch.linalg.lu_factor", info, A.ndim > 2)
    return LUFactorResult(LU, pivots)


def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True):
    """``torch.lu_unpack``: P, L, U of a packed LU (A = P L U)."""
    if _DISPATCH.functions is not None and has_tensor_like((LU_data, LU_pivots)):
        return handle_torch_function(lu_unpack, (LU_data, LU_pivots), LU_data, LU_pivots, unpack_data=unpack_data,
                                     unpack_pivots=unpack_pivots)
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    P = _d.permutation(LU_pivots, m, LU_data.dtype, LU_data.device) if unpack_pivots else zeros(0)
    if not unpack_data:
        return rt.lu_unpack(P, zeros(0), zeros(0))
    L = LU_data[..., :, :k].tril(-1) + eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
    return rt.lu_unpack(P, L, LU_data[..., :k, :].triu())


def lu(A, *, pivot: bool = True) -> LUResult:
    """``torch.linalg.lu``: A = P L U (never raises on singular input, as PyTorch)."""
    _check("linalg.lu", A, square=False)
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return LUResult(*lu_unpack(LU, pivots))


def _rows_permuted(B, pivots, inverse: bool):
    """P^T B (``inverse``) or P B for the permutation of LAPACK ``pivots``."""
    P = _d.permutation(pivots, B.shape[-2], B.dtype, B.device)
    return (P.mT if inverse else P) @ B


def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False):
    """``torch.linalg.lu_solve``: X with A X = B (A^H X = B when ``adjoint``; X A = B when not ``left``)."""
    n = LU.shape[-1]
    _same_dtype("linalg.lu_solve", LU, B, "LU", "B")
    if left and B.shape[-2] != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({LU.shape[-2]}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if not left:            # X A = B  <=>  A^H X^H = B^H
        return lu_solve(LU, pivots, B.mH, adjoint=not adjoint).mH
    if adjoint:             # A^H X = B with A = P L U: U^H L^H P^T X = B
        z = apply(_solve_triangular, LU.mH, B, upper=False)                         # U^H z = B
        w = apply(_solve_triangular, LU.mH, z, upper=True, unit=True)               # L^H w = z
        return _rows_permuted(w, pivots, inverse=False)
    y = apply(_solve_triangular, LU, _rows_permuted(B, pivots, inverse=True), upper=False, unit=True)
    return apply(_solve_triangular, LU, y, upper=True)


def _as_matrix_rhs(A, B):
    """B as a matrix right-hand side, and whether it was a (batch of) vector(s), as PyTorch decides."""
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    return (B.unsqueeze(-1) if vector else B), vector


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False) -> SolveExResult:
    """``torch.linalg.solve_ex``: the solution of A X = B and LAPACK's ``info``."""
    _check("linalg.solve", A)
    _same_dtype("linalg.solve", A, B, "A", "B")
    if not left:
        res, info = solve_ex(A.mT, B.mT, check_errors=check_errors)
        return SolveExResult(res.mT, info)
    rhs, vector = _as_matrix_rhs(A, B)
    if rhs.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {rhs.shape[-2]}x{rhs.shape[-1]})")
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(rhs.shape[:-2])))
    A = A.expand(*batch, *A.shape[-2:])
    rhs = rhs.expand(*batch, *rhs.shape[-2:])
    LU, pivots, info = lu_factor_ex(A)
    if check_errors:
        _raise_if(info, A.ndim > 2, lambda w, k: f"torch.linalg.solve_ex: {w}The solver failed because the input "
                                                 f"matrix is singular.")
    X = lu_solve(LU, pivots, rhs)
    return SolveExResult(X.squeeze(-1) if vector else X, info)


def solve(A, B, *, left: bool = True, out=None):
    """``torch.linalg.solve``: X with A X = B (X A = B when not ``left``); LinAlgError if A is singular."""
    X, info = solve_ex(A, B, left=left)
    _raise_if(info, A.ndim > 2, lambda w, k: f"torch.linalg.solve: {w}The solver failed because the input matrix "
                                             f"is singular.")
    return X if out is None else out.copy_(X)


def inv_ex(A, *, check_errors: bool = False) -> InvExResult:
    """``torch.linalg.inv_ex``: the inverse and ``info`` (k > 0: the k-th diagonal element of U is zero)."""
    _check("linalg.inv", A)
    I = eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape)
    X, info = solve_ex(A, I)
    if check_errors:
        _raise_if(info, A.ndim > 2, _inv_message("linalg.inv_ex"))
    return InvExResult(X, info)


def _inv_message(name: str):
    return lambda where, k: (f"{name}: {where}The diagonal element {k} is zero, the inversion could not be "
                             f"completed because the input matrix is singular.")


def inv(A, *, out=None):
    """``torch.linalg.inv``; LinAlgError naming the zero pivot when A is singular."""
    if _DISPATCH.functions is not None and has_tensor_like((A, out)):
        return handle_torch_function(inv, (A, out), A, out=out)
    X, info = inv_ex(A)
    _raise_if(info, A.ndim > 2, _inv_message("linalg.inv"))
    return X if out is None else out.copy_(X)


def det(A, *, out=None):
    """``torch.linalg.det`` by LU; its gradient is PyTorch's, finite at singular A (engine/ops/linalg_decomp.py)."""
    if _DISPATCH.functions is not None and has_tensor_like((A, out)):
        return handle_torch_function(det, (A, out), A, out=out)
    _check("linalg.det", A)
    d = apply(_d.det_op, A)
    return d if out is None else out.copy_(d)


def slogdet(A, *, out=None) -> SlogdetResult:
    """``torch.linalg.slogdet``: (sign, log |det A|), sign 0 and -inf for a singular A. A complex A's
    sign is a complex unit, differentiable as PyTorch's; a real A's sign has no gradient."""
    _check("linalg.slogdet", A)
    packed = apply(_d.slogdet_op, A)
    sign, logabsdet = packed[..., 0], packed[..., 1].real
    return SlogdetResult(sign if A.is_complex() else sign.detach(), logabsdet)


def logdet(input):
    """``torch.logdet``: log det A (nan for a negative determinant, -inf for a singular A; complex: the
    principal logarithm)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(logdet, (input,), input)
    sign, logabs = slogdet(input)
    if input.is_complex():
        return sign.log() + logabs
    from .compare import where   # PyTorch's: a negative determinant's nan takes no gradient
    return where(sign == -1, math.nan, logabs)


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False, out=None):
    """``torch.linalg.solve_triangular``: X with A X = B (X A = B when not ``left``), A triangular."""
    _check("linalg.solve_triangular", A)
    if not left:
        return solve_triangular(A.mT, B.mT, upper=not upper, unitriangular=unitriangular).mT
    if B.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    X = apply(_solve_triangular, A, B, upper=upper, unit=unitriangular)
    return X if out is None else out.copy_(X)


def triangular_solve(b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False):
    """``torch.triangular_solve`` (deprecated in PyTorch): (solution, cloned_coefficient)."""
    if _DISPATCH.functions is not None and has_tensor_like((b, A)):
        return handle_torch_function(triangular_solve, (b, A), b, A, upper=upper, transpose=transpose,
                                     unitriangular=unitriangular)
    warn_once("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed in "
              "a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does not "
              "return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be replaced "
              "with\nX = torch.linalg.solve_triangular(A, B).")
    coef = A.mT if transpose else A
    X = solve_triangular(coef, b, upper=upper != transpose, unitriangular=unitriangular)
    return rt.triangular_solve(X, A.clone())


# ---------------------------------------------------------------- Cholesky family
def cholesky(A, *, upper: bool = False, out=None):
    """``torch.linalg.cholesky``: L with A = L L^H (L^H when ``upper``); LinAlgError if A is not positive-definite."""
    L = _cholesky_as("linalg.cholesky", A, upper)
    return L if out is None else out.copy_(L)


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:
    """``torch.linalg.cholesky_ex``: the factor and ``info`` (k > 0: the leading minor of order k is not
    positive-definite; the factor then holds LAPACK's partial result, as PyTorch's)."""
    _check("linalg.cholesky_ex", A)
    factor, info = apply(_d.potrf_op, A.detach(), upper=upper)
    if _first_failure(info) is None:      # (always on meta, which has no values to fail on)
        factor = _cholesky_as("linalg.cholesky_ex", A, upper)    # the differentiable factor
    elif check_errors:
        _raise_if(info, A.ndim > 2, lambda w, k: f"linalg.cholesky_ex: {w}The factorization could not be completed "
                                                 f"because the input is not positive-definite (the leading minor "
                                                 f"of order {k} is not positive-definite).")
    return CholeskyExResult(factor, info)


def cholesky_solve(B, L, upper: bool = False):
    """``torch.cholesky_solve``: X with (L L^H) X = B given the Cholesky factor."""
    if _DISPATCH.functions is not None and has_tensor_like((B, L)):
        return handle_torch_function(cholesky_solve, (B, L), B, L, upper=upper)
    if B._data.dtype != L._data.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {B.dtype.scalar_type} and A of "
                           f"type {L.dtype.scalar_type} instead.")
    if upper:
        L = L.mH
    y = apply(_solve_triangular, L, B, upper=False)
    return apply(_solve_triangular, L.mH, y, upper=True)


def cholesky_inverse(L, upper: bool = False):
    """``torch.cholesky_inverse``: (L L^H)^-1 from the Cholesky factor."""
    if _DISPATCH.functions is not None and has_tensor_like((L,)):
        return handle_torch_function(cholesky_inverse, (L,), L, upper=upper)
    return cholesky_solve(eye(L.shape[-1], dtype=L.dtype, device=L.device).expand(*L.shape), L, upper)


# ---------------------------------------------------------------- eigen and singular values
def eigh(A, UPLO: str = "L", *, out=None) -> EighResult:
    """``torch.linalg.eigh``: ascending eigenvalues and orthonormal eigenvectors of a symmetric A (one
    triangle read). Gradients follow PyTorch, including inf/nan for repeated eigenvalues when the
    eigenvectors are differentiated (see engine/ops/linalg_decomp.py)."""
    _check("linalg.eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    packed = apply(_d.eigh_op, A, upper=UPLO == "U")
    n = A.shape[-1]
    return EighResult(packed[..., n, :].real, packed[..., :n, :])   # real eigenvalues, also of a complex A


def eigvalsh(A, UPLO: str = "L", *, out=None):
    """``torch.linalg.eigvalsh``: the eigenvalues alone (a finite gradient whatever the spectrum)."""
    return eigh(A, UPLO).eigenvalues


def eig(A, *, out=None) -> EigResult:
    """``torch.linalg.eig``: complex eigenvalues and eigenvectors (complex64 for float32 input, complex128
    for float64; a complex A's own dtype), LAPACK geev's order and normalisation as PyTorch's; gradients as
    PyTorch's linalg_eig_backward (the loss must not depend on the eigenvectors' phases)."""
    _check("linalg.eig", A)
    packed = apply(_d.eig_op, A)
    n = A.shape[-1]
    return EigResult(packed[..., n, :], packed[..., :n, :])


def eigvals(A, *, out=None):
    """``torch.linalg.eigvals``: the complex eigenvalues (differentiable while they are distinct)."""
    return eig(A).eigenvalues


def svd(A, full_matrices: bool = True, *, driver=None, out=None) -> SVDResult:
    """``torch.linalg.svd``: A = U diag(S) Vh, S descending; gradients as PyTorch's svd_backward."""
    _check("linalg.svd", A, square=False)
    m, n = A.shape[-2:]
    packed = apply(_d.svd_op, A, full=bool(full_matrices))
    U, S, Vh = _d.svd_unpack(packed, m, n, bool(full_matrices))
    return SVDResult(U, S.real, Vh)     # real singular values, also of a complex A


def svdvals(A, *, driver=None, out=None):
    """``torch.linalg.svdvals``: the singular values, descending."""
    _check("linalg.svdvals", A, square=False)
    return svd(A, full_matrices=False).S


def _svd_old(input, some: bool = True, compute_uv: bool = True):
    """``torch.svd`` (the old convention: V, not Vh; zero-filled U and V when not ``compute_uv``)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(_svd_old, (input,), input, some=some, compute_uv=compute_uv)
    U, S, Vh = svd(input, full_matrices=not some)
    if not compute_uv:
        return rt.svd(zeros(*U.shape, dtype=input.dtype), S, zeros(*Vh.shape, dtype=input.dtype))
    return rt.svd(U, S, Vh.mH)


def _tolerance(S, atol, rtol, m: int, n: int, dtype):
    """PyTorch's cut-off: max(atol, rtol * largest singular value), rtol = eps * max(m, n) when neither is given."""
    smax = S[..., :1] if S.shape[-1] else S.sum(-1, keepdim=True)
    if atol is None and rtol is None:
        rtol = float(np.finfo(np.dtype(dtype.name)).eps) * max(m, n)
    tol = (rtol if rtol is not None else 0.0) * smax
    if atol is not None:
        tol = maximum(tol, atol if not isinstance(atol, float) else tol * 0 + atol)
    return tol


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False, out=None):
    """``torch.linalg.pinv`` from the SVD: V diag(1/S where S > tol) U^H."""
    _check("linalg.pinv", A, square=False)
    m, n = A.shape[-2:]
    U, S, Vh = svd(A, full_matrices=False)
    keep = S > _tolerance(S.detach(), atol, rtol, m, n, A.dtype)
    from .compare import where
    s_inv = where(keep, 1.0 / where(keep, S, 1.0), 0.0)
    P = (Vh.mH * s_inv.unsqueeze(-2)) @ U.mH
    return P if out is None else out.copy_(P)


def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False, out=None):
    """``torch.linalg.matrix_rank``: the number of singular values above the tolerance (int64)."""
    _check("linalg.matrix_rank", A, square=False)
    S = svdvals(A.detach())
    from ..base import dtype as _dt
    return (S > _tolerance(S, atol, rtol, *A.shape[-2:], A.dtype)).sum(-1).to(dtype=_dt.int64)


def lstsq(A, B, rcond=None, *, driver=None) -> LstsqResult:
    """``torch.linalg.lstsq`` (PyTorch's default CPU driver, gelsy): the minimum-norm least-squares solution
    through the pseudo-inverse, the rank, and empty residuals and singular values as gelsy gives."""
    if _DISPATCH.functions is not None and has_tensor_like((A, B)):
        return handle_torch_function(lstsq, (A, B), A, B, rcond, driver=driver)
    _check("torch.linalg.lstsq", A, square=False)
    if A._data.dtype != B._data.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {A.dtype.scalar_type} and other's dtype {B.dtype.scalar_type}")
    if A.shape[-2] != B.shape[-2 if B.ndim > 1 else 0]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    vector = B.ndim == A.ndim - 1
    rhs = B.unsqueeze(-1) if vector else B
    X = pinv(A, rtol=rcond) @ rhs
    rank = matrix_rank(A, rtol=rcond)
    empty = zeros(0, dtype=A.dtype, device=A.device)
    return LstsqResult(X.squeeze(-1) if vector else X, empty, rank, empty)


# ---------------------------------------------------------------- norms and conditioning
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None):
    """``torch.linalg.matrix_norm``: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2 over the two ``dim``."""
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if dtype is not None:
        A = A.to(dtype=dtype)
    d0, d1 = (d % A.ndim for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    M = A.movedim((d0, d1), (-2, -1))
    if ord == "nuc" or ord in (2, -2):
        S = svdvals(M)
        res = S.sum(-1) if ord == "nuc" else (S.amax(-1) if ord == 2 else S.amin(-1))
    elif ord in (1, -1, math.inf, -math.inf):
        sums = M.abs().sum(-2 if ord in (1, -1) else -1)
        res = sums.amax(-1) if ord in (1, math.inf) else sums.amin(-1)
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if keepdim:
        for d in sorted((d0, d1)):
            res = res.unsqueeze(d)
    return res


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None, out=None):
    """``torch.linalg.norm``: given an ``ord``, a matrix norm over two dims (or of a 2-D input), else a vector
    norm; without one, the 2-norm of the elements over ``dim`` (two dims too: the Frobenius norm, and
    ``vector_norm``'s dimension check, an IndexError, for a dim out of range)."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is not None and ((dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2)):
        return matrix_norm(A, "fro" if ord is None else ord, dim if dim is not None else (-2, -1), keepdim,
                           dtype=dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.norm: If dim is specified, it mut be of length 1 or 2. Got {dim}")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cond(A, p=None, *, out=None):
    """``torch.linalg.cond``: S_max / S_min for p in (None, 2), S_min / S_max for -2, else norm(A) norm(A^-1)."""
    if p in (None, 2, -2):
        S = svdvals(A)
        return S[..., 0] / S[..., -1] if p != -2 else S[..., -1] / S[..., 0]
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def vecdot(x, y, *, dim: int = -1, out=None):
    """Dot product of vectors along ``dim`` (broadcasting the rest), conjugating ``x`` as PyTorch."""
    _same_dtype("linalg.vecdot", x, y, "x", "y")
    return composite("linalg_vecdot", lambda x, y: (x.conj() * y).sum(dim), x, y)


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """``torch.linalg.diagonal``: the diagonal over the last two dims by default."""
    if _DISPATCH.functions is not None and has_tensor_like((A,)):
        return handle_torch_function(diagonal, (A,), A, offset=offset, dim1=dim1, dim2=dim2)
    return _diagonal(A, offset, dim1, dim2)


def cross(input, other, *, dim: int = -1, out=None):
    """``torch.linalg.cross``: the 3-vector cross product along ``dim`` (broadcasting the rest)."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. "
                           f"Got {input.shape[dim]} and {other.shape[dim]}")
    result = _cross(input, other, dim=dim)
    return result if out is None else out.copy_(result)


# ---------------------------------------------------------------- matrix functions
def matrix_power(A, n: int, *, out=None):
    """``torch.linalg.matrix_power`` by repeated squaring (the inverse's power for n < 0)."""
    if _DISPATCH.functions is not None and has_tensor_like((A, out)):
        return handle_torch_function(matrix_power, (A, out), A, n, out=out)
    _check("linalg.matrix_power", A)
    if n == 0:
        return eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def matrix_exp(A):
    """``torch.linalg.matrix_exp`` (and ``torch.matrix_exp``): PyTorch's optimized Taylor polynomials with
    scaling and squaring, one declared op with PyTorch's gradient (engine/ops/linalg_matrix_exp.py)."""
    if _DISPATCH.functions is not None and has_tensor_like((A,)):
        return handle_torch_function(matrix_exp, (A,), A)
    _check("linalg.matrix_exp", A)
    return apply(_matrix_exp_op, A)


def multi_dot(tensors, *, out=None):
    """``torch.linalg.multi_dot``: the chained product (a 1-D first/last operand is a row/column vector)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first_vec, last_vec = tensors[0].ndim == 1, tensors[-1].ndim == 1
    if first_vec:
        tensors[0] = tensors[0].unsqueeze(0)
    if last_vec:
        tensors[-1] = tensors[-1].unsqueeze(-1)
    for i, t in enumerate(tensors):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    result = tensors[0]
    for t in tensors[1:]:
        result = result @ t
    if first_vec:
        result = result.squeeze(0)
    if last_vec:
        result = result.squeeze(-1)
    return result


def householder_product(A, tau, *, out=None):
    """``torch.linalg.householder_product``: the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H with
    v_i column i of A below the diagonal and 1 on it (LAPACK's orgqr), in Tensor ops (differentiable)."""
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    if tau.shape[-1] > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    V = A.tril(-1) + eye(m, n, dtype=A.dtype, device=A.device)
    Q = eye(m, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], m, m)
    for i in range(tau.shape[-1]):
        v = V[..., :, i:i + 1]
        Q = Q - (Q @ v) @ v.mH * tau[..., i:i + 1].unsqueeze(-1)
    return Q[..., :, :n]


def orgqr(input, tau):
    """``torch.orgqr``: ``householder_product``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, tau)):
        return handle_torch_function(orgqr, (input, tau), input, tau)
    return householder_product(input, tau)


def tensorinv(A, ind: int = 2, *, out=None):
    """``torch.linalg.tensorinv``: the inverse of A seen as a prod(shape[:ind]) x prod(shape[ind:]) matrix."""
    left, right = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(left) != math.prod(right):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(right)} != {math.prod(left)}")
    return inv(A.reshape(math.prod(left), math.prod(right))).reshape((*right, *left))


def tensorsolve(A, B, dims=None, *, out=None):
    """``torch.linalg.tensorsolve``: X with tensordot(A, X, X.ndim) = B."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    rest = tuple(A.shape[B.ndim:])
    X = solve(A.reshape(B.numel(), math.prod(rest)), B.reshape(-1))
    return X.reshape(tuple(rest))


def vander(x, *, N: int | None = None):
    """``torch.linalg.vander``: columns x^0, x^1, ..., x^(N-1) (increasing powers)."""
    if _DISPATCH.functions is not None and has_tensor_like((x,)):
        return handle_torch_function(vander, (x,), x, N=N)
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    N = x.shape[-1] if N is None else N
    if N < 1:
        raise RuntimeError("N must be greater than 1.")
    cols = [x * 0 + 1]
    for _ in range(1, N):
        cols.append(cols[-1] * x)
    return stack(cols, -1)


# ---------------------------------------------------------------- LDL^T (no gradient, as in PyTorch)
def ldl_factor_ex(A, *, hermitian: bool = False, check_errors: bool = False) -> LDLFactorExResult:
    """``torch.linalg.ldl_factor_ex``: LAPACK sytrf's compact LD (lower), its pivots and info."""
    _check("torch.linalg.ldl_factor_ex", A)
    LD, pivots, info = apply(_d.ldl_factor_op, A.detach(), hermitian=hermitian)
    if check_errors:
        _raise_if(info, A.ndim > 2, lambda w, k: f"torch.linalg.ldl_factor_ex: {w}The factorization could not be "
                                                 f"completed because the input is singular.")
    return LDLFactorExResult(LD, pivots, info)


def ldl_factor(A, *, hermitian: bool = False) -> LDLFactorResult:
    """``torch.linalg.ldl_factor``: LD and pivots (D is singular when info > 0; PyTorch does not raise)."""
    LD, pivots, _ = ldl_factor_ex(A, hermitian=hermitian)
    return LDLFactorResult(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian: bool = False, out=None):
    """``torch.linalg.ldl_solve``: X with A X = B from ``ldl_factor``'s output."""
    return apply(_d.ldl_solve_op, LD.detach(), pivots, B.detach(), hermitian=hermitian)


# ---------------------------------------------------------------- top-level torch names
def _slogdet_old(A):
    """``torch.slogdet``: ``linalg.slogdet`` as PyTorch's ``return_types.slogdet``."""
    if _DISPATCH.functions is not None and has_tensor_like((A,)):
        return handle_torch_function(_slogdet_old, (A,), A)
    return rt.slogdet(*slogdet(A))


def _qr_old(input, some: bool = True):
    """``torch.qr`` (deprecated in PyTorch): reduced unless ``some=False``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(_qr_old, (input,), input, some=some)
    warn_once("torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch release.\n"
              "The boolean parameter 'some' has been replaced with a string parameter 'mode'.\nQ, R = torch.qr(A, "
              "some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some else 'complete')")
    return rt.qr(*qr(input, "reduced" if some else "complete"))


def _lu_solve_old(b, LU_data, LU_pivots):
    """``torch.lu_solve`` (deprecated in PyTorch): ``linalg.lu_solve(LU, pivots, b)``."""
    if _DISPATCH.functions is not None and has_tensor_like((b, LU_data, LU_pivots)):
        return handle_torch_function(_lu_solve_old, (b, LU_data, LU_pivots), b, LU_data, LU_pivots)
    warn_once("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future PyTorch "
              "release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = torch.lu_solve(B, LU, "
              "pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)")
    return lu_solve(LU_data, LU_pivots, b)


def _lu_old(A, pivot: bool = True, get_infos: bool = False):
    """``torch.lu`` (deprecated in PyTorch): (LU, pivots[, infos]); raises on a zero pivot unless ``get_infos``."""
    if _DISPATCH.functions is not None and has_tensor_like((A,)):
        return handle_torch_function(_lu_old, (A,), A, pivot=pivot, get_infos=get_infos)
    warn_once("torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be "
              "removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced "
              "with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, "
              "compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = "
              "torch.linalg.lu_factor_ex(A, compute_pivots)")
    LU, pivots, info = lu_factor_ex(A, pivot=pivot, check_errors=not get_infos)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def nuclear_norm(input, dim=None, keepdim: bool = False):
    """``torch.nuclear_norm`` (deprecated in PyTorch): ``linalg.matrix_norm(input, 'nuc', ...)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, dim)):
        return handle_torch_function(nuclear_norm, (input, dim), input, dim=dim, keepdim=keepdim)
    return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim)


def geqrf(input):
    """``torch.geqrf``: LAPACK's compact QR, (a, tau) (no gradient, as in PyTorch)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(geqrf, (input,), input)
    _check("geqrf", input, square=False)
    a, tau = apply(_d.geqrf_op, input.detach())
    return rt.geqrf(a, tau)


def ormqr(input, tau, other, left: bool = True, transpose: bool = False):
    """``torch.ormqr``: ``other`` multiplied by the full m x m Q of ``geqrf``'s output (Q^H when ``transpose``)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, tau, other)):
        return handle_torch_function(ormqr, (input, tau, other), input, tau, other, left=left, transpose=transpose)
    m, n = input.shape[-2:]
    from .movement import cat
    if n < m:       # the full Q: pad with zero columns and zero reflector coefficients
        pad = zeros(*input.shape[:-1], m - n, dtype=input.dtype, device=input.device)
        input = cat([input, pad], -1)
    if tau.shape[-1] < m:
        tau = cat([tau, zeros(*tau.shape[:-1], m - tau.shape[-1], dtype=tau.dtype, device=tau.device)], -1)
    Q = householder_product(input[..., :, :m], tau[..., :m])
    Q = Q.mH if transpose else Q
    return Q @ other if left else other @ Q


def pinverse(input, rcond: float = 1e-15):
    """``torch.pinverse``: ``linalg.pinv`` with ``rtol=rcond``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(pinverse, (input,), input, rcond=rcond)
    return pinv(input, rtol=rcond)


# torch.<name> -> the function here (engine/__init__.py binds them at the top level)
TOPLEVEL = {"det": det, "logdet": logdet, "slogdet": _slogdet_old, "inverse": inv, "cholesky_solve": cholesky_solve,
            "cholesky_inverse": cholesky_inverse, "lu_unpack": lu_unpack, "lu_solve": _lu_solve_old,
            "triangular_solve": triangular_solve, "qr": _qr_old, "svd": _svd_old, "pinverse": pinverse,
            "matrix_exp": matrix_exp, "matrix_power": matrix_power, "orgqr": orgqr, "lu": _lu_old,
            "nuclear_norm": nuclear_norm, "geqrf": geqrf, "ormqr": ormqr}

# Tensor methods with the top-level functions' signatures (self is the first argument)
METHODS = ("det", "logdet", "inverse", "cholesky_solve", "cholesky_inverse", "triangular_solve",
           "pinverse", "matrix_exp", "matrix_power", "orgqr", "geqrf", "ormqr")
inverse = inv
OPERATORS = {"svd": _svd_old, "qr": _qr_old, "slogdet": _slogdet_old, "lu": _lu_old, "lu_solve": _lu_solve_old}
# public names that are compositions of the factorisation ops (tests/test_op_declarations.py reads this)
COMPOSITES = {
    "logdet": "slogdet and log",
    "inverse": "lu_factor_ex and two triangular solves", "cholesky_solve": "two triangular solves",
    "cholesky_inverse": "two triangular solves", "triangular_solve": "solve_triangular and clone",
    "svd": "linalg_svd", "pinverse": "linalg_svd, where and matmul",
    "matrix_power": "matmuls (and inverse)",
    "orgqr": "householder_product (matmuls)", "lu": "linalg_lu_factor_ex",
    "ormqr": "householder_product and matmul", "lu_solve": "two triangular solves and a permutation matmul",
}
