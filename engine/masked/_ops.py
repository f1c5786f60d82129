"""The masked operations of ``torch.masked`` on strided tensors (see the package)."""
from __future__ import annotations

import builtins

from ..base import dtype as _dtype
from ..base.layout import strided
from ..core import creation
from ..core.tensor import Tensor
from ..nn import functional as F
from ..ops.compare import maximum, where
from ..ops.elementwise import logaddexp as _logaddexp
from ..ops.movement import broadcast_to
from ..ops.reduce import logsumexp as _logsumexp, vector_norm

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp", "logsumexp", "mean",
           "median", "norm", "normalize", "prod", "softmax", "softmin", "std", "sum", "var"]

_SMALL_INTS = (_dtype.uint8, _dtype.bool, _dtype.int8, _dtype.int16, _dtype.int32)


def _identity(op: str, input: Tensor, ord=None):
    """The value that leaves ``op``'s result unchanged, as a 0-d tensor of ``input``'s dtype."""
    dtype = input.dtype
    floating = dtype.is_floating_point
    if op in ("sum", "cumsum"):
        value = 0
    elif op in ("prod", "cumprod"):
        value = 1
    elif op in ("amax", "argmax", "logaddexp", "logsumexp"):
        value = float("-inf") if floating or dtype.is_complex else _dtype.iinfo(dtype).min
    elif op in ("amin", "argmin"):
        value = float("inf") if floating else _dtype.iinfo(dtype).max
    elif op == "norm":
        value = float("inf") if ord == float("-inf") else 0
    elif op == "median":
        return creation.tensor(float("nan"), dtype=dtype if floating else _dtype.float32, device=input.device)
    else:
        raise NotImplementedError(f"identity of {op} on {dtype} input")
    return creation.tensor(value, dtype=dtype, device=input.device)


def _input_mask(input: Tensor, mask: Tensor) -> Tensor:
    """``mask`` broadcast to ``input``'s shape, as bool."""
    if tuple(mask.shape) != tuple(input.shape):
        if mask.dim() > input.dim():
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality higher than of the "
                             "input)")
        mask = broadcast_to(mask.clone(), input.shape)
    return mask.to(dtype=_dtype.bool)


def _combined(op: str, input: Tensor, mask, ord=None) -> Tensor:
    if type(input).__name__ == "MaskedTensor":   # its own mask decides, as PyTorch's (``mask`` is not read)
        input, mask = input.get_data(), input.get_mask()
    if input.layout is not strided:
        raise ValueError(f"masked {op} expects strided tensor (got {input.layout} tensor)")
    if mask is None:
        return input
    return where(_input_mask(input, mask), input, _identity(op, input, ord))


def _dims(dim, ndim: int) -> tuple:
    """``dim`` as a sorted tuple of non-negative dims (None or () is every dim)."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    ndim = builtins.max(ndim, 1)
    out: list = []
    for d in (dim,) if isinstance(dim, int) else dim:
        if d in out:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
        out.append(d % ndim)
    return tuple(sorted(out))


def _accumulating(input: Tensor, dtype):
    """The result dtype of a sum or product: small integers and bool accumulate in int64."""
    if dtype is not None:
        return dtype
    return _dtype.int64 if input.dtype in _SMALL_INTS else input.dtype


def sum(input: Tensor, dim=None, *, keepdim: bool | None = False, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = _accumulating(input, dtype)
    return _combined("sum", input, mask).sum(_dims(dim, input.dim()), bool(keepdim), dtype=dtype)


def prod(input: Tensor, dim=None, *, keepdim: bool | None = False, dtype=None, mask: Tensor | None = None) -> Tensor:
    result = _combined("prod", input, mask).to(dtype=_accumulating(input, dtype))
    for d in reversed(_dims(dim, input.dim())):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input: Tensor, dim: int, *, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return _combined("sum", input, mask).cumsum(_dims(dim, input.dim())[0], dtype=dtype).to(dtype=dtype)


def cumprod(input: Tensor, dim: int, *, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return _combined("prod", input, mask).cumprod(_dims(dim, input.dim())[0], dtype=dtype).to(dtype=dtype)


def amax(input: Tensor, dim=None, *, keepdim: bool | None = False, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return _combined("amax", input, mask).amax(_dims(dim, input.dim()), bool(keepdim)).to(dtype=dtype)


def amin(input: Tensor, dim=None, *, keepdim: bool | None = False, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return _combined("amin", input, mask).amin(_dims(dim, input.dim()), bool(keepdim)).to(dtype=dtype)


def argmax(input: Tensor, dim: int | None = None, *, keepdim: bool | None = False, dtype=None,
           mask: Tensor | None = None) -> Tensor:
    """The index of the largest kept element, in ``dtype`` (the input's by default, as PyTorch's)."""
    dtype = input.dtype if dtype is None else dtype
    return _combined("argmax", input, mask).argmax(dim, bool(keepdim)).to(dtype=dtype)


def argmin(input: Tensor, dim: int | None = None, *, keepdim: bool | None = False, dtype=None,
           mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return _combined("argmin", input, mask).argmin(dim, bool(keepdim)).to(dtype=dtype)


def mean(input: Tensor, dim=None, *, keepdim: bool | None = False, dtype=None, mask: Tensor | None = None) -> Tensor:
    """The kept elements' sum over their count (NaN where none is kept)."""
    source = "Optional"
    if dtype is None:
        dtype, source = input.dtype, "Input"
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either a floating point or "
                         f"complex dtype. Got: {dtype}")
    if input.layout is not strided:
        raise ValueError(f"masked mean expects strided or sparse_csr tensor (got {input.layout} tensor)")
    if mask is None:
        count = sum(creation.ones(input.shape, dtype=_dtype.int64, device=input.device), dim, keepdim=keepdim)
        total = sum(input, dim, keepdim=keepdim, dtype=dtype)
    else:
        kept = _input_mask(input, mask)
        count = kept.sum(dim=dim, keepdim=bool(keepdim))
        total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=kept)
    return total / count


