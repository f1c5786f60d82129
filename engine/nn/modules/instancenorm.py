"""Instance normalisation: InstanceNorm1d/2d/3d and their lazy forms."""
from __future__ import annotations

import warnings

from ...core.tensor import Tensor
from .. import functional as F
from .batchnorm import _lazy_norm, _LazyNormMixin, _NormBase


__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]


class _InstanceNorm(_NormBase):
    """Per-sample, per-channel normalisation; running stats only with ``track_running_stats=True``."""

    _no_batch_dim = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self._dims:
            raise ValueError(f"expected {self._dims[0]}D or {self._dims[1]}D input (got {input.ndim}D input)")
        feature_dim = input.ndim - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        unbatched = input.ndim == self._no_batch_dim
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _dims, _no_batch_dim = (2, 3), 2


class InstanceNorm2d(_InstanceNorm):
    _dims, _no_batch_dim = (3, 4), 3


class InstanceNorm3d(_InstanceNorm):
    _dims, _no_batch_dim = (4, 5), 4


class _LazyInstanceNorm(_LazyNormMixin):
    """(PyTorch's lazy instance norms default to ``affine=True, track_running_stats=True``.)"""

    def _feature_dim(self, input: Tensor) -> int:
        return input.ndim - self._no_batch_dim


LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", _LazyInstanceNorm, InstanceNorm1d, __name__)


LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", _LazyInstanceNorm, InstanceNorm2d, __name__)


LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", _LazyInstanceNorm, InstanceNorm3d, __name__)
