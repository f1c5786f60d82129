"""``torch.distributions``, the part generative models reach for: ``Normal``, ``Bernoulli``,
``Categorical``, ``Uniform`` and ``kl_divergence`` between them, with PyTorch's parameter checks,
shapes, reparameterised ``rsample`` and ``log_prob``/``entropy`` formulas (written over tapelab ops,
so gradients flow to the parameters)."""
from __future__ import annotations

import math

from .base.dtype import float64
from .base.grad_mode import no_grad
from .core import creation
from .core.tensor import Size, Tensor
from .nn import functional as F
from .ops.movement import broadcast_tensors
from .ops.sampling import multinomial

__all__ = ["Distribution", "Normal", "Bernoulli", "Categorical", "Uniform", "kl_divergence", "register_kl"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _tensor(x, like=None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return creation.tensor(float(x), dtype=like.dtype if like is not None else None)


class Distribution:
    """Base class: ``batch_shape``/``event_shape``, ``sample`` (no gradient) over ``rsample`` where the
    distribution has one, and argument validation as PyTorch's (on by default)."""

    has_rsample = False
    _validate_default = True

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args: bool | None = None):
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        self._validate = self._validate_default if validate_args is None else validate_args

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        Distribution._validate_default = bool(value)

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape=Size()) -> tuple:
        return tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape)

    def sample(self, sample_shape=Size()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sampler")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def _check(self, name: str, ok: bool, value) -> None:
        if self._validate and not ok:
            raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape "
                             f"{tuple(getattr(value, 'shape', ()))}) of distribution {self!r} to satisfy the "
                             f"constraint {self._constraints[name]}, but found invalid values:\n{value}")

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


class Normal(Distribution):
    """``N(loc, scale^2)``; ``rsample`` is ``loc + scale * eps``."""

    has_rsample = True
    _constraints = {"loc": "Real()", "scale": "GreaterThan(lower_bound=0.0)"}

    def __init__(self, loc, scale, validate_args: bool | None = None):
        loc, scale = _tensor(loc), _tensor(scale)
        self.loc, self.scale = broadcast_tensors(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)
        self._check("scale", bool((self.scale > 0).all()), self.scale)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return self.scale

    def rsample(self, sample_shape=Size()) -> Tensor:
        eps = creation.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value) -> Tensor:
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - _LOG_SQRT_2PI

    def entropy(self) -> Tensor:
        return 0.5 + _LOG_SQRT_2PI + self.scale.log()

    def cdf(self, value) -> Tensor:
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())

    def icdf(self, value) -> Tensor:
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def __repr__(self) -> str:
        return f"Normal(loc: {self.loc.shape if self.loc.numel() > 1 else self.loc}, " \
               f"scale: {self.scale.shape if self.scale.numel() > 1 else self.scale})"


class Uniform(Distribution):
    """``U[low, high)``; ``rsample`` is ``low + (high - low) * u``."""

    has_rsample = True
    _constraints = {"low": "Real()", "high": "Real()"}

    def __init__(self, low, high, validate_args: bool | None = None):
        self.low, self.high = broadcast_tensors(_tensor(low), _tensor(high))
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate and not bool((self.low < self.high).all()):
            raise ValueError("Uniform is not defined when low>= high")

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=Size()) -> Tensor:
        u = creation.rand(self._extended_shape(sample_shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value) -> Tensor:
        inside = (value >= self.low) & (value < self.high)
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()

    def cdf(self, value) -> Tensor:
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)


class Bernoulli(Distribution):
    """0/1 outcomes with ``probs`` (or ``logits``); ``log_prob`` is the negative BCE with logits."""

    _constraints = {"probs": "Interval(lower_bound=0.0, upper_bound=1.0)", "logits": "Real()"}

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.probs = _tensor(probs)
            eps = 1.1920928955078125e-07 if self.probs.dtype != float64 else 2.220446049250313e-16
            clamped = self.probs.clamp(eps, 1 - eps)
            self.logits = clamped.log() - (-clamped).log1p()
        else:
            self.logits = _tensor(logits)
            self.probs = self.logits.sigmoid()
        super().__init__(self.probs.shape, validate_args=validate_args)
        if probs is not None:
            self._check("probs", bool(((self.probs >= 0) & (self.probs <= 1)).all()), self.probs)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()) -> Tensor:
        with no_grad():
            return creation.bernoulli(self.probs.expand(*self._extended_shape(sample_shape)))

    def log_prob(self, value) -> Tensor:
        logits, value = broadcast_tensors(self.logits, _tensor(value, self.logits))
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """One of ``K`` classes with ``probs`` (normalised along the last dim) or ``logits``."""

    _constraints = {"probs": "Simplex()", "logits": "IndependentConstraint(Real(), 1)"}

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = self.probs.clamp(min=1.1920928955078125e-07 if probs.dtype != float64
                                           else 2.220446049250313e-16).log()
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = F.softmax(self.logits, -1)
        super().__init__(self.probs.shape[:-1], validate_args=validate_args)
        if probs is not None:
            self._check("probs", bool((probs >= 0).all()), probs)

    @property
    def mean(self) -> Tensor:
        return creation.full(tuple(self.probs.shape[:-1]), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    def sample(self, sample_shape=Size()) -> Tensor:
        with no_grad():
            k = self.probs.shape[-1]
            flat = self.probs.reshape(-1, k)
            n = int(math.prod(tuple(sample_shape))) if tuple(sample_shape) else 1
            draws = multinomial(flat, n, True).t()      # (n, batch)
            return draws.reshape(tuple(sample_shape) + tuple(self._batch_shape))

    def log_prob(self, value) -> Tensor:
        value = _tensor(value).long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        return -(self.logits.clamp(min=-3.4028234663852886e38) * self.probs).sum(-1)


_KL = {}


def register_kl(type_p: type, type_q: type):
    """Decorator: ``@register_kl(Normal, Normal) def kl(p, q): ...`` adds a KL rule."""
    def deco(fn):
        _KL[(type_p, type_q)] = fn
        return fn
    return deco


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """``KL(p || q)`` by the rule registered for the two types (most specific first)."""
    for (tp, tq), fn in _KL.items():
        if type(p) is tp and type(q) is tq:
            return fn(p, q)
    for (tp, tq), fn in _KL.items():
        if isinstance(p, tp) and isinstance(q, tq):
            return fn(p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                              f"{type(q).__name__}")


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = t.where(q.probs != 0, math.inf)
    t = t.where(p.probs != 0, 0.0)
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return result.where((q.low <= p.low) & (q.high >= p.high), math.inf)