def median(input: Tensor, dim: int = -1, *, keepdim: bool = False, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    d = _dims(dim, input.dim())[0]
    floating = input.dtype.is_floating_point
    if not floating:
        input = input.to(dtype=_dtype.float32)
    out = _combined("median", input, mask).nanmedian(d, keepdim).values
    if floating:
        return out
    if not out.isnan().any():
        return out.to(dtype=dtype)
    raise ValueError("masked median expects no fully masked out rows if dtype is not floating point")


def logsumexp(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return _logsumexp(_combined("logsumexp", input, mask), _dims(dim, input.dim()), keepdim=keepdim).to(dtype=dtype)


def logaddexp(input: Tensor, other: Tensor, *, dtype=None, input_mask: Tensor | None = None,
              other_mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    if input.layout is not strided or other.layout is not strided:
        raise ValueError(f"masked logaddexp expects strided tensors (got {input.layout} tensor for input, "
                         f"{other.layout} for other)")
    return _logaddexp(_combined("logaddexp", input, input_mask),
                      _combined("logaddexp", other, other_mask)).to(dtype=dtype)


def norm(input: Tensor, ord: float | None = 2.0, dim=None, *, keepdim: bool | None = False, dtype=None,
         mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return vector_norm(_combined("norm", input, mask, ord), ord, _dims(dim, input.dim()), bool(keepdim), dtype=dtype)


def _std_var(input: Tensor, dim, unbiased, correction_opt, keepdim, dtype, mask, take_sqrt: bool) -> Tensor:
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point or input.dtype.is_complex else _dtype.float32
    compute = dtype if dtype.is_floating_point or dtype.is_complex else _dtype.float32
    if input.layout is not strided:
        raise ValueError(f"masked std/var expects strided tensor (got {input.layout} tensor)")
    if mask is None:
        count = sum(creation.ones(input.shape, dtype=_dtype.int64, device=input.device), dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype)
        kept = None
    else:
        kept = _input_mask(input, mask)
        count = kept.sum(dim=dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype, mask=kept)
    x = input - sample_total / count
    total = sum(x * x.conj(), dim, keepdim=keepdim, dtype=compute, mask=kept)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        count = count.to(_dtype.float32 if compute is _dtype.complex64 else
                         _dtype.float64 if compute is _dtype.complex128 else compute)
        count = maximum(count - correction, count.new_zeros([]))
    out = (total / count).to(dtype=dtype)
    return out.sqrt() if take_sqrt else out


def var(input: Tensor, dim=None, unbiased: bool | None = None, *, correction=None, keepdim: bool | None = False,
        dtype=None, mask: Tensor | None = None) -> Tensor:
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=False)


def std(input: Tensor, dim=None, unbiased: bool | None = None, *, correction=None, keepdim: bool | None = False,
        dtype=None, mask: Tensor | None = None) -> Tensor:
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=True)


def softmax(input: Tensor, dim: int, *, dtype=None, mask: Tensor | None = None) -> Tensor:
    """Softmax over the kept elements (0 at masked-out ones; NaN where a row keeps none)."""
    dtype = input.dtype if dtype is None else dtype
    return F.softmax(_combined("amax", input, mask), _dims(dim, input.dim())[0], dtype=dtype)


def log_softmax(input: Tensor, dim: int, *, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return F.log_softmax(_combined("amax", input, mask), _dims(dim, input.dim())[0], dtype=dtype)


def softmin(input: Tensor, dim: int, *, dtype=None, mask: Tensor | None = None) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    return F.softmin(_combined("amin", input, mask), _dims(dim, input.dim())[0], dtype=dtype)


def normalize(input: Tensor, ord: float, dim: int, *, eps: float = 1e-12, dtype=None,
              mask: Tensor | None = None) -> Tensor:
    """The kept elements over their ``ord``-norm along ``dim`` (masked-out elements are 0)."""
    dtype = input.dtype if dtype is None else dtype
    kept = _combined("sum", input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return kept / maximum(nrm, nrm.new_full([], eps))
