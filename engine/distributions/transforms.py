"""``torch.distributions.transforms``: invertible maps with their log |det Jacobian|, for
``TransformedDistribution`` (tanh-squashed policies, log-normals, flows). ``cache_size=1`` keeps the
last ``x -> y`` pair so ``inv(y)`` of a sample returns its exact ``x`` (no ``atanh`` of 1.0)."""
from __future__ import annotations

import math
import numbers

from .. import linalg
from ..base.dtype import finfo
from ..core.tensor import Tensor
from ..ops.movement import broadcast_shapes, cat, stack
from ..nn import functional as F
from . import constraints
from .utils import _sum_rightmost, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "ExpTransform", "IndependentTransform", "LowerCholeskyTransform",
           "PositiveDefiniteTransform", "StackTransform", "PowerTransform", "ReshapeTransform", "SigmoidTransform",
           "SoftmaxTransform", "SoftplusTransform", "StickBreakingTransform", "TanhTransform", "Transform",
           "identity_transform"]


class Transform:
    """``y = T(x)``; subclasses give ``_call``, ``_inverse`` and ``log_abs_det_jacobian``."""

    bijective = False
    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None
        self._inv = None

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        inv = self._inv
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = inv
        return inv

    @property
    def sign(self) -> int:
        raise NotImplementedError

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def __eq__(self, other) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)

    def __repr__(self) -> str:
        return f"_InverseTransform({self._inv!r})"


class ComposeTransform(Transform):
    """``parts`` applied left to right; the Jacobian terms are summed over the widest event."""

    def __init__(self, parts: list, cache_size: int = 0) -> None:
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim = max(event_dim + part.domain.event_dim - part.codomain.event_dim, part.domain.event_dim)
        return constraints.independent(domain, event_dim - domain.event_dim) if event_dim > domain.event_dim \
            else domain

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim = max(event_dim + part.codomain.event_dim - part.domain.event_dim, part.codomain.event_dim)
        return constraints.independent(codomain, event_dim - codomain.event_dim) \
            if event_dim > codomain.event_dim else codomain

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        inv = self._inv
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = inv
            inv._inv = self
        return inv

    def with_cache(self, cache_size: int = 1):
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size=cache_size)

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return x.new_zeros(()).expand(*x.shape)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms, event_dim = [], self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(a, b), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self) -> str:
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more event dimensions (Jacobian summed)."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` into ``out_shape`` (same number of elements)."""

    bijective = True
    sign = 1

    def __init__(self, in_shape, out_shape, cache_size: int = 0) -> None:
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def _call(self, x):
        return x.reshape(tuple(x.shape[:x.ndim - len(self.in_shape)]) + self.out_shape)

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[:y.ndim - len(self.out_shape)]) + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[:x.ndim - len(self.in_shape)]))

    def forward_shape(self, shape):
        return tuple(shape[:len(shape) - len(self.in_shape)]) + self.out_shape

    def inverse_shape(self, shape):
        return tuple(shape[:len(shape) - len(self.out_shape)]) + self.in_shape


class _Parameterless(Transform):
    """Transforms without parameters compare equal by class."""

    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    __hash__ = object.__hash__


class ExpTransform(_Parameterless):
    domain, codomain, bijective, sign = constraints.real, constraints.positive, True, 1

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class SigmoidTransform(_Parameterless):
    domain, codomain, bijective, sign = constraints.real, constraints.unit_interval, True, 1

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        y = _clipped(y)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


def _clipped(p: Tensor) -> Tensor:
    """PyTorch's clipped sigmoid: inside ``[tiny, 1 - eps]`` of the dtype."""
    info = finfo(p.dtype)
    return p.clamp(min=info.tiny, max=1.0 - info.eps)


def _clipped_sigmoid(x: Tensor) -> Tensor:
    """``sigmoid(x)`` kept inside ``[tiny, 1 - eps]`` (PyTorch's private name; pytorch-forecasting imports it)."""
    return _clipped(x.sigmoid())


class TanhTransform(_Parameterless):
    domain, codomain, bijective, sign = constraints.real, constraints.interval(-1.0, 1.0), True, 1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) in a form that stays finite for large |x|
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class SoftplusTransform(_Parameterless):
    domain, codomain, bijective, sign = constraints.real, constraints.positive, True, 1

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)


class AbsTransform(_Parameterless):
    domain, codomain = constraints.real, constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class SoftmaxTransform(_Parameterless):
    domain, codomain = constraints.real_vector, constraints.simplex

    def _call(self, x):
        probs = (x - x.max(-1, keepdim=True)[0]).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()


