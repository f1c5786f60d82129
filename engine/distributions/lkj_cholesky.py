"""``LKJCholesky``: Cholesky factors of correlation matrices with density proportional to
``det(C)^(concentration - 1)``; draws by the onion method (a Beta radius times a uniform direction
per row), not reparameterised, as PyTorch's."""
from __future__ import annotations

import math

from ..base.dtype import finfo
from ..base.grad_mode import no_grad
from ..core import creation
from ..core.tensor import Size, Tensor
from ..ops.movement import cat
from ..ops.special import mvlgamma
from . import constraints
from .distribution import Distribution
from .gamma import Beta
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """Over ``dim x dim`` lower Cholesky factors of correlation matrices."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args: bool | None = None) -> None:
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal_conc = self.concentration + 0.5 * (dim - 2)
        offset = creation.arange(dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = cat([offset.new_zeros(1), offset])
        self._beta = Beta(offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.shape, (dim, dim), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance if _instance is not None else LKJCholesky.__new__(LKJCholesky)
        batch_shape = tuple(Size(batch_shape))
        new.dim = self.dim
        new.concentration = self.concentration.expand(*batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=Size()) -> Tensor:
        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = tuple(self._extended_shape(sample_shape))
            u = creation.randn(shape, dtype=y.dtype, device=y.device).tril(-1)
            first_row = creation.arange(self.dim, device=y.device) > 0
            u_sphere = u / u.norm(dim=-1, keepdim=True).clamp(min=finfo(y.dtype).tiny)
            u_sphere = u_sphere * first_row.to(y.dtype).unsqueeze(-1)
            w = y.sqrt() * u_sphere
            diag = (1 - w.pow(2).sum(-1)).clamp(min=finfo(w.dtype).tiny).sqrt()
            return w + diag.diag_embed()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(0, -1, -2)[..., 1:]
        order = creation.arange(2, self.dim + 1, dtype=self.concentration.dtype, device=value.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalize = 0.5 * dm1 * math.log(math.pi) + mvlgamma(alpha - 0.5, dm1) - alpha.lgamma() * dm1
        return unnormalized - normalize
