"""The orthogonal polynomial families of ``torch.special`` (Chebyshev T/U/V/W and their shifted
forms, Hermite H/He, Laguerre L, Legendre P) as declared ops, with a gradient in ``x``.

Each is its three-term recurrence ``P_(k+1) = (alpha_k x + beta_k) P_k - gamma_k P_(k-1)``, the one
PyTorch's kernels run, carried on truncated Taylor series in x: the same loop gives the value
and any derivative, so the gradient (and the gradient of the gradient) is exact, not a
difference. The degree ``n`` is an integer (truncated as PyTorch does), so it has no gradient.
"""
from __future__ import annotations

import math

import numpy as np

from ..base.meta import has_data
from ..core.dispatch import apply
from ..core.registry import Op, kernel_refusal
from ._util import Tensor, unbroadcast as ub

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
           "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]

# family: (P_1 = a1 x + b1, k -> (alpha_k, beta_k, gamma_k))
_FAMILIES = {
    "t": ((1.0, 0.0), lambda k: (2.0, 0.0, 1.0)),
    "u": ((2.0, 0.0), lambda k: (2.0, 0.0, 1.0)),
    "v": ((2.0, -1.0), lambda k: (2.0, 0.0, 1.0)),
    "w": ((2.0, 1.0), lambda k: (2.0, 0.0, 1.0)),
    "h": ((2.0, 0.0), lambda k: (2.0, 0.0, 2.0 * k)),
    "he": ((1.0, 0.0), lambda k: (1.0, 0.0, float(k))),
    "l": ((-1.0, 1.0), lambda k: (-1 / (k + 1), (2 * k + 1) / (k + 1), k / (k + 1))),
    "p": ((1.0, 0.0), lambda k: ((2 * k + 1) / (k + 1), 0.0, k / (k + 1))),
}


def _times_linear(c, x0, alpha: float, beta: float):
    """The Taylor coefficients (in t, x = x0 + t) of (alpha x + beta) times the series ``c``."""
    out = (alpha * x0 + beta) * c
    out[1:] += alpha * c[:-1]
    return out


def _poly_fwd(xp, x, n, *, family: str, shifted: bool, order: int):
    """The ``order``-th derivative in x of P_n(x) (of P_n(2x - 1) when ``shifted``)."""
    n = xp.asarray(n)
    shape = np.broadcast_shapes(x.shape, n.shape)
    if not has_data(xp):
        return xp.empty(shape, x.dtype)
    y = xp.broadcast_to(2 * x - 1 if shifted else x, shape).astype("float64")
    deg = xp.broadcast_to(xp.nan_to_num(xp.trunc(n.astype("float64")), nan=-1.0), shape)
    (a1, b1), rec = _FAMILIES[family]
    prev = xp.zeros((order + 1, *shape))
    prev[0] = 1.0
    cur = _times_linear(prev, y, a1, b1)
    out = xp.where(deg == 0, prev[order], 0.0)
    top = int(float(deg.max())) if deg.size else 0
    for k in range(1, top + 1):
        out = xp.where(deg == k, cur[order], out)
        if k == top:
            break
        alpha, beta, gamma = rec(k)
        prev, cur = cur, _times_linear(cur, y, alpha, beta) - gamma * prev
    scale = math.factorial(order) * (2.0 ** order if shifted else 1.0)
    return (out * scale).astype(x.dtype, copy=False)


def _poly_vjp(g, out, x, n, *, family, shifted, order):
    gx = ub(g * apply(_derivative, x, n, family=family, shifted=shifted, order=order + 1), x)
    return gx, None


_derivative = Op("orthogonal_polynomial_derivative", _poly_fwd, _poly_vjp, promote="float", elementwise=True)


def _family(name: str, family: str, shifted: bool, doc: str):
    op = Op(f"special_{name}", lambda xp, x, n: _poly_fwd(xp, x, n, family=family, shifted=shifted, order=0),
            lambda g, out, x, n: _poly_vjp(g, out, x, n, family=family, shifted=shifted, order=0),
            promote="float", elementwise=True, complex_error=kernel_refusal(name))

    def fn(input, n, *, out=None) -> Tensor:
        result = apply(op, input, n)
        return result if out is None else out.copy_(result)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc} of degree ``n`` at ``input`` (0 for negative n), differentiable in ``input``."
    return fn


chebyshev_polynomial_t = _family("chebyshev_polynomial_t", "t", False, "The Chebyshev polynomial T")
chebyshev_polynomial_u = _family("chebyshev_polynomial_u", "u", False, "The Chebyshev polynomial U")
chebyshev_polynomial_v = _family("chebyshev_polynomial_v", "v", False, "The Chebyshev polynomial V")
chebyshev_polynomial_w = _family("chebyshev_polynomial_w", "w", False, "The Chebyshev polynomial W")
shifted_chebyshev_polynomial_t = _family("shifted_chebyshev_polynomial_t", "t", True,
                                         "The shifted Chebyshev polynomial T*(x) = T(2x - 1)")
shifted_chebyshev_polynomial_u = _family("shifted_chebyshev_polynomial_u", "u", True,
                                         "The shifted Chebyshev polynomial U*(x) = U(2x - 1)")
shifted_chebyshev_polynomial_v = _family("shifted_chebyshev_polynomial_v", "v", True,
                                         "The shifted Chebyshev polynomial V*(x) = V(2x - 1)")
shifted_chebyshev_polynomial_w = _family("shifted_chebyshev_polynomial_w", "w", True,
                                         "The shifted Chebyshev polynomial W*(x) = W(2x - 1)")
hermite_polynomial_h = _family("hermite_polynomial_h", "h", False, "The physicists' Hermite polynomial H")
hermite_polynomial_he = _family("hermite_polynomial_he", "he", False, "The probabilists' Hermite polynomial He")
laguerre_polynomial_l = _family("laguerre_polynomial_l", "l", False, "The Laguerre polynomial L")
legendre_polynomial_p = _family("legendre_polynomial_p", "p", False, "The Legendre polynomial P")
