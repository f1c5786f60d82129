"""``linalg_matrix_exp``, one declared op computed as PyTorch's CPU kernel computes it, so programs'
numbers agree with torch's (bitwise where the matrix products agree).

The algorithm is Bader, Blanes and Casas (2019), "Computing the matrix exponential with an
optimized Taylor polynomial approximation": a Taylor polynomial of degree 1, 2, 4, 8, 12 or 18,
chosen by the 1-norm against per-precision bounds theta_m and evaluated with few products (the
paper's formulas for degrees 8, 12 and 18); above the last bound, scaling by 2^-s and s squarings.
PyTorch's choices kept here: a batch of more than one matrix always takes degree 18 with scaling,
the polynomial's linear combinations accumulate term by term from the first, and each product of
fewer than 400 multiply-adds sums its terms in index order as ATen's small-product loop does
(larger products are the BLAS's). The gradient is PyTorch's: the upper-right block of the
exponential of [[A^H, G], [0, A^H]], through this op again, so it differentiates to any order.
"""
from __future__ import annotations

import numpy as np

from ..base import backend as _backend
from ..base.meta import has_data
from ..core.creation import zeros_like
from ..core.dispatch import apply
from ..core.registry import ALL, Op
from ..kernels.gemm import gemm
from .movement import cat

__all__: list = []

# theta_m (the paper's Table): the largest 1-norm for which degree m is accurate to the unit roundoff
_THETAS = {np.dtype(np.float32): (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02,
                                  5.800524627688768e-01, 1.461661507209034e+00, 3.010066362817634e+00),
           np.dtype(np.float64): (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
                                  4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e+00)}
_DEGREES = (1, 2, 4, 8, 12)      # each for norms up to its theta; 18 (with scaling) above the fifth
_SMALL_PRODUCT = 400             # ATen's bmm sums in index order below this many multiply-adds
_SQRT_177 = 0.1330413469565007072504e+2

