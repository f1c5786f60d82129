"""The gamma family and what is built from gamma draws: ``Gamma``, ``Chi2``, ``Beta``,
``Dirichlet``, ``StudentT``.

Gamma draws are PyTorch's: ATen's Marsaglia-Tsang rejection over its generator's normals and
uniforms, element by element (``core/cpu_stream.py``). Their gradients are PyTorch's too: a draw
enters the graph through ``reparam_ops``, whose vjps are ATen's ``_standard_gamma_grad`` (Gamma,
Chi2, StudentT, FisherSnedecor) and ``_dirichlet_grad`` (Dirichlet, and Beta as a Dirichlet's first
coordinate), approximations of the implicit gradient that per sample differ from the exact one."""
from __future__ import annotations

import math

import numpy as np

from ..base.dtype import finfo
from ..base.grad_mode import no_grad
from ..core import cpu_stream, creation
from ..core.random import default_generator
from ..core.tensor import Size, Tensor
from ..ops.elementwise import xlogy
from ..ops.movement import stack
from ..ops.special import igamma
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .reparam_ops import dirichlet_with_grad, gamma_with_grad
from .utils import broadcast_all

__all__ = ["Gamma", "Chi2", "Beta", "Dirichlet", "StudentT", "FisherSnedecor"]


def _marsaglia_tsang(alpha: Tensor) -> Tensor:
    """Standard gamma draws (no gradient), one per element of ``alpha``: PyTorch's
    ``_standard_gamma`` on its generator's stream (``core/cpu_stream.py``), so a seed gives its draws."""
    host = alpha.detach().cpu().numpy()
    draws = cpu_stream.gamma(default_generator, host).astype(host.dtype)
    tiny = finfo(alpha.dtype).tiny
    return creation.tensor(np.maximum(draws, tiny), dtype=alpha.dtype, device=alpha.device)


def sample_dirichlet(concentration: Tensor) -> Tensor:
    """Dirichlet draws along the last dim, no gradient (``torch._sample_dirichlet``): PyTorch's, gamma
    draws in double (the concentrations cast up), each at least double's smallest normal, normalised in
    double, then in the input's dtype and at least its smallest normal (a float32 coordinate below it is
    that, not 0)."""
    host = concentration.detach().cpu().numpy()
    g = np.maximum(cpu_stream.gamma(default_generator, host.astype(np.float64)), np.finfo(np.float64).tiny)
    x = np.maximum((g / g.sum(-1, keepdims=True)).astype(host.dtype), np.finfo(host.dtype).tiny)
    return creation.tensor(x, dtype=concentration.dtype, device=concentration.device)


def _dirichlet_rsample(concentration: Tensor) -> Tensor:
    """A Dirichlet draw with PyTorch's values and its gradient (``torch.distributions``' ``_Dirichlet``)."""
    with no_grad():
        x = sample_dirichlet(concentration)
    return dirichlet_with_grad(concentration, x) if concentration.requires_grad else x


def standard_gamma(alpha: Tensor) -> Tensor:
    """A ``Gamma(alpha, 1)`` draw per element, differentiable in ``alpha`` (``torch._standard_gamma``)."""
    with no_grad():
        x = _marsaglia_tsang(alpha.detach())
    return gamma_with_grad(alpha, x) if alpha.requires_grad else x


class Gamma(ExponentialFamily):
    """Shape ``concentration``, inverse scale ``rate``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(*shape)) / self.rate.expand(*shape)
        return value + (value.detach().clamp(min=finfo(value.dtype).tiny) - value.detach())

    def log_prob(self, value) -> Tensor:
        value = value if isinstance(value, Tensor) else creation.tensor(float(value), dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (xlogy(self.concentration, self.rate) + xlogy(self.concentration - 1, value)
                - self.rate * value - self.concentration.lgamma())

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1.0 - a) * a.digamma()

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return igamma(self.concentration, self.rate * value)


class Chi2(Gamma):
    """``Gamma(df / 2, 1 / 2)``."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args: bool | None = None) -> None:
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2


class Beta(ExponentialFamily):
    """On ``[0, 1]``, density proportional to ``x^(c1 - 1) (1 - x)^(c0 - 1)``."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        """The Dirichlet mode's first coordinate, as PyTorch's: 0 or 1 at a boundary, nan for c1 = c0 = 1."""
        return Dirichlet(stack([self.concentration1, self.concentration0], -1)).mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        # PyTorch's: a Dirichlet over the stacked (c1, c0) expanded, its first coordinate
        pair = stack([self.concentration1, self.concentration0], -1)
        return _dirichlet_rsample(pair.expand(*shape, 2))[..., 0]

    def _lbeta(self) -> Tensor:
        c1, c0 = self.concentration1, self.concentration0
        return c1.lgamma() + c0.lgamma() - (c1 + c0).lgamma()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return xlogy(self.concentration1 - 1, value) + xlogy(self.concentration0 - 1, 1 - value) - self._lbeta()

    def entropy(self) -> Tensor:
        c1, c0 = self.concentration1, self.concentration0
        return (self._lbeta() - (c1 - 1) * c1.digamma() - (c0 - 1) * c0.digamma()
                + (c1 + c0 - 2) * (c1 + c0).digamma())


class Dirichlet(ExponentialFamily):
    """On the simplex, density proportional to ``prod x_i^(c_i - 1)``; event shape ``(K,)``."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args: bool | None = None) -> None:
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, keepdim=True)
        # every concentration below 1: PyTorch puts the mass on the first coordinate (its argmax of the 0/0 row)
        below = (self.concentration < 1).all(-1, keepdim=True)
        first = creation.arange(self.concentration.shape[-1], device=mode.device) == 0
        return mode.where(~below, first.to(mode.dtype))

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return _dirichlet_rsample(self.concentration.expand(*shape))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    def entropy(self) -> Tensor:
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return c.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma() - ((c - 1.0) * c.digamma()).sum(-1)


class StudentT(Distribution):
    """Student's t with ``df`` degrees of freedom, shifted by ``loc`` and scaled by ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        super().__init__(self.df.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc.where(self.df > 1, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        var = self.scale.pow(2) * self.df / (self.df - 2)
        var = var.where(self.df > 2, math.inf)
        return var.where(self.df > 1, math.nan)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = creation.randn(tuple(shape), dtype=self.df.dtype, device=self.df.device)
        z = Chi2(self.df).rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())   # PyTorch's order of operations

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + (0.5 * self.df).lgamma() - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self) -> Tensor:
        half_df = 0.5 * self.df
        lbeta = half_df.lgamma() + math.lgamma(0.5) - (half_df + 0.5).lgamma()
        return (self.scale.log() + (half_df + 0.5) * ((half_df + 0.5).digamma() - half_df.digamma())
                + 0.5 * self.df.log() + lbeta)


class FisherSnedecor(Distribution):
    """The F distribution: the ratio of two scaled chi-squared draws."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        super().__init__(self.df1.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return (self.df2 / (self.df2 - 2)).where(self.df2 > 2, math.nan)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return mode.where(self.df1 > 2, math.nan)

    @property
    def variance(self) -> Tensor:
        df1, df2 = self.df1, self.df2
        var = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return var.where(df2 > 4, math.nan)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x1 = Gamma(0.5 * self.df1, 0.5 * self.df1).rsample(sample_shape).view(shape)
        x2 = Gamma(0.5 * self.df2, 0.5 * self.df2).rsample(sample_shape).view(shape)
        tiny = finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        ct1, ct2 = self.df1 * 0.5, self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
