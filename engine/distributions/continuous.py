"""Location-scale and one-parameter continuous families with closed-form ``cdf``/``icdf``:
``Uniform``, ``Exponential``, ``Laplace``, ``Cauchy``, ``HalfCauchy``, ``Gumbel``,
``ContinuousBernoulli``, ``GeneralizedPareto``. Each ``rsample``
is the inverse cdf of a uniform draw, so gradients flow to the parameters."""
from __future__ import annotations

import math

from ..base.dtype import finfo
from ..core import creation
from ..core.tensor import Size, Tensor
from ..nn import functional as F
from . import constraints
from .composite import TransformedDistribution
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .transforms import AbsTransform
from .utils import broadcast_all, clamp_probs, euler_constant, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Uniform", "Exponential", "Laplace", "Cauchy", "HalfCauchy", "Gumbel", "ContinuousBernoulli",
           "GeneralizedPareto"]


def _uniform(d: Distribution, like: Tensor, sample_shape, low: float = 0.0) -> Tensor:
    """Uniform draws of the extended shape in ``[low, 1)`` (``low`` > 0 keeps logs finite)."""
    u = creation.rand(tuple(d._extended_shape(sample_shape)), dtype=like.dtype, device=like.device)
    return u.clamp(min=low) if low else u


class Uniform(Distribution):
    """``U[low, high)``; ``rsample`` is ``low + (high - low) * u``."""

    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args and not bool((self.low < self.high).all()):
            raise ValueError("Uniform is not defined when low>= high")

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return self.high * math.nan

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12 ** 0.5

    def rsample(self, sample_shape=Size()) -> Tensor:
        return self.low + _uniform(self, self.low, sample_shape) * (self.high - self.low)

    def log_prob(self, value) -> Tensor:
        inside = (value >= self.low) & (value < self.high)
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()

    def cdf(self, value) -> Tensor:
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value) -> Tensor:
        return value * (self.high - self.low) + self.low


class Exponential(ExponentialFamily):
    """``rate * exp(-rate * x)`` on ``x >= 0``."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return creation.zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape=Size()) -> Tensor:
        # PyTorch's draw (exponential_), so a seed gives its samples
        return creation.empty(tuple(self._extended_shape(sample_shape)), dtype=self.rate.dtype,
                              device=self.rate.device).exponential_() / self.rate

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value) -> Tensor:
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()


class Laplace(Distribution):
    """``exp(-|x - loc| / scale) / (2 scale)``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return 2 ** 0.5 * self.scale

    def rsample(self, sample_shape=Size()) -> Tensor:
        u = creation.empty(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype,
                           device=self.loc.device).uniform_(finfo(self.loc.dtype).eps - 1, 1)   # in (-1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()


class Cauchy(Distribution):
    """The Lorentz distribution: no mean or variance (nan and inf, as PyTorch)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return creation.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return creation.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=Size()) -> Tensor:
        eps = creation.empty(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype,
                             device=self.loc.device).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value) -> Tensor:
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class HalfCauchy(TransformedDistribution):
    """``|X|`` for ``X ~ Cauchy(0, scale)``."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args: bool | None = None) -> None:
        super().__init__(Cauchy(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return creation.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def mode(self) -> Tensor:
        return creation.zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value if isinstance(value, Tensor) else creation.tensor(float(value), dtype=self.scale.dtype)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return log_prob.where(value >= 0, -math.inf)

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)


class Gumbel(Distribution):
    """The type-I extreme value distribution; ``rsample`` is ``loc - scale * log(-log u)``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * euler_constant

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def rsample(self, sample_shape=Size()) -> Tensor:
        info = finfo(self.loc.dtype)     # PyTorch's: U(tiny, 1 - eps) through log, negation, log
        low = creation.tensor(info.tiny, dtype=self.loc.dtype, device=self.loc.device)
        u = _uniform(self, self.loc, sample_shape) * ((1 - info.eps) - low) + low
        return self.loc + (-self.scale) * (-u.log()).log()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -(z + (-z).exp()) - self.scale.log()

    def cdf(self, value) -> Tensor:
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value) -> Tensor:
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + euler_constant)


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli on ``[0, 1]`` (density proportional to ``p^x (1 - p)^(1 - x)``), for
    VAEs over pixel intensities. Near ``p = 1/2`` the closed forms cancel, so inside ``lims`` the
    normaliser and moments are Taylor series, as PyTorch's."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (probs,) = broadcast_all(probs)
            if validate_args is not None and validate_args and not bool(constraints.unit_interval.check(probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        super().__init__(self._param.shape, validate_args=validate_args)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.shape

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        return self.probs.where(self._outside_unstable_region(), self._lims[0])

    def _cont_bern_log_norm(self) -> Tensor:
        cut = self._cut_probs()
        below = cut.where(cut <= 0.5, 0.0)
        above = cut.where(cut >= 0.5, 1.0)
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - (-2.0 * below).log1p().where(
            cut <= 0.5, (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return log_norm.where(self._outside_unstable_region(), taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return mus.where(self._outside_unstable_region(), taylor)

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        vars_ = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return vars_.where(self._outside_unstable_region(), taylor)

    def rsample(self, sample_shape=Size()) -> Tensor:
        return self.icdf(_uniform(self, self.probs, sample_shape))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = cdfs.where(self._outside_unstable_region(), value)
        return unbounded.where(value < 1.0, 1.0).where(value > 0.0, 0.0)

    def icdf(self, value) -> Tensor:
        cut = self._cut_probs()
        inv = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (cut.log() - (-cut).log1p())
        return inv.where(self._outside_unstable_region(), value)

    def entropy(self) -> Tensor:
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0


class GeneralizedPareto(Distribution):
    """Peaks over a threshold: ``P(X > x) = (1 + c z)^(-1/c)`` with ``z = (x - loc) / scale``
    (the exponential tail ``exp(-z)`` at ``c = 0``); ``rsample`` is the inverse cdf."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def _safe(self) -> tuple:
        eq_zero = self.concentration.abs() <= 1e-8      # PyTorch's isclose(concentration, 0)
        return eq_zero, self.concentration.where(~eq_zero, 1.0)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = (self.loc + self.scale / self.concentration.abs()).where(self.concentration < 0, math.inf)
        return constraints.interval(self.loc, upper)

    def rsample(self, sample_shape=Size()) -> Tensor:
        return self.icdf(_uniform(self, self.loc, sample_shape))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, c = self._safe()
        y = 1 / c + 1
        nonzero = (y * (c * z).log1p()).where(y != 0, y)
        return -self.scale.log() - z.where(eq_zero, nonzero)

    def log_survival_function(self, value) -> Tensor:
        z = (value - self.loc) / self.scale
        eq_zero, c = self._safe()
        return (-z).where(eq_zero, -(c * z).log1p() / c)

    def log_cdf(self, value) -> Tensor:
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value) -> Tensor:
        eq_zero, c = self._safe()
        log1m = (-value).log1p()
        at_zero = self.loc - self.scale * log1m
        nonzero = self.loc + self.scale * (-c * log1m).expm1() / c
        return at_zero.where(eq_zero, nonzero)

    @property
    def mean(self) -> Tensor:
        c = self.concentration
        return (self.loc + self.scale / (1 - c)).where(c < 1, math.nan)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        return (self.scale.pow(2) / ((1 - c).pow(2) * (1 - 2 * c))).where(c < 0.5, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    def entropy(self) -> Tensor:
        return (self.scale.log() + self.concentration + 1).expand(*self._batch_shape)