# degree 12: rows are B_1..B_4 over (I, A, A^2, A^3); A_6 = B_3 + B_4^2, T_12 = B_1 + (B_2 + A_6) A_6
_B12 = ((9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
        (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
        (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
        (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359))
# degree 18: rows are B_1..B_5 over (I, A, A^2, A^3, A^6); A_9 = B_1 B_5 + B_4, T_18 = B_2 + (B_3 + A_9) A_9
_B18 = ((0., -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.),
        (0., 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
         -6.37898194594723280150e-04),
        (-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
         -6.98210122488052056106e-03, 3.34975017086070470649e-05),
        (-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
         2.95552570429315521194e-02, -1.39180257516060693404e-05),
        (0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05))


def _product(xp, a, b):
    """a @ b over a batch; below ``_SMALL_PRODUCT`` multiply-adds the terms are summed in index order
    (a complex product in real arithmetic, (ac - bd) + i(ad + bc), with no fused multiply-add)."""
    n = a.shape[-1]
    if n * n * n >= _SMALL_PRODUCT:
        return gemm(xp, a, b)
    left, right = a[..., :, :, None], b[..., None, :, :]     # terms (i, k, j), summed over k in order
    if a.dtype.kind != "c":
        return (left * right).sum(-2)
    (lr, li), (rr, ri) = (xp.real(left), xp.imag(left)), (xp.real(right), xp.imag(right))
    return (lr * rr - li * ri).sum(-2) + 1j * (lr * ri + li * rr).sum(-2)


def _combine(xp, terms, rows, real) -> list:
    """For each row of coefficients, sum_j c_j terms_j accumulated in order of j, each coefficient rounded
    to the working precision first (the terms stacked once, each row one product and one sum)."""
    stacked = xp.stack(terms)
    coefficients = xp.asarray(np.array(rows, dtype=real).reshape(len(rows), len(terms), *(1,) * terms[0].ndim))
    return [(c * stacked).sum(0) for c in coefficients]


def _powers(xp, a, count: int) -> list:
    """The first ``count`` of I, A, A^2, A^3, A^6."""
    out = [xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape), a]
    if count > 2:
        out.append(_product(xp, a, a))
    if count > 3:
        out.append(_product(xp, a, out[2]))
    if count > 4:
        out.append(_product(xp, out[3], out[3]))
    return out


def _taylor(xp, a, degree: int, real):
    """The degree-``degree`` Taylor polynomial of exp at ``a`` by the paper's evaluation scheme."""
    if degree == 1:
        eye, a = _powers(xp, a, 2)
        return eye + a
    if degree == 2:
        eye, a, a2 = _powers(xp, a, 3)
        return eye + a + a2 / real.type(2)
    if degree == 4:
        p = _powers(xp, a, 3)
        p.append(_product(xp, p[2], *_combine(xp, p, [(1 / 2, 1 / 6, 1 / 24)], real)))
        return _combine(xp, p, [(1., 1., 0., 1.)], real)[0]
    if degree == 8:
        return _taylor8(xp, a, real)
    if degree == 12:
        b = _combine(xp, _powers(xp, a, 4), _B12, real)
        a6 = b[2] + _product(xp, b[3], b[3])
        return b[0] + _product(xp, b[1] + a6, a6)
    b = _combine(xp, _powers(xp, a, 5), _B18, real)
    a9 = b[3] + _product(xp, b[0], b[4])
    return b[1] + _product(xp, b[2] + a9, a9)


def _taylor8(xp, a, real):
    """Degree 8 with three products: A_4 = A^2 (x1 A + x2 A^2), A_8 = (x3 A^2 + A_4)(x4 I + x5 A + x6 A^2
    + x7 A_4), T_8 = I + A + y2 A^2 + A_8; the x's from sqrt(177) and 2/3 rounded to the working precision
    (then combined in double and rounded again, as PyTorch's constants are)."""
    r, x3 = float(real.type(_SQRT_177)), float(real.type(2 / 3))
    x1, x2 = x3 * ((1 + r) / 88), x3 * ((1 + r) / 352)
    x4, x5 = (-271 + 29 * r) / (315 * x3), (-11 + 11 * r) / (1260 * x3)
    x6, x7 = (-99 + 11 * r) / (5040 * x3), (89 - r) / (5040 * x3)
    y2 = (857 - 58 * r) / 630
    p = _powers(xp, a, 3)
    p.append(_product(xp, p[2], *_combine(xp, p[1:3], [(x1, x2)], real)))
    p.append(_product(xp, *_combine(xp, p[2:4], [(x3, 1.)], real), *_combine(xp, p[:4], [(x4, x5, x6, x7)], real)))
    return _combine(xp, p, [(1., 1., y2, 0., 1.)], real)[0]


def _scaled(xp, a, norm, theta, real):
    """Degree 18 at A / 2^s, s = max(ceil(log2(|A|_1 / theta)), 0) per matrix, then s squarings
    (a NaN or infinite s squares nothing, as ATen's clamp of its integer cast)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.maximum(np.ceil(np.log2(norm / theta)), real.type(0))
    scale = np.power(real.type(2), -s)
    out = _taylor(xp, a * xp.asarray(scale)[:, None, None], 18, real)
    times = np.where(np.isfinite(s), s, 0).astype(np.int64)
    for step in range(int(times.max(initial=0))):
        if times.min() > step:
            out = _product(xp, out, out)
        else:
            rows = xp.asarray(np.flatnonzero(times > step))
            out[rows] = _product(xp, out[rows], out[rows])
    return out


def _matrix_exp_fwd(xp, a):
    """exp(A) per matrix; a lone matrix takes the lowest degree its 1-norm allows (a NaN norm gives NaN),
    a batch degree 18 with scaling; 1 x 1 is exp. float16 and bfloat16 run in float32, rounded once
    (PyTorch's own half-precision kernel overflows)."""
    if not has_data(xp):
        return xp.empty(a.shape, a.dtype)
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return a.copy()
    if n == 1:
        return xp.exp(a)
    if a.dtype.itemsize < 4:
        return _matrix_exp_fwd(xp, a.astype(np.float32)).astype(a.dtype)
    real = np.finfo(a.dtype).dtype
    thetas = [real.type(t) for t in _THETAS[real]]
    flat = a.reshape(-1, n, n)
    norm = _backend.asnumpy(xp, xp.abs(flat).sum(-2).max(-1))
    if flat.shape[0] > 1 or not norm[0] < thetas[4]:
        if flat.shape[0] == 1 and np.isnan(norm[0]):
            return xp.full(a.shape, np.nan, a.dtype)
        return _scaled(xp, flat, norm, thetas[5], real).reshape(a.shape)
    degree = next(d for d, theta in zip(_DEGREES, thetas) if norm[0] <= theta)
    return _taylor(xp, flat, degree, real).reshape(a.shape)


def _matrix_exp_vjp(g, out, a):
    """PyTorch's linalg_matrix_exp_differential: the upper-right n x n block of exp([[A^H, G], [0, A^H]])."""
    n = a.shape[-1]
    ah = a.mH
    block = cat([cat([ah, g], -1), cat([zeros_like(g), ah], -1)], -2)
    return (apply(matrix_exp_op, block)[..., :n, n:],)


matrix_exp_op = Op("linalg_matrix_exp", _matrix_exp_fwd, _matrix_exp_vjp, saves=ALL, complex=True,
                   aliases=("matrix_exp",))
