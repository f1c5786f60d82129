"""``ExponentialFamily``: densities ``h(x) exp(<theta, t(x)> - F(theta))``. A family that gives its
natural parameters ``theta`` and log-normaliser ``F`` gets ``entropy`` by autograd (``E[t(x)] =
grad F``); the families that have a closed form override it."""
from __future__ import annotations

from ..autograd.engine import grad as _grad
from ..base.grad_mode import enable_grad
from ..core.tensor import Tensor
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base of the exponential families (``Normal``, ``Gamma``, ``Bernoulli``...)."""

    @property
    def _natural_params(self) -> tuple:
        raise NotImplementedError

    def _log_normalizer(self, *natural_params) -> Tensor:
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self) -> Tensor:
        result = -self._mean_carrier_measure
        with enable_grad():
            params = [p.detach().requires_grad_() for p in self._natural_params]
            log_norm = self._log_normalizer(*params)
            grads = _grad(log_norm.sum(), params, create_graph=True)
        result = result + log_norm
        for p, g in zip(params, grads):
            result = result - (p * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
