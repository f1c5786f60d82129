"""``torch.distributions.utils``: the helpers the families share (parameter broadcasting, the
probs/logits conversions, a cached property) and that user code imports from PyTorch."""
from __future__ import annotations

import numbers

from ..base.dtype import finfo, float64
from ..core import creation
from ..core.tensor import Tensor
from ..nn import functional as F
from ..ops.movement import broadcast_tensors
from ..ops.shaping import tril_indices

__all__ = ["broadcast_all", "probs_to_logits", "logits_to_probs", "clamp_probs", "lazy_property",
           "euler_constant", "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286060


def broadcast_all(*values) -> tuple:
    """Tensors and numbers to tensors of one broadcast shape; numbers take the first tensor's dtype."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                         "implementing __torch_function__.")
    tensors = [v if isinstance(v, Tensor) else
               creation.tensor(float(v), dtype=like.dtype if like is not None else None,
                               device=like.device if like is not None else None) for v in values]
    return tuple(broadcast_tensors(*tensors))


def _standard_normal(shape, dtype, device) -> Tensor:
    """Standard normal draws (PyTorch's private helper, which custom distributions call)."""
    return creation.randn(tuple(shape), dtype=dtype, device=device)


def _eps(t: Tensor) -> float:
    return finfo(float64 if t.dtype == float64 else t.dtype).eps


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities kept inside ``[eps, 1 - eps]`` so their logs stay finite."""
    eps = _eps(probs)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    ps = clamp_probs(probs)
    return ps.log() - (-ps).log1p() if is_binary else ps.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    return logits.sigmoid() if is_binary else F.softmax(logits, -1)


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum the ``dim`` rightmost dimensions (the event dimensions of a reinterpreted batch)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


class lazy_property:
    """A property computed once per instance and then stored on it (``probs`` from ``logits``...)."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class BinaryProbs:
    """The ``probs``/``logits`` pair of a two-outcome family: whichever the constructor stored, the
    other is derived once, on first read (Bernoulli, Geometric, Binomial, NegativeBinomial, the
    relaxed Bernoulli)."""

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower triangle (from diagonal ``diag``) of the last two dimensions, row by row."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = tril_indices(n, n, diag, device=mat.device)
    return mat[..., rows, cols]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of ``tril_matrix_to_vec``: a square matrix, zero above diagonal ``diag``."""
    m = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > 1.1920928955078125e-07:
        raise ValueError(f"The size of last dimension is {m} which cannot be expressed as the lower triangular "
                         "part of a square D x D matrix.")
    n = round(n)
    rows, cols = tril_indices(n, n, diag, device=vec.device)
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    mat[..., rows, cols] = vec
    return mat
