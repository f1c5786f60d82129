"""``torch.special``: the special functions under their SciPy-style names, over tapelab's ops (the
gamma family, Bessel i0/i1, error functions, logit/expit, entropy and the normal CDF)."""
from __future__ import annotations

import math

from .core.dispatch import apply
from .nn import functional as _F
from .ops import elementwise as _e, reduce as _r, special as _s
from .ops.compare import isnan, where

__all__ = ["expit", "logit", "exp2", "expm1", "log1p", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi",
           "polygamma", "multigammaln", "i0", "i1", "sinc", "round", "xlogy", "xlog1py", "entr", "ndtr", "ndtri",
           "gammainc", "gammaincc", "logsumexp", "softmax", "log_softmax"]

expit, exp2, expm1, log1p = _e.sigmoid, _e.exp2, _e.expm1, _e.log1p
erf, erfc, erfinv, xlogy, round = _e.erf, _e.erfc, _e.erfinv, _e.xlogy, _e.round
logit, digamma, polygamma, i0, sinc = _s.logit, _s.digamma, _s.polygamma, _s.i0, _s.sinc
gammaln, psi, multigammaln = _s.lgamma, _s.digamma, _s.mvlgamma
gammainc, gammaincc = _s.igamma, _s.igammac
logsumexp = _r.logsumexp
_SQRT2 = math.sqrt(2.0)


def i1(input):
    """The modified Bessel function of the first kind, order 1."""
    return apply(_s._i1, input)


def xlog1py(input, other):
    """``input * log1p(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    out = input * _e.log1p(other)
    zero = (input == 0) & ~isnan(other)
    return where(zero, 0.0, out)


def entr(input):
    """``-x log x`` elementwise: 0 at 0 and -inf for negative x."""
    safe = where(input > 0, input, 1.0)
    body = -input * _e.log(safe)
    return where(input > 0, body, where(input == 0, 0.0, -math.inf))


def ndtr(input):
    """The standard normal CDF."""
    return 0.5 * _e.erfc(-input / _SQRT2)


def ndtri(input):
    """The inverse of the standard normal CDF."""
    return _SQRT2 * _e.erfinv(2 * input - 1)


def softmax(input, dim: int, *, dtype=None):
    return _F.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim: int, *, dtype=None):
    return _F.log_softmax(input, dim, dtype=dtype)
