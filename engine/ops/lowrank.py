"""``torch.svd_lowrank``, ``torch.pca_lowrank`` and ``torch.lobpcg``, composed of tapelab's ops (randn,
matmul, qr, svd, eigh, cholesky, triangular solves), so each result is on the tape and differentiates
through the ops it is made of.

``svd_lowrank`` is the randomized SVD of Halko, Martinsson and Tropp (2009): a range finder with ``niter``
subspace iterations (their Algorithm 4.4), then the SVD of the small projected matrix (Algorithm 5.1).
``pca_lowrank`` centres the columns first. ``lobpcg`` is Knyazev's locally optimal block preconditioned
conjugate gradient (2001) for the extreme eigenpairs of a symmetric (Hermitian) positive-definite pencil
``(A, B)``: Rayleigh–Ritz on the span of the iterates, the residuals and the previous directions.
"""
from __future__ import annotations

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base.grad_mode import is_grad_enabled, no_grad
from ..core.creation import eye, randn, zeros
from ._util import Tensor
from .linalg import matmul, qr
from .linalg_api import cholesky, eigh, solve, solve_triangular, svd
from .movement import cat

__all__ = ["svd_lowrank", "pca_lowrank", "lobpcg"]

# torch.lobpcg's default tolerance is the square root of the dtype's machine epsilon
_SQRT_EPS = {"float32": 1.1920928955078125e-07 ** 0.5, "float64": 2.220446049250313e-16 ** 0.5}
_RANDOM_DTYPE = {"complex64": "float32", "complex128": "float64"}


def _random_like(A: Tensor, rows: int, cols: int) -> Tensor:
    """A real Gaussian test matrix in ``A``'s dtype, batched as ``A``."""
    if A.is_complex():
        return randn(*A.shape[:-2], rows, cols, dtype=A.real.dtype, device=A.device).to(A.dtype)
    return randn(*A.shape[:-2], rows, cols, dtype=A.dtype, device=A.device)


def _range_basis(A: Tensor, q: int, niter: int) -> Tensor:
    """Orthonormal columns spanning about the top ``q`` left singular vectors of ``A`` (Algorithm 4.4)."""
    Q = qr(matmul(A, _random_like(A, A.shape[-1], q))).Q
    for _ in range(niter):
        Q = qr(matmul(A.mH, Q)).Q
        Q = qr(matmul(A, Q)).Q
    return Q


def _check_matrix(A, name: str) -> None:
    if not isinstance(A, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(A).__name__}")
    if A.ndim < 2:
        raise ValueError(f"{name}(): expected a matrix or a batch of matrices, got shape {list(A.shape)}")
    if not (A.is_floating_point() or A.is_complex()):
        raise RuntimeError(f"{name}(): expected a floating point or complex tensor, got {A.dtype}")


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None):
    """A rank-``q`` approximation ``A - M ~ U diag(S) V^H`` by the randomized SVD (Halko et al. 2009).

    Args:
        A: a matrix, or a batch of them, of shape ``(*, m, n)``.
        q: a slight overestimate of the rank (default 6).
        niter: subspace iterations (default 2): more sharpen the result for a slowly decaying spectrum.
        M: subtracted from ``A`` first (broadcast to its shape), e.g. its column means.

    Returns:
        ``(U, S, V)`` of shapes ``(*, m, q)``, ``(*, q)`` and ``(*, n, q)``, differentiable in ``A``.
        The test matrix is random, so results vary with the random state, as PyTorch's do.

    >>> A = tapelab.randn(50, 4) @ tapelab.randn(4, 30)
    >>> U, S, V = tapelab.svd_lowrank(A, q=4)
    >>> bool(((U * S) @ V.mT - A).abs().max() < 1e-4)
    True
    """
    if _DISPATCH.functions is not None and has_tensor_like((A, M)):
        return handle_torch_function(svd_lowrank, (A, M), A, q=q, niter=niter, M=M)
    _check_matrix(A, "svd_lowrank")
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    if M is not None:
        A = A - M
    if A.shape[-2] < A.shape[-1]:       # work on the tall side: the small factor is then q x q
        V, S, U = _svd_tall(A.mH, q, niter)
        return U, S, V
    return _svd_tall(A, q, niter)


