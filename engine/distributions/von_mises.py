"""``VonMises``: the circular normal on ``[-pi, pi)``. Draws are Best and Fisher's rejection
sampler (wrapped Cauchy proposal), computed in float64; no ``rsample``, as PyTorch."""
from __future__ import annotations

import math

from ..base.dtype import float64
from ..base.grad_mode import no_grad
from ..core import creation
from ..core.tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["VonMises"]

# Abramowitz and Stegun 9.8.1-9.8.4, PyTorch's polynomials: its log-densities and variances are
# these (about 1e-7 off the true Bessel functions), so a program gets PyTorch's numbers.
_COEF_SMALL = (
    (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2),
    (0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3),
)
_COEF_LARGE = (
    (0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1,
     0.2635537e-1, -0.1647633e-1, 0.392377e-2),
    (0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1,
     -0.2895312e-1, 0.1787654e-1, -0.420059e-2),
)


def _eval_poly(y: Tensor, coef: tuple) -> Tensor:
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel(x: Tensor, order: int) -> Tensor:
    """``log(I_order(x))`` for ``x > 0``, order 0 or 1, as PyTorch's polynomial approximation."""
    y = (x / 3.75) * (x / 3.75)
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _eval_poly(3.75 / x, _COEF_LARGE[order]).log()
    return small.log().where(x < 3.75, large)


def _rejection_sample(loc: Tensor, concentration: Tensor, shape: tuple) -> Tensor:
    k = concentration.to(float64).expand(*shape)
    tau = 1 + (1 + 4 * k * k).sqrt()
    rho = (tau - (2 * tau).sqrt()) / (2 * k)
    r = (1 + rho * rho) / (2 * rho)
    # small concentrations: r from a series that avoids cancellation
    r = r.where(k > 1e-5, 1 / k + k)
    # PyTorch's loop, so a seed gives its samples: three uniforms a round, and a later round's
    # acceptance overwrites an earlier one (as PyTorch's does); the angle wrapped in double
    out = creation.zeros(shape, dtype=float64, device=loc.device)
    done = creation.zeros(shape, dtype=float64, device=loc.device) > 0
    while not bool(done.all()):
        u1, u2, u3 = (creation.rand(shape, dtype=float64, device=loc.device) for _ in range(3))
        z = (math.pi * u1).cos()
        f = (1 + r * z) / (r + z)
        c = k * (r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2.clamp(min=1e-300)).log() + 1 - c >= 0)
        out = out.where(~accept, (u3 - 0.5).sign() * f.clamp(-1, 1).acos())
        done = done | accept
    return (out + math.pi + loc.to(float64)).remainder(2 * math.pi) - math.pi


class VonMises(Distribution):
    """Density ``exp(k cos(x - loc)) / (2 pi I0(k))``."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        return k * (value - self.loc).cos() - math.log(2 * math.pi) - _log_modified_bessel(k, 0)

    def sample(self, sample_shape=Size()) -> Tensor:
        with no_grad():
            shape = tuple(self._extended_shape(sample_shape))
            return _rejection_sample(self.loc, self.concentration, shape).to(self.loc.dtype)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        """The circular variance ``1 - I1(k) / I0(k)``."""
        k = self.concentration
        return 1 - (_log_modified_bessel(k, 1) - _log_modified_bessel(k, 0)).exp()
