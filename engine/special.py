"""``torch.special``: every public function of PyTorch's module under its SciPy-style name, plus
``beta``, ``betaln`` and ``betainc``. Each is a declared op (engine/ops/special*.py) or a short
composite of declared ops, so all are on the tape, in FX, capture and the profiler."""
from __future__ import annotations

import math

from .core.dispatch import apply
from .nn import functional as _F
from .ops import elementwise as _e, reduce as _r, special as _s
from .ops.special_poly import *  # noqa: F401,F403
from .ops.special_poly import __all__ as _POLY
from .ops.special_scipy import *  # noqa: F401,F403
from .ops.special_scipy import __all__ as _SCIPY
from .ops.compare import isnan, where
from .ops.out import out_variants as _out_variants
from .base.dispatch_state import STATE as _DISPATCH
from .core.overrides import handle_torch_function as _handle, has_tensor_like as _has_tensor_like

__all__ = ["expit", "logit", "exp2", "expm1", "log1p", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi",
           "polygamma", "multigammaln", "i0", "i1", "sinc", "round", "xlogy", "xlog1py", "entr", "ndtr", "ndtri",
           "gammainc", "gammaincc", "logsumexp", "softmax", "log_softmax", "betaln", *_POLY, *_SCIPY]

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
    return where(input > 0, body, where(input == 0, 0.0, where(isnan(input), input, -math.inf)))


def ndtr(input):
    """The standard normal CDF."""
    return 0.5 * _e.erfc(-input / _SQRT2)


def betaln(input, other):
    """``log |B(a, b)|`` as lgamma(a) + lgamma(b) - lgamma(a + b) (not in PyTorch; SciPy's values)."""
    return _s.lgamma(input) + _s.lgamma(other) - _s.lgamma(input + other)


def softmax(input, dim: int, *, dtype=None):
    if _DISPATCH.functions is not None and _has_tensor_like((input,)):
        return _handle(softmax, (input,), input, dim, **({} if dtype is None else {"dtype": dtype}))
    return _F.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim: int, *, dtype=None):
    if _DISPATCH.functions is not None and _has_tensor_like((input,)):
        return _handle(log_softmax, (input,), input, dim, **({} if dtype is None else {"dtype": dtype}))
    return _F.log_softmax(input, dim, dtype=dtype)


# every other function takes out= as PyTorch's, and hands itself to a program's Tensor subclass at its
# entry (torch.special.erf is the function a __torch_function__ handler sees, not torch.erf's op)
globals().update(_out_variants(globals(), frozenset(__all__) - {"softmax", "log_softmax"}))
