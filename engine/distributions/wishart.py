"""``Wishart``: distributions over positive-definite matrices, ``sum of df outer products`` of
Gaussian vectors with covariance ``Sigma = L L^T``. Draws are Bartlett's decomposition (chi-squared
diagonal from gamma draws, so ``rsample`` is differentiable in ``df`` and ``L``), PyTorch's random
stream and correction loop."""
from __future__ import annotations

import math
import numbers
import warnings

from .. import linalg
from ..core import creation
from ..core.tensor import Size, Tensor
from ..base.dtype import finfo
from ..ops.movement import broadcast_shapes
from ..ops.shaping import tril_indices
from ..ops.special import mvlgamma
from . import constraints
from .exp_family import ExponentialFamily
from .distribution import Distribution
from .chi2 import Chi2
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property

__all__ = ["Wishart"]


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma: ``sum_i digamma(x - i/2)``, ``i < p``."""
    half = creation.arange(p, dtype=x.dtype, device=x.device) / 2
    return (x.unsqueeze(-1) - half).digamma().sum(-1)


class Wishart(ExponentialFamily):
    """``W_p(df, Sigma)`` given by one of ``covariance_matrix``, ``precision_matrix``, ``scale_tril``."""

    support = constraints.positive_definite
    has_rsample = True

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.ndim < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = creation.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = tuple(broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(*batch_shape)
        p = param.shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        mat = batch_shape + (p, p)
        if scale_tril is not None:
            self.scale_tril = param.expand(*mat)
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(*mat)
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self.precision_matrix = param.expand(*mat)
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df "
                          "< ndim.", stacklevel=2)
        super().__init__(batch_shape, (p, p), validate_args=validate_args)

    @property
    def arg_constraints(self) -> dict:
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def expand(self, batch_shape, _instance=None):
        new = _instance if _instance is not None else Wishart.__new__(Wishart)
        batch_shape = tuple(Size(batch_shape))
        p = self._event_shape[-1]
        new.df = self.df.expand(*batch_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(*(batch_shape + (p, p)))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(*self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(*self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return linalg.cholesky_inverse(self._unbroadcasted_scale_tril).expand(*self._matrix_shape())

    def _df(self) -> Tensor:
        return self.df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self) -> Tensor:
        return self._df() * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self._event_shape[-1] - 1
        factor = factor.where(factor > 0, math.nan)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix
        d = V.diagonal(0, -2, -1)
        return self._df() * (V.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape) -> Tensor:
        """One draw by Bartlett's decomposition, as PyTorch draws it: the diagonal's chi-squared
        ``Chi2(df - i)`` (its square root clamped at eps) first, then one normal per entry below it."""
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        chi2 = Chi2(self.df.unsqueeze(-1) - creation.arange(p, dtype=L.dtype, device=L.device))
        noise = chi2.rsample(sample_shape).sqrt().clamp(min=finfo(L.dtype).eps).diag_embed(dim1=-2, dim2=-1)
        i, j = tril_indices(p, p, offset=-1)
        noise[..., i, j] = creation.randn(tuple(Size(sample_shape)) + tuple(self._batch_shape) + (p * (p - 1) // 2,),
                                          dtype=noise.dtype, device=noise.device)
        chol = L @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=Size(), max_try_correction=None) -> Tensor:
        """Bartlett draws with PyTorch's correction loop as it runs (torch 2.13): its first check
        flags the positive-definite draws (``support.check``, not its negation), so it warns
        "Singular sample detected." and draws them once more; later rounds redraw the singular ones,
        ``max_try_correction`` (10) times at most."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(sample_shape)
        batch_dims = tuple(range(-len(self._batch_shape), 0))
        sample = self._bartlett_sampling(sample_shape)
        is_singular = self.support.check(sample)
        if batch_dims:
            is_singular = is_singular.amax(batch_dims)
        if is_singular.any():
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                sample_new = self._bartlett_sampling(is_singular[is_singular].shape)
                sample[is_singular] = sample_new
                is_singular_new = ~self.support.check(sample_new)
                if batch_dims:
                    is_singular_new = is_singular_new.amax(batch_dims)
                is_singular[is_singular.clone()] = is_singular_new
                if not is_singular.any():
                    break
        return sample

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        log_det_L = self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)
        trace = (linalg.cholesky_inverse(self._unbroadcasted_scale_tril) * value).sum((-2, -1))
        return (-nu * (p * math.log(2) / 2 + log_det_L) - mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * linalg.slogdet(value)[1] - trace / 2)

    def entropy(self) -> Tensor:
        nu, p = self.df, self._event_shape[-1]
        log_det_L = self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)
        return ((p + 1) * (p * math.log(2) / 2 + log_det_L) + mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)
