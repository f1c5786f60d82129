"""Random draws that fill a tensor in place (``uniform_``, ``normal_``, ``bernoulli_``, ...),
``multinomial``, and the count draws ``poisson`` and ``binomial``.

Each in-place draw is one random op (``kind="random"``, declared in ``core/random.py``) applied
through ``apply_``, so it writes into the tensor's memory, bumps its version, is refused by
capture like every random draw, and on a non-leaf gives the old value a zero gradient, as
PyTorch's. The distributions and their argument checks are PyTorch's; the streams are tapelab's.
"""
from __future__ import annotations

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..autograd.views import apply_
from ..base.backend import asnumpy, host
from ..base.meta import has_data
from ..core.creation import zeros_like
from ..core import cpu_stream
from ..core.dispatch import apply
from ..core.random import (BERNOULLI_, CAUCHY_, EXPONENTIAL_, GEOMETRIC_, LOG_NORMAL_, MULTINOMIAL, NORMAL_,
                           RANDOM_, UNIFORM_, default_generator)
from ..core.registry import NONE, Op
from ._util import Tensor
from .movement import broadcast_shapes
from ..base.dtype import FLOATING_KINDS

__all__ = ["multinomial", "poisson", "binomial"]


def _floating(t: Tensor, what: str, complex_too: bool = False) -> None:
    """PyTorch's refusal of a dtype the draw has no kernel for (normal_/uniform_ fill complex tensors
    through their real view)."""
    if t._data.dtype.kind not in FLOATING_KINDS and not (complex_too and t._data.dtype.kind == "c"):
        raise NotImplementedError(f'"{what}" not implemented for \'{t.dtype.scalar_type}\'')


def uniform_(self, from_: float = 0.0, to: float = 1.0, *, generator=None, **kw) -> Tensor:
    from_ = kw.pop("from", from_)
    _floating(self, "check_uniform_bounds", complex_too=True)
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    return apply_(UNIFORM_, self, low=float(from_), high=float(to), generator=generator)


def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    _floating(self, "normal_kernel_cpu", complex_too=True)
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return apply_(NORMAL_, self, mean=float(mean), std=float(std), generator=generator)


def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    _floating(self, "log_normal_cpu")
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return apply_(LOG_NORMAL_, self, mean=float(mean), std=float(std), generator=generator)


def exponential_(self, lambd: float = 1.0, *, generator=None) -> Tensor:
    _floating(self, "exponential_cpu")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return apply_(EXPONENTIAL_, self, lambd=float(lambd), generator=generator)


def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    _floating(self, "cauchy_cpu")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return apply_(CAUCHY_, self, median=float(median), sigma=float(sigma), generator=generator)


def geometric_(self, p: float, *, generator=None) -> Tensor:
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return apply_(GEOMETRIC_, self, p=float(p), generator=generator)


def random_(self, from_: int = 0, to: int | None = None, *, generator=None, **kw) -> Tensor:
    """``random_()``: integers over the dtype's range; ``random_(to)``: [0, to); ``random_(from, to)``."""
    from_ = kw.pop("from", from_)
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is not None and from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    return apply_(RANDOM_, self, low=int(from_), high=None if to is None else int(to), generator=generator)


def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    if isinstance(p, Tensor):
        return apply_(BERNOULLI_, self, p.detach().to(self.device), p=None, generator=generator)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return apply_(BERNOULLI_, self, p=float(p), generator=generator)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None,
                out=None) -> Tensor:
    """``num_samples`` category indices per row of ``input`` (1-D or 2-D non-negative weights)."""
    if input._data.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if input._data.dtype.kind not in FLOATING_KINDS:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, "
                           f"got: {input.dtype.scalar_type}")
    n_cat = input._data.shape[-1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n_cat:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if n_cat > 2 ** 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    res = apply(MULTINOMIAL, input.detach(), num_samples=int(num_samples), replacement=bool(replacement),
                generator=generator)
    if out is not None:
        if out.shape != res.shape or out.dtype != res.dtype:
            raise RuntimeError(f"multinomial: out= must be an int64 tensor of shape {list(res.shape)}")
        return out.copy_(res)
    return res


# ---------------------------------------------------------------- count draws (numpy's samplers on the host)
_EXACT = 2.0 ** 53   # beyond this a count's spread is below float64's resolution: the draw is its mean


def _poisson_fwd(xp, rate, *, generator):
    if not has_data(xp):
        return xp.empty(rate.shape, rate.dtype)
    lam = asnumpy(xp, rate).astype(np.float64)
    if not (lam >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    draws = cpu_stream.poisson((generator or default_generator)._bits, np.minimum(lam, _EXACT))   # PyTorch's draws
    return host(xp, np.where(lam > _EXACT, np.round(lam), draws).astype(rate.dtype))


def _binomial_fwd(xp, count, prob, *, generator):
    shape = np.broadcast_shapes(count.shape, prob.shape)
    if not has_data(xp):
        return xp.empty(shape, count.dtype)
    n = np.broadcast_to(asnumpy(xp, count).astype(np.float64), shape)
    p = np.broadcast_to(asnumpy(xp, prob).astype(np.float64), shape)
    sane = np.isfinite(n) & ~np.isnan(p)
    draws = np.full(shape, np.nan)
    draws[sane] = cpu_stream.binomial((generator or default_generator)._bits,     # PyTorch's draws
                                      n[sane].astype(count.dtype), p[sane].astype(count.dtype))
    return host(xp, draws.astype(count.dtype))


def _binomial_vjp(g, out, count, prob, *, generator):
    raise RuntimeError("derivative for aten::binomial is not implemented")


# PyTorch's poisson has a zero gradient (PoissonBackward0); binomial's refuses at backward time
_POISSON = Op("poisson", _poisson_fwd, lambda g, out, rate, *, generator: (zeros_like(g),), kind="random",
              saves=NONE)
_BINOMIAL = Op("binomial", _binomial_fwd, _binomial_vjp, kind="random", saves=NONE)


def poisson(input: Tensor, generator=None) -> Tensor:
    """Counts drawn from Poisson distributions of rates ``input`` (same shape and dtype)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(poisson, (input,), input, generator=generator)
    _floating(input, "poisson_cpu")
    return apply(_POISSON, input, generator=generator)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Successes in ``count`` trials of probability ``prob`` (broadcast; ``count``'s dtype)."""
    if _DISPATCH.functions is not None and has_tensor_like((count, prob)):
        return handle_torch_function(binomial, (count, prob), count, prob, generator=generator)
    for t, name in ((count, "count"), (prob, "prob")):
        if t._data.dtype.kind not in FLOATING_KINDS:
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: {t.dtype.scalar_type}")
    if prob.dtype != count.dtype:
        raise RuntimeError(f"Found dtype {prob.dtype.scalar_type} but expected {count.dtype.scalar_type}")
    broadcast_shapes(count._data.shape, prob._data.shape)   # PyTorch's RuntimeError when they do not
    return apply(_BINOMIAL, count, prob, generator=generator)


METHODS = ("multinomial",)
OPERATORS = {"uniform_": uniform_, "normal_": normal_, "log_normal_": log_normal_, "exponential_": exponential_,
             "cauchy_": cauchy_, "geometric_": geometric_, "random_": random_, "bernoulli_": bernoulli_}
