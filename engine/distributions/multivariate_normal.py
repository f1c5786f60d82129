"""Gaussians over vectors: ``MultivariateNormal`` (one of ``covariance_matrix``,
``precision_matrix``, ``scale_tril``; everything runs through the Cholesky factor ``L``) and
``LowRankMultivariateNormal`` (``W W^T + diag(D)``, by the Woodbury identity and the matrix
determinant lemma, so the ``n x n`` covariance is never factorised)."""
from __future__ import annotations

import math

from .. import linalg
from ..core import creation
from ..core.tensor import Size, Tensor
from ..ops.movement import broadcast_shapes
from . import constraints
from .distribution import Distribution
from .utils import lazy_property

__all__ = ["MultivariateNormal", "LowRankMultivariateNormal"]


def _batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL: Tensor, bx: Tensor) -> Tensor:
    """``x^T (L L^T)^{-1} x`` for a batch of lower-triangular ``L``, broadcasting their batches."""
    n = bx.shape[-1]
    batch = tuple(broadcast_shapes(tuple(bL.shape[:-2]), tuple(bx.shape[:-1])))
    L = bL.expand(*(batch + (n, n)))
    x = bx.expand(*(batch + (n,)))
    sol = linalg.solve_triangular(L, x.unsqueeze(-1), upper=False).squeeze(-1)
    return sol.pow(2).sum(-1)


def _precision_to_scale_tril(P: Tensor) -> Tensor:
    """A lower Cholesky factor of ``P^{-1}`` from the Cholesky factor of the flipped ``P``."""
    Lf = linalg.cholesky(P.flip(-2, -1))
    L_inv = Lf.flip(-2, -1).mT
    eye = creation.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return linalg.solve_triangular(L_inv, eye.expand(*P.shape), upper=False)


class MultivariateNormal(Distribution):
    """``N(loc, Sigma)`` with ``Sigma = L L^T``; ``rsample`` is ``loc + L eps``."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        if given.ndim < 2:
            name = ("scale_tril" if scale_tril is not None else "covariance_matrix" if covariance_matrix is not None
                    else "precision_matrix")
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch "
                             "dimensions")
        batch_shape = tuple(broadcast_shapes(tuple(given.shape[:-2]), tuple(loc.shape[:-1])))
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*(batch_shape + (n, n)))
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*(batch_shape + (n, n)))
        else:
            self.precision_matrix = precision_matrix.expand(*(batch_shape + (n, n)))
        self.loc = loc.expand(*(batch_shape + (n,)))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        """Expands ``loc`` and any matrix already made; the Cholesky factor stays shared."""
        new = _instance if _instance is not None else MultivariateNormal.__new__(MultivariateNormal)
        batch_shape = tuple(Size(batch_shape))
        n = self._event_shape[0]
        new.loc = self.loc.expand(*(batch_shape + (n,)))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(*(batch_shape + (n, n)))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(*(tuple(self._batch_shape) + tuple(self._event_shape) * 2))

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(*(tuple(self._batch_shape) + tuple(self._event_shape) * 2))

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return linalg.cholesky_inverse(self._unbroadcasted_scale_tril).expand(
            *(tuple(self._batch_shape) + tuple(self._event_shape) * 2))

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._extended_shape())

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        eps = creation.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self) -> Tensor:
        half_log_det = self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return H.expand(*self._batch_shape) if len(self._batch_shape) else H


class LowRankMultivariateNormal(Distribution):
    """``N(loc, W W^T + diag(D))`` with ``W = cov_factor`` (``n x r``) and ``D = cov_diag``."""

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args: bool | None = None) -> None:
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        n = loc.shape[-1]
        if cov_factor.ndim < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != (n,):
            raise ValueError(f"cov_factor must be a batch of matrices with shape {n} x m")
        if tuple(cov_diag.shape[-1:]) != (n,):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {(n,)}")
        batch = tuple(broadcast_shapes(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]),
                                       tuple(cov_diag.shape[:-1])))
        self.loc = loc.expand(*(batch + (n,)))
        self.cov_factor = cov_factor.expand(*(batch + tuple(cov_factor.shape[-2:])))
        self.cov_diag = cov_diag.expand(*(batch + (n,)))
        self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag = cov_factor, cov_diag
        self._capacitance_tril = self._capacitance(cov_factor, cov_diag)
        super().__init__(batch, (n,), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """Expands the parameters' views; the unbroadcast factors and capacitance stay shared."""
        new = _instance if _instance is not None else LowRankMultivariateNormal.__new__(LowRankMultivariateNormal)
        batch_shape = tuple(Size(batch_shape))
        n = self._event_shape[0]
        new.loc = self.loc.expand(*(batch_shape + (n,)))
        new.cov_factor = self.cov_factor.expand(*(batch_shape + tuple(self.cov_factor.shape[-2:])))
        new.cov_diag = self.cov_diag.expand(*(batch_shape + (n,)))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @staticmethod
    def _capacitance(W: Tensor, D: Tensor) -> Tensor:
        """The Cholesky factor of ``I + W^T D^{-1} W`` (``r x r``)."""
        m = W.shape[-1]
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        K = Wt_Dinv @ W
        eye = creation.eye(m, dtype=W.dtype, device=W.device)
        return linalg.cholesky(K + eye)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag) \
            .expand(*self._extended_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        W = self._unbroadcasted_cov_factor
        cov = W @ W.mT + self._unbroadcasted_cov_diag.diag_embed()
        return cov.expand(*(tuple(self._batch_shape) + tuple(self._event_shape) * 2))

    @lazy_property
    def scale_tril(self) -> Tensor:
        return linalg.cholesky(self.covariance_matrix)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return linalg.inv(self.covariance_matrix)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_w = creation.randn(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = creation.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w) + self._unbroadcasted_cov_diag.sqrt() * eps_d

    def _log_det(self) -> Tensor:
        return 2 * self._capacitance_tril.diagonal(0, -2, -1).log().sum(-1) + self._unbroadcasted_cov_diag.log().sum(-1)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        Wt_Dinv_x = _batch_mv(Wt_Dinv, diff)
        mahalanobis = (diff.pow(2) / D).sum(-1) - _batch_mahalanobis(self._capacitance_tril, Wt_Dinv_x)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + mahalanobis + self._log_det())

    def entropy(self) -> Tensor:
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return H.expand(*self._batch_shape) if len(self._batch_shape) else H