def _svd_tall(A: Tensor, q: int, niter: int):
    Q = _range_basis(A, q, niter)
    U, S, Vh = svd(matmul(Q.mH, A), full_matrices=False)
    return matmul(Q, U), S, Vh.mH


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2):
    """Principal components of the rows of ``A``: ``svd_lowrank`` of ``A`` less its column means.

    Returns ``(U, S, V)``: ``V``'s columns are the principal directions, ``S**2 / (m - 1)`` the variances
    along them. ``q`` defaults to ``min(6, m, n)``.
    """
    if _DISPATCH.functions is not None and has_tensor_like((A,)):
        return handle_torch_function(pca_lowrank, (A,), A, q=q, center=center, niter=niter)
    _check_matrix(A, "pca_lowrank")
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    if not (isinstance(q, int) and 0 <= q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not (isinstance(niter, int) and niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if center:
        A = A - A.mean(dim=-2, keepdim=True)
    return svd_lowrank(A, q, niter)


def lobpcg(A: Tensor, k: int | None = None, B: Tensor | None = None, X: Tensor | None = None, n: int | None = None,
           iK: Tensor | None = None, niter: int | None = None, tol: float | None = None, largest: bool | None = None,
           method: str | None = None, tracker=None, ortho_iparams=None, ortho_fparams=None, ortho_bparams=None):
    """The ``k`` largest (or smallest) eigenpairs of ``A x = lambda B x`` by LOBPCG (Knyazev 2001).

    ``A`` is symmetric (Hermitian) and ``B`` (default the identity) positive definite, both ``(*, m, m)``.
    ``X`` (``(*, m, n)``, n >= k) is the starting block (default ``n`` random columns, ``n`` default ``k``),
    ``iK`` a preconditioner applied to the residuals, ``niter`` the most iterations (default 1000; -1: until
    converged), ``tol`` the relative residual at which a pair has converged (default sqrt(eps) of the dtype).
    Each step is a Rayleigh–Ritz on an orthonormal basis of the iterates, the residuals and the previous
    directions (``method``, ``tracker`` and the ``ortho_*`` settings of PyTorch's variants are accepted and
    this one algorithm runs). The iterations run without recording; when ``A`` or ``B`` requires grad the
    converged pairs are recorded once more in a form whose gradient is the exact eigenpairs' (eigenvalues
    and eigenvectors, see ``_differentiable``), so they differentiate in ``A`` and ``B`` as PyTorch's do.

    Returns ``(E, X)``: ``k`` eigenvalues (largest first when ``largest``, else smallest first) and their
    ``B``-orthonormal eigenvectors as columns.
    """
    if _DISPATCH.functions is not None and has_tensor_like((A, B, X, iK, tracker, ortho_iparams, ortho_fparams, ortho_bparams)):
        return handle_torch_function(lobpcg, (A, B, X, iK, tracker, ortho_iparams, ortho_fparams, ortho_bparams), A,
                                     k=k, B=B, X=X, n=n, iK=iK, niter=niter, tol=tol, largest=largest, method=method,
                                     tracker=tracker, ortho_iparams=ortho_iparams, ortho_fparams=ortho_fparams,
                                     ortho_bparams=ortho_bparams)
    _check_matrix(A, "lobpcg")
    m = A.shape[-1]
    if A.shape[-2] != m:
        raise AssertionError(f"A must be square, got shape {A.shape}")
    if B is not None and tuple(B.shape) != tuple(A.shape):
        raise AssertionError(f"A and B must have the same shapes, got {A.shape} and {B.shape}")
    k = (1 if X is None else X.shape[-1]) if k is None else k
    n = (k if n is None else n) if X is None else X.shape[-1]
    if m < 3 * n:
        raise ValueError(f"LPBPCG algorithm is not applicable when the number of A rows (={m}) is smaller than "
                         f"3 x the number of requested eigenpairs (={n})")
    largest = True if largest is None else largest
    niter = 1000 if niter is None else niter
    real = A.real.dtype if A.is_complex() else A.dtype
    tol = _SQRT_EPS.get(str(real).rsplit(".", 1)[-1], _SQRT_EPS["float64"]) if tol is None else tol
    with no_grad():
        Ad, Bd = A.detach(), None if B is None else B.detach()
        E, V = _rayleigh_ritz(Ad, Bd, _iterate(Ad, Bd, X, n, iK, niter, tol, largest), n, largest)
        E, V = E[..., :k], V[..., :k]
    if is_grad_enabled() and (A.requires_grad or (B is not None and B.requires_grad)):
        return _differentiable(A, B, E, V)
    return E, V


def _differentiable(A, B, E, V):
    """The converged pairs again, recorded so that they differentiate as exact eigenpairs do.

    ``E + x^H (A - E B) x`` is E to the residual and has the gradient x^H (dA - lambda dB) x. Each
    eigenvector less ``y`` from the bordered system [[A - lambda B, B x], [x^H B, 0]] [y; mu] = [(A - lambda B) x; 0]
    (a Newton step: y is at the residual's size), its matrix held constant, and less ``(x^H B x - 1) x / 2``
    has the first-order perturbation -(A - lambda B)^+ (dA - lambda dB) x - (x^H dB x) x / 2 of a
    B-normalised eigenvector: the whole eigenvector gradient, as PyTorch's lobpcg backward gives it."""
    # A and B are read as Hermitian (their Hermitian parts), so their gradients are Hermitian, as eigh's
    A, B = _hermitian(A), None if B is None else _hermitian(B)
    R = matmul(A, V) - _mul_B(B, V) * E[..., None, :]
    E_out = E + (V.conj() * R).sum(-2).real
    Ad, Bd = A.detach(), None if B is None else B.detach()
    m = A.shape[-1]
    columns = []
    for i in range(V.shape[-1]):
        x, lam = V[..., i:i + 1], E[..., i, None, None]
        bx = _mul_B(Bd, x)
        shifted = Ad - lam * (eye(m, dtype=A.dtype, device=A.device) if Bd is None else Bd)
        corner = zeros(*bx.shape[:-2], 1, 1, dtype=A.dtype, device=A.device)
        bordered = cat([cat([shifted, bx], dim=-1), cat([bx.mH, corner], dim=-1)], dim=-2)
        y = solve(bordered, cat([R[..., i:i + 1], corner], dim=-2))[..., :m, :]
        drift = (x.mH @ _mul_B(B, x)).real - 1.0
        columns.append(x - y - 0.5 * x * drift)
    return E_out, cat(columns, dim=-1)


def _mul_B(B, X):
    return X if B is None else matmul(B, X)


def _rayleigh_ritz(A, B, S, n: int, largest: bool):
    """The ``n`` extreme Ritz pairs of ``(A, B)`` on the span of ``S``'s columns: ``S`` is made orthonormal
    (QR) so that ``S^H B S`` is as well conditioned as ``B``, then the pencil is reduced by its Cholesky
    factor ``L`` to the symmetric ``L^-1 S^H A S L^-H``."""
    S = qr(S).Q
    L = cholesky(_hermitian(matmul(S.mH, _mul_B(B, S))))
    inner = solve_triangular(L, matmul(S.mH, matmul(A, S)), upper=False)
    C = solve_triangular(L, inner.mH, upper=False)
    theta, Y = eigh(_hermitian(C))
    if largest:
        theta, Y = theta.flip(-1), Y.flip(-1)
    Z = solve_triangular(L.mH, Y[..., :n], upper=True)
    return theta[..., :n], matmul(S, Z)


def _hermitian(G):
    return (G + G.mH) * 0.5


def _iterate(A, B, X, n: int, iK, niter: int, tol: float, largest: bool):
    """LOBPCG's iterations: returns the block whose Ritz pairs have converged (or the last one)."""
    X = _random_like(A, A.shape[-1], n) if X is None else X.detach()
    E, X = _rayleigh_ritz(A, B, X, n, largest)
    norm_a = A.abs().pow(2).sum((-2, -1)).sqrt()[..., None]
    norm_b = 1.0 if B is None else B.abs().pow(2).sum((-2, -1)).sqrt()[..., None]
    P = None
    step = 0
    while niter < 0 or step < niter:
        R = matmul(A, X) - _mul_B(B, X) * E[..., None, :]
        scale = X.abs().pow(2).sum(-2).sqrt() * (norm_a + E.abs() * norm_b)
        if bool(((R.abs().pow(2).sum(-2).sqrt() / scale) < tol).all()):
            break
        W = R if iK is None else matmul(iK, R)
        blocks = [X, W] if P is None else [X, W, P]
        E, new = _rayleigh_ritz(A, B, cat(blocks, dim=-1), n, largest)
        # the new directions: the part of the new iterates outside the old ones (B-orthogonally)
        P = new - matmul(X, matmul(X.mH, _mul_B(B, new)))
        X = new
        step += 1
    return X


# public names that are compositions of other ops (tests/test_op_declarations.py reads this)
COMPOSITES = {"svd_lowrank": "randn, matmul, linalg_qr and linalg_svd",
              "pca_lowrank": "mean, sub and svd_lowrank",
              "lobpcg": "matmul, linalg_qr, cholesky, triangular solves and linalg_eigh (Rayleigh-Ritz steps), "
                        "then a bordered solve for the gradient"}