class StickBreakingTransform(_Parameterless):
    """Unconstrained ``(K-1,)`` vectors to the ``K``-simplex by stick breaking (a bijection)."""

    domain, codomain, bijective = constraints.real_vector, constraints.simplex, True

    @staticmethod
    def _offset(x: Tensor, n: int) -> Tensor:
        return (n + 1 - x.new_ones(n).cumsum(-1)).log()

    def _call(self, x):
        z = (x - self._offset(x, x.shape[-1])).sigmoid()
        z_cumprod = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        n = y_crop.shape[-1]
        sf = (1 - y_crop.cumsum(-1)).clamp(min=finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + (y.shape[-1] - y.new_ones(n).cumsum(-1)).log()

    def log_abs_det_jacobian(self, x, y):
        x = x - self._offset(x, x.shape[-1])
        return (-x + F.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(_Parameterless):
    """Square matrices to lower-triangular ones with a positive diagonal (exp of the diagonal)."""

    domain, codomain = constraints.independent(constraints.real, 2), constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(0, -2, -1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(0, -2, -1).log().diag_embed()


class CorrCholeskyTransform(_Parameterless):
    """Unconstrained ``D(D-1)/2`` vectors to Cholesky factors of correlation matrices: ``tanh`` to
    partial correlations, then stick breaking along each row so every row has unit norm."""

    domain, codomain, bijective = constraints.real_vector, constraints.corr_cholesky, True

    def _call(self, x):
        eps = finfo(x.dtype).eps
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        z1m_cumprod_sqrt = (1 - r.pow(2)).sqrt().cumprod(-1)
        eye = x.new_ones(r.shape[-1]).diag_embed()
        return (r + eye) * F.pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = F.pad(y_cumsum[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(y_cumsum_shifted, diag=-1).sqrt()
        return (t.log1p() - (-t).log1p()) / 2

    def log_abs_det_jacobian(self, x, y):
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        stick_breaking_logdet = 0.5 * tril_matrix_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        tanh_logdet = -2 * (x + F.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattend lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2 or shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        return tuple(shape[:-2]) + (shape[-1] * (shape[-1] - 1) // 2,)


class PositiveDefiniteTransform(_Parameterless):
    """Square matrices to positive-definite ones: ``L L^T`` of their ``LowerCholeskyTransform``."""

    domain, codomain = constraints.independent(constraints.real, 2), constraints.positive_definite

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(linalg.cholesky(y))


class CumulativeDistributionTransform(Transform):
    """``distribution``'s cdf as a transform onto ``[0, 1]`` (copulas); its Jacobian is the density."""

    bijective, codomain, sign = True, constraints.unit_interval, 1

    def __init__(self, distribution, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


class CatTransform(Transform):
    """``tseq[i]`` on consecutive slices of ``dim`` of lengths ``lengths`` (1 each by default)."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0) -> None:
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms, self.dim = list(tseq), dim
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise ValueError("CatTransform needs one length per transform")

    @property
    def event_dim(self) -> int:
        return max(t.event_dim for t in self.transforms)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)

    def _map(self, x, fns):
        parts, start = [], 0
        for fn, length in zip(fns, self.lengths):
            parts.append(fn(x.narrow(self.dim, start, length)))
            start += length
        return cat(parts, self.dim)

    def _call(self, x):
        return self._map(x, self.transforms)

    def _inverse(self, y):
        return self._map(y, [t.inv for t in self.transforms])

    def log_abs_det_jacobian(self, x, y):
        terms, start = [], 0
        for t, length in zip(self.transforms, self.lengths):
            term = t.log_abs_det_jacobian(x.narrow(self.dim, start, length), y.narrow(self.dim, start, length))
            terms.append(_sum_rightmost(term, self.event_dim - t.event_dim))
            start += length
        dim = (self.dim - x.ndim if self.dim >= 0 else self.dim) + self.event_dim
        if dim < 0:
            return cat(terms, dim)
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total


class StackTransform(Transform):
    """``tseq[i]`` on the ``i``-th slice of ``dim``."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0) -> None:
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms, self.dim = list(tseq), dim

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)

    def _call(self, x):
        return stack([t(x.select(self.dim, i)) for i, t in enumerate(self.transforms)], self.dim)

    def _inverse(self, y):
        return stack([t.inv(y.select(self.dim, i)) for i, t in enumerate(self.transforms)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        return stack([t.log_abs_det_jacobian(x.select(self.dim, i), y.select(self.dim, i))
                      for i, t in enumerate(self.transforms)], self.dim)


class PowerTransform(Transform):
    """``y = x ** exponent`` on the positive reals."""

    domain, codomain, bijective = constraints.positive, constraints.positive, True

    def __init__(self, exponent, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size: int = 1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size=cache_size)

    def __eq__(self, other) -> bool:
        return isinstance(other, PowerTransform) and _same(self.exponent, other.exponent)

    __hash__ = object.__hash__

    @property
    def sign(self):
        return self.exponent.sign() if isinstance(self.exponent, Tensor) else (1 if self.exponent > 0 else -1)

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class AffineTransform(Transform):
    """``y = loc + scale * x`` over ``event_dim`` rightmost dimensions."""

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @property
    def domain(self):
        return constraints.independent(constraints.real, self._event_dim) if self._event_dim else constraints.real

    @property
    def codomain(self):
        return self.domain

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other) -> bool:
        return isinstance(other, AffineTransform) and _same(self.loc, other.loc) and _same(self.scale, other.scale)

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Real):
            result = x.new_full(shape, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self._event_dim:
            result = result.reshape(tuple(result.shape[:result.ndim - self._event_dim]) + (-1,)).sum(-1)
            shape = shape[:len(shape) - self._event_dim]
        return result.expand(*shape)

    def forward_shape(self, shape):
        return _broadcast_shape(shape, self.loc, self.scale)

    def inverse_shape(self, shape):
        return _broadcast_shape(shape, self.loc, self.scale)


def _broadcast_shape(shape, *params) -> tuple:
    return tuple(broadcast_shapes(tuple(shape), *[tuple(p.shape) for p in params if isinstance(p, Tensor)]))


def _same(a, b) -> bool:
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return a == b
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a is b or (a.shape == b.shape and bool((a == b).all()))
    return False
