"""The matrix factorisations behind ``tapelab.linalg``: LU, symmetric eigendecomposition, SVD,
LDL^T and the Cholesky factor with its ``info``, each one declared op.

An op has one differentiable output, so a factorisation with several (eigenvalues and
eigenvectors; U, S and Vh) returns them packed into one array, which the front end in
engine/linalg.py takes apart into views; the backward receives the packed gradient the same way.
The backwards are PyTorch's formulas (linalg_lu_backward, linalg_eig_backward, svd_backward)
written in Tensor ops, so they differentiate again. LAPACK runs on the host through SciPy for the
routines numpy/cupy do not expose (getrf, potrf, sytrf/sytrs) and on the array's device otherwise.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import backend as _backend
from ..base.grad_mode import is_grad_enabled
from ..base.meta import has_data
from ..core.creation import eye, tensor
from ..core.dispatch import apply
from ..core.registry import ALL, NONE, Op
from ..kernels import lapack as _kernel_lapack
from .linalg import _solve_triangular
from .linalg import diagonal as _diagonal
from .movement import narrow

__all__: list = []


def _lapack(name: str, a: np.ndarray):
    """SciPy's ``get_lapack_funcs(name, (a,))``; getrf and getrs through MKL where it is loaded
    (``kernels/lapack.py``: PyTorch's LU, to the last bit and pivot on a singular matrix)."""
    if name in ("getrf", "getrs"):
        return _kernel_lapack.funcs(name, a)
    import scipy.linalg.lapack as lapack
    return lapack.get_lapack_funcs(name, (a,))


def _per_matrix(xp, a, fn, *outs):
    """Run ``fn(matrix) -> tuple`` on each matrix of the host copy of ``a``; stack the results."""
    host = _backend.asnumpy(xp, a)
    *batch, m, n = host.shape
    flat = host.reshape((-1, m, n))
    results = [fn(np.array(flat[i], order="F")) for i in range(flat.shape[0])]
    stacked = []
    for j, (shape, dtype) in enumerate(outs):
        arr = np.stack([r[j] for r in results]) if results else np.zeros((0, *shape), dtype)
        stacked.append(_backend.host(xp, np.array(arr.reshape((*batch, *shape)), dtype=dtype, order="C")))
    return tuple(stacked)


# ---------------------------------------------------------------- LU
def _lu_fwd(xp, a):
    """LU (L strictly below the diagonal, U on and above) with LAPACK's 1-based pivots appended
    as row m (as floats: the op's one differentiable output carries them to the backward), and info."""
    *batch, m, n = a.shape
    k = min(m, n)
    if not has_data(xp):
        return xp.empty((*batch, m + 1, n), a.dtype), xp.empty(tuple(batch), np.int32)

    def one(mat):
        piv_row = np.zeros((1, n), mat.dtype)
        if mat.size == 0:
            return np.concatenate([mat, piv_row]), 0
        lu, piv, info = _lapack("getrf", mat)(mat)
        piv_row[0, :k] = piv[:k] + 1
        return np.concatenate([lu, piv_row]), max(info, 0)
    return _per_matrix(xp, a, one, ((m + 1, n), a.dtype), ((), np.int32))


def _permutation_fwd(xp, pivots, *, m, dtype):
    """P (m x m) per matrix from LAPACK's 1-based sequential row swaps (on the host: a short loop per matrix)."""
    batch = pivots.shape[:-1]
    if not has_data(xp):
        return xp.empty((*batch, m, m), dtype.np)
    piv = _backend.asnumpy(xp, pivots).astype(np.int64)
    flat = piv.reshape((-1, piv.shape[-1]))
    mats = np.zeros((flat.shape[0], m, m), dtype.np)
    for b in range(flat.shape[0]):
        perm = np.arange(m)
        for i, p in enumerate(flat[b]):
            perm[[i, p - 1]] = perm[[p - 1, i]]
        mats[b, perm, np.arange(m)] = 1
    return _backend.host(xp, mats.reshape((*batch, m, m)))


# an op (not host data made into a tensor) so it runs on a batch of pivots at once, under vmap too
_permutation = Op("lu_permutation", _permutation_fwd, None, saves=NONE)


def permutation(pivots, m: int, dtype, device):
    """P (m x m) with A = P L U from LAPACK's 1-based sequential row swaps ``pivots``."""
    return apply(_permutation, pivots.detach(), m=m, dtype=dtype)


def _lu_vjp(g, out, a):
    """PyTorch's linalg_lu_backward for the packed LU (L strictly below the diagonal, unit
    diagonal implied; U on and above): square A = P L U gives
    gA = P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H; wide and tall A split off the square block.
    Complex: the same with conjugate transposes (PyTorch's convention)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    lu, g = out[..., :m, :], g[..., :m, :]
    P = permutation(out[..., m, :k].real, m, a.dtype, a.device)
    L = lu[..., :, :k].tril(-1) + eye(m, k, dtype=a.dtype, device=a.device)
    U = lu[..., :k, :].triu()
    gL, gU = g[..., :, :k].tril(-1), g[..., :k, :].triu()
    if m == n:
        return (P @ _lu_square_grad(L, U, L.mH @ gL, gU @ U.mH),)
    from .movement import cat
    if m < n:   # A = P L [U1 | U2]: U2 = L^-1 P^T A2 also moves with L
        U1, U2, gU1, gU2 = U[..., :, :m], U[..., :, m:], gU[..., :, :m], gU[..., :, m:]
        gA1 = _lu_square_grad(L, U1, L.mH @ gL - gU2 @ U2.mH, gU1 @ U1.mH)
        gA2 = apply(_solve_triangular, L.mH, gU2, upper=True, unit=True)
        return (P @ cat([gA1, gA2], -1),)
    # m > n: A = P [L1; L2] U: L2 = A2 U^-1 also moves with U
    L1, L2, gL1, gL2 = L[..., :n, :], L[..., n:, :], gL[..., :n, :], gL[..., n:, :]
    gA1 = _lu_square_grad(L1, U, L1.mH @ gL1, gU @ U.mH - L2.mH @ gL2)
    gA2 = apply(_solve_triangular, U, gL2.mH, upper=True).mH
    return (P @ cat([gA1, gA2], -2),)


def _lu_square_grad(L, U, lower, upper):
    """L^-H (tril(lower, -1) + triu(upper)) U^-H, by two triangular solves."""
    phi = lower.tril(-1) + upper.triu()
    x = apply(_solve_triangular, L.mH, phi, upper=True, unit=True)          # L^-H phi
    return apply(_solve_triangular, U, x.mH, upper=True).mH                  # (...) U^-H


lu_factor_op = Op("linalg_lu_factor_ex", _lu_fwd, _lu_vjp, n_extra=1, saves=NONE, save_output=True, complex=True)


def lu_solve_left(A, B):
    """A^-1 B through the LU op and two triangular solves (Tensor ops: differentiable again), for the
    backwards that need a general solve (eig's)."""
    n = A.shape[-1]
    packed, _ = apply(lu_factor_op, A)
    LU = packed[..., :n, :]
    P = permutation(packed[..., n, :].real, n, A.dtype, A.device)
    y = apply(_solve_triangular, LU, P.mT @ B, upper=False, unit=True)
    return apply(_solve_triangular, LU, y, upper=True)


# ---------------------------------------------------------------- determinant
def _det_fwd(xp, a):
    """det A by LU (LAPACK getrf, as PyTorch); 1 for a 0 x 0 matrix."""
    if not has_data(xp):
        return xp.empty(a.shape[:-2], a.dtype)
    if a.shape[-1] == 0:
        return xp.ones(a.shape[:-2], a.dtype)
    if xp is np and _mkl_lu(a):   # PyTorch's LU and its product of U's diagonal, in order
        diag, sign = _kernel_lapack.lu_diagonal(a)
        return sign * np.multiply.accumulate(diag, axis=-1)[..., -1]
    return xp.asarray(xp.linalg.det(a), dtype=a.dtype)


def _mkl_lu(a) -> bool:
    """Whether ``det``/``slogdet`` factor ``a`` with MKL's getrf (loaded, and a LAPACK dtype)."""
    return type(a) is np.ndarray and _kernel_lapack.available(a.dtype)


def _det_vjp(g, out, a):
    """PyTorch's linalg_det_backward: gA = (g conj(det A)) A^-H, the adjugate's conjugate transpose times g.
    A first-order backward solves with A's LU, its exact zeros on U's diagonal moved to eps, so an
    exactly singular A (det 0) gets 0, as PyTorch's; a backward that records (create_graph) is written
    in differentiable Tensor ops: a general solve where |det A| >= 100 eps, and where it is smaller the
    SVD form U diag(alpha g prod_{j != i} S_j) V^H, alpha = conj(det U det V^H): finite at any rank."""
    n = a.shape[-1]
    d = (g * out.conj()).unsqueeze(-1).unsqueeze(-1) * eye(n, dtype=a.dtype, device=a.device)
    if n == 0:
        return (d,)
    if not is_grad_enabled():
        return (_adjoint_solve_nudged(a.detach(), d),)
    eps = float(np.finfo(np.dtype(a.real.dtype.name)).eps)
    mask = out.detach().abs() < 100 * eps
    if a.device.type == "meta" or not bool(mask.any()):
        return (lu_solve_left(a.mH, d),)
    if bool(mask.all()):
        return (_det_grad_singular(a, g),)
    from .compare import where      # a mixed batch: each branch on safe stand-ins for the other's matrices
    m = mask.unsqueeze(-1).unsqueeze(-1)
    distinct = tensor(np.diag(np.arange(1.0, n + 1)), dtype=a.dtype, device=a.device)   # distinct singular values
    nonsingular = lu_solve_left(where(m, eye(n, dtype=a.dtype, device=a.device), a).mH, d)
    return (where(m, _det_grad_singular(where(m, a, distinct), g), nonsingular),)


def _adjoint_solve_nudged(a, d):
    """A^-H d through an LU with exact zeros on U's diagonal replaced by eps (no gradient is recorded).
    Where MKL factors (``_mkl_lu``) a real C-contiguous A, the LU is the forward's, as PyTorch reuses
    it: that of A^T, whose inverse is A^-H itself (a plain solve); otherwise A's, solved adjoint."""
    n = a.shape[-1]
    if a.device.type != "meta" and not a.is_complex() and _mkl_lu(a._data) and a._data.flags.c_contiguous:
        packed, _ = apply(lu_factor_op, a.mT)
        LU = _nudged(packed[..., :n, :], a)
        y = apply(_solve_triangular, LU, permutation(packed[..., n, :].real, n, a.dtype, a.device).mT @ d,
                  upper=False, unit=True)                                   # L y = P^T d
        return apply(_solve_triangular, LU, y, upper=True)                  # U x = y
    packed, _ = apply(lu_factor_op, a)
    LU = _nudged(packed[..., :n, :], a)
    z = apply(_solve_triangular, LU.mH, d, upper=False)                     # U^H z = d
    w = apply(_solve_triangular, LU.mH, z, upper=True, unit=True)           # L^H w = z
    return permutation(packed[..., n, :].real, n, a.dtype, a.device) @ w    # x = P w


def _nudged(LU, a):
    """``LU`` with exact zeros on its diagonal replaced by eps of ``a``'s dtype."""
    n = a.shape[-1]
    diag = _diagonal(LU, 0, -2, -1)
    eps = float(np.finfo(np.dtype(a.real.dtype.name)).eps)
    return LU + (diag == 0).to(dtype=a.dtype).unsqueeze(-1) * eye(n, dtype=a.dtype, device=a.device) * eps


def _det_grad_singular(a, g):
    """The SVD form of det's gradient (PyTorch's, for |det| below 100 eps): products of all singular
    values but one, by repeated multiplication (no division, so exact zeros are fine)."""
    n = a.shape[-1]
    U, S, Vh = svd_unpack(apply(svd_op, a, full=True), n, n, True)
    S = S.real
    alpha = (apply(det_op, U) * apply(det_op, Vh)).conj()
    off = 1 - eye(n, dtype=S.dtype, device=S.device)
    M = S.unsqueeze(-2) * off + (1 - off)               # row i: S with a 1 in place of S_i
    others = narrow(M, -1, 0, 1).squeeze(-1)
    for j in range(1, n):
        others = others * narrow(M, -1, j, 1).squeeze(-1)
    D = (g * alpha).unsqueeze(-1) * others
    return (U * D.unsqueeze(-2)) @ Vh


det_op = Op("linalg_det", _det_fwd, _det_vjp, saves=ALL, save_output=True, complex=True, aliases=("det",))


def _slogdet_fwd(xp, a):
    """sign and log|det A| side by side in a last axis of 2 (complex for a complex A, whose sign is)."""
    if not has_data(xp):
        return xp.empty((*a.shape[:-2], 2), a.dtype)
    if a.shape[-1] == 0:
        return xp.stack([xp.ones(a.shape[:-2], a.dtype), xp.zeros(a.shape[:-2], a.dtype)], -1)
    if xp is np and _mkl_lu(a):   # PyTorch's: the signs' and the log moduli's running product and sum
        diag, sign = _kernel_lapack.lu_diagonal(a)
        absd = np.abs(diag)
        with np.errstate(divide="ignore", invalid="ignore"):
            unit = np.where(absd == 0, 0, diag / np.where(absd == 0, 1, absd)).astype(a.dtype)
            logabs = np.add.accumulate(np.log(absd), axis=-1)[..., -1]
        sign = sign * np.multiply.accumulate(unit, axis=-1)[..., -1]
        return np.stack([sign.astype(a.dtype), logabs.astype(a.dtype)], -1)
    sign, logabs = xp.linalg.slogdet(a)
    return xp.stack([sign.astype(a.dtype), logabs.astype(a.dtype)], -1)


def _slogdet_vjp(g, out, a):
    """PyTorch's slogdet_backward: gA = A^-H (g_logabsdet + i Im(g_sign conj(sign))) (a real A's sign takes no
    gradient). A plain backward solves with LAPACK as PyTorch does (a real row-major A through the LU of A^T),
    so a singular A gets its inf/nan pattern; a recording one solves in Tensor ops."""
    n = a.shape[-1]
    sign, g_sign = narrow(out, -1, 0, 1).squeeze(-1), narrow(g, -1, 0, 1).squeeze(-1)
    geff = narrow(g, -1, 1, 1).squeeze(-1).real
    if a.is_complex():
        geff = geff + 1j * (g_sign * sign.conj()).imag
    d = geff.unsqueeze(-1).unsqueeze(-1) * eye(n, dtype=a.dtype, device=a.device)
    if n == 0:
        return (d,)
    if not is_grad_enabled():
        transposed = not a.is_complex() and a.device.type != "meta" and bool(a._data.flags.c_contiguous)
        return (apply(_lapack_adjoint_solve, a.detach(), d.detach(), transposed=transposed),)
    return (lu_solve_left(a.mH, d),)


def _lapack_adjoint_solve_fwd(xp, a, d, *, transposed):
    """A^-H d by getrf/getrs with no singularity check (LAPACK's inf/nan, as PyTorch's lu_solve); a real A
    whose rows are contiguous through the LU of A^T, as PyTorch factors it."""
    if not has_data(xp):
        return xp.empty(d.shape, d.dtype)
    ha, hd = np.broadcast_arrays(_backend.asnumpy(xp, a), _backend.asnumpy(xp, d))
    n = ha.shape[-1]
    fa, fd = ha.reshape((-1, n, n)), hd.reshape((-1, n, hd.shape[-1]))
    out = np.empty(fd.shape, fd.dtype)
    with np.errstate(all="ignore"):
        for i in range(fa.shape[0]):
            mat = np.array(fa[i].T if transposed else fa[i], order="F")
            lu, piv, _ = _lapack("getrf", mat)(mat)
            out[i], _ = _lapack("getrs", lu)(lu, piv, fd[i], trans=0 if transposed else 2)
    return _backend.host(xp, out.reshape(hd.shape))


# the first-order solve of slogdet's backward (no gradient: a recording backward solves in Tensor ops)
_lapack_adjoint_solve = Op("linalg_lu_solve_adjoint", _lapack_adjoint_solve_fwd, None, saves=NONE)
slogdet_op = Op("linalg_slogdet", _slogdet_fwd, _slogdet_vjp, saves=ALL, save_output=True, complex=True,
                aliases=("slogdet",))


# ---------------------------------------------------------------- symmetric eigendecomposition
def _eigh_fwd(xp, a, *, upper):
    """Eigenvectors V (n x n) with the eigenvalues appended as row n: one (n+1) x n array."""
    *batch, n, _ = a.shape
    if not has_data(xp) or a.size == 0:
        return xp.zeros((*batch, n + 1, n), a.dtype) if has_data(xp) else xp.empty((*batch, n + 1, n), a.dtype)
    w, v = xp.linalg.eigh(a, UPLO="U" if upper else "L")
    return xp.concatenate([v, w[..., None, :]], axis=-2).astype(a.dtype, copy=False)


def _eigh_vjp(g, out, a, *, upper):
    """PyTorch's linalg_eig_backward for Hermitian input: gA = V (diag(gL) + skew(V^H gV) / E) V^H with
    skew(X) = (X - X^H) / 2 and E_ij = L_j - L_i off the diagonal. Repeated eigenvalues divide by zero,
    giving inf/nan as in PyTorch (whose docs call the gradient then ill-defined); a gradient through
    the eigenvalues alone (eigvalsh) is V diag(gL) V^H, finite whatever the spectrum. A complex loss
    that depends on the eigenvectors' phases raises PyTorch's error."""
    n = a.shape[-1]
    V, L = narrow(out, -2, 0, n), narrow(out, -2, n, 1).real   # the eigenvalues are real (a complex
    gV, gL = narrow(g, -2, 0, n), narrow(g, -2, n, 1).real     # A packs them as complex): so are their parts
    eye_n = eye(n, dtype=a.dtype, device=a.device)
    inner = gL * eye_n
    if _nonzero(gV):
        VhgV = V.mH @ gV
        _check_gauge(VhgV, "linalg_eigh_backward: The eigenvectors in the complex case are specified up to "
                           "multiplication by e^{i phi}. The specified loss function depends on this quantity, "
                           "so it is ill-defined.")
        E = L - L.mT + eye_n          # E_ij = L_j - L_i, ones on the diagonal
        inner = inner + 0.5 * (VhgV - VhgV.mH) / E * (1 - eye_n)
    # the factorisation reads one triangle: PyTorch returns the gradient as is (not projected)
    return (V @ inner @ V.mH,)


def _check_gauge(X, message: str, Y=None) -> None:
    """PyTorch's check that a complex loss does not depend on the phases of eigen- or singular vectors:
    Im diag(X) must be close to Im diag(-Y) (to 0 without Y), with its lax tolerances (1e-2)."""
    if X._data.dtype.kind != "c" or X.device.type == "meta":
        return
    im = np.imag(X.detach().cpu().numpy().diagonal(0, -2, -1))
    other = -np.imag(Y.detach().cpu().numpy().diagonal(0, -2, -1)) if Y is not None else np.zeros_like(im)
    if not np.allclose(im, other, rtol=1e-2, atol=1e-2):
        raise RuntimeError(message)


def _nonzero(t) -> bool:
    """Whether a gradient part carries anything (a packed output's unused parts get zeros)."""
    return t.device.type == "meta" or bool((t != 0).any())


eigh_op = Op("linalg_eigh", _eigh_fwd, _eigh_vjp, saves=NONE, save_output=True, complex=True)


def _eig_fwd(xp, a):
    """Complex eigenvectors V (n x n) with the eigenvalues appended as row n (LAPACK geev, as PyTorch)."""
    *batch, n, _ = a.shape
    ctype = np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128
    if not has_data(xp) or a.size == 0:
        return (xp.zeros if has_data(xp) else xp.empty)((*batch, n + 1, n), ctype)
    w, v = xp.linalg.eig(a)
    return xp.concatenate([v.astype(ctype), w.astype(ctype)[..., None, :]], axis=-2)


def _eig_vjp(g, out, a):
    """PyTorch's linalg_eig_backward: with E_ij = conj(L_j - L_i) off the diagonal and V's columns of
    norm 1, gA = V^-H (diag(gL) + (V^H gV - V^H V Re diag(V^H gV)) / E) V^H; through the eigenvalues
    alone (eigvals) V^-H diag(gL) V^H. A loss that depends on the eigenvectors' phases raises PyTorch's
    error; a real A gets the real part. Repeated eigenvalues divide by zero (inf/nan), as in PyTorch."""
    n = a.shape[-1]
    V, L = narrow(out, -2, 0, n), narrow(out, -2, n, 1)
    gV, gL = narrow(g, -2, 0, n), narrow(g, -2, n, 1)
    eye_n = eye(n, dtype=out.dtype, device=out.device)
    inner = gL * eye_n
    if _nonzero(gV):
        VhgV = V.mH @ gV
        _check_gauge(VhgV, "linalg_eig_backward: The eigenvectors in the complex case are specified up to "
                           "multiplication by e^{i phi}. The specified loss function depends on this quantity, "
                           "so it is ill-defined.")
        VhgV = VhgV - V.mH @ (V * _diagonal(VhgV, 0, -2, -1).real.unsqueeze(-2))
        E = (L - L.mT).conj() + eye_n        # E_ij = conj(L_j - L_i), ones on the diagonal
        inner = inner + VhgV / E * (1 - eye_n)
    gA = lu_solve_left(V.mH, inner @ V.mH)
    return (gA if a.is_complex() else gA.real,)


# the general eigendecomposition (LAPACK geev): complex eigenpairs, also of a real A
eig_op = Op("linalg_eig", _eig_fwd, _eig_vjp, saves=NONE, save_output=True, complex=True)


# ---------------------------------------------------------------- SVD
def svd_sizes(m: int, n: int, full: bool) -> tuple:
    k = min(m, n)
    return (m, m if full else k), (k,), (n if full else k, n)


def _svd_fwd(xp, a, *, full):
    """U, S and Vh flattened and concatenated along the last axis."""
    *batch, m, n = a.shape
    su, ss, sv = svd_sizes(m, n, full)
    total = math.prod(su) + ss[0] + math.prod(sv)
    if not has_data(xp) or a.size == 0:
        if not has_data(xp):
            return xp.empty((*batch, total), a.dtype)
        u, vh = xp.zeros((*batch, *su), a.dtype), xp.zeros((*batch, *sv), a.dtype)
        if full:
            u, vh = u + xp.eye(su[0], dtype=a.dtype), vh + xp.eye(sv[0], dtype=a.dtype)
        s = xp.zeros((*batch, *ss), a.dtype)
    else:
        u, s, vh = xp.linalg.svd(a, full_matrices=full)
    flat = [u.reshape((*batch, -1)), s, vh.reshape((*batch, -1))]
    return xp.concatenate(flat, axis=-1).astype(a.dtype, copy=False)


def svd_unpack(packed, m: int, n: int, full: bool) -> tuple:
    su, ss, sv = svd_sizes(m, n, full)
    batch = tuple(packed.shape[:-1])
    nu, ns = math.prod(su), ss[0]
    U = narrow(packed, -1, 0, nu).reshape(batch + su)
    S = narrow(packed, -1, nu, ns)
    Vh = narrow(packed, -1, nu + ns, math.prod(sv)).reshape(batch + sv)
    return U, S, Vh


def _svd_vjp(g, out, a, *, full):
    """PyTorch's svd_backward (full_matrices narrowed to the first k columns of U and rows of Vh,
    as its derivatives.yaml does). Repeated singular values divide by zero (inf/nan) when U or Vh
    carry a gradient, as in PyTorch; through S alone the gradient is U diag(gS) Vh. Complex: conjugate
    transposes, the phase term i Im diag(U^H gU) / S on the diagonal, and PyTorch's error for a loss
    that depends on the singular vectors' phases."""
    m, n = a.shape[-2:]
    k = min(m, n)
    U, S, Vh = svd_unpack(out, m, n, full)
    gU, gS, gVh = svd_unpack(g, m, n, full)
    S, gS = S.real, gS.real     # real singular values (a complex A packs them as complex): so are their parts
    if full:
        U, Vh, gU, gVh = U[..., :, :k], Vh[..., :k, :], gU[..., :, :k], gVh[..., :k, :]
    V, gV = Vh.mH, gVh.mH
    eye_k = eye(k, dtype=a.dtype, device=a.device)
    has_u, has_v = _nonzero(gU), _nonzero(gV)
    gA = gS.unsqueeze(-1) * eye_k
    if not (has_u or has_v):
        return (U @ gA @ Vh,)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye_k
    UhgU = U.mH @ gU
    VhgV = V.mH @ gV
    skew_u, skew_v = UhgU - UhgU.mH, VhgV - VhgV.mH
    _check_gauge(skew_u, "svd_backward: The singular vectors in the complex case are specified up to "
                         "multiplication by e^{i phi}. The specified loss function depends on this phase term, "
                         "making it ill-defined.", skew_v)
    gA = gA + (skew_u * S.unsqueeze(-2) + S.unsqueeze(-1) * skew_v) / E * (1 - eye_k)
    if a.is_complex() and has_u:
        gA = gA + (_diagonal(UhgU, 0, -2, -1).imag / S).unsqueeze(-1) * eye_k * 1j
    if m > n and has_u:
        gA = U @ gA
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - U @ (U.mH @ gUSinv)
        return (gA @ V.mH,)
    if m < n and has_v:
        gA = gA @ V.mH
        gVSinv = gV / S.unsqueeze(-2)
        gA = gA + gVSinv.mH - (gVSinv.mH @ V) @ V.mH
        return (U @ gA,)
    return (U @ gA @ V.mH,)


svd_op = Op("linalg_svd", _svd_fwd, _svd_vjp, saves=NONE, save_output=True, complex=True)


# ---------------------------------------------------------------- Cholesky with info, LDL^T
def _potrf_fwd(xp, a, *, upper):
    *batch, n, _ = a.shape
    if not has_data(xp):
        return xp.empty(a.shape, a.dtype), xp.empty(tuple(batch), np.int32)

    def one(mat):
        if mat.size == 0:
            return mat, 0
        c, info = _lapack("potrf", mat)(mat, lower=not upper, clean=True)
        return c, max(info, 0)
    return _per_matrix(xp, a, one, ((n, n), a.dtype), ((), np.int32))


# the factor and LAPACK's info, for cholesky_ex on input that may not be positive-definite
potrf_op = Op("linalg_cholesky_ex", _potrf_fwd, None, n_extra=1, saves=NONE)


def _sytrf_fwd(xp, a, *, hermitian):
    *batch, n, _ = a.shape
    if not has_data(xp):
        return xp.empty(a.shape, a.dtype), xp.empty((*batch, n), np.int32), xp.empty(tuple(batch), np.int32)

    def one(mat):
        if mat.size == 0:
            return mat, np.zeros(n, np.int32), 0
        ld, piv, info = _lapack("hetrf" if hermitian and mat.dtype.kind == "c" else "sytrf", mat)(mat, lower=1)
        return np.tril(ld), piv, max(info, 0)
    return _per_matrix(xp, a, one, ((n, n), a.dtype), ((n,), np.int32), ((), np.int32))


# Bunch–Kaufman LDL^T (LAPACK sytrf, lower): PyTorch gives it no gradient either
ldl_factor_op = Op("linalg_ldl_factor_ex", _sytrf_fwd, None, n_extra=2, saves=NONE)


def _sytrs_fwd(xp, ld, pivots, b, *, hermitian):
    if not has_data(xp):
        return xp.empty(b.shape, b.dtype)
    hl, hp, hb = (_backend.asnumpy(xp, x) for x in (ld, pivots, b))
    *batch, n, k = hb.shape
    fl, fp, fb = hl.reshape((-1, n, n)), hp.reshape((-1, n)), hb.reshape((-1, n, k))
    out = np.empty_like(fb)
    for i in range(fb.shape[0]):
        x, _ = _lapack("hetrs" if hermitian and hb.dtype.kind == "c" else "sytrs", fl[i])(fl[i], fp[i], fb[i], lower=1)
        out[i] = x
    return _backend.host(xp, out.reshape(hb.shape))


ldl_solve_op = Op("linalg_ldl_solve", _sytrs_fwd, None, saves=NONE)


def _geqrf_fwd(xp, a):
    *batch, m, n = a.shape
    k = min(m, n)
    if not has_data(xp):
        return xp.empty(a.shape, a.dtype), xp.empty((*batch, k), a.dtype)

    def one(mat):
        if mat.size == 0:
            return mat, np.zeros(k, mat.dtype)
        qr, tau, _, _ = _lapack("geqrf", mat)(mat)
        return qr, tau
    return _per_matrix(xp, a, one, ((m, n), a.dtype), ((k,), a.dtype))


# LAPACK's compact QR (Householder vectors below the diagonal, R on and above, and tau): PyTorch
# gives it no gradient either
geqrf_op = Op("geqrf", _geqrf_fwd, None, n_extra=1, saves=NONE)
