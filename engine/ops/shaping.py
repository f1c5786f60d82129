"""More movement and assembly: scatters into diagonals/slices, diagonal embedding, rotations,
splits along named axes, repeats, windows (``unfold``), masked and flat puts, index reductions,
batched products (``addbmm``/``addmv``/``addr``), cross products and index grids.

All composites over existing views and ops (autograd comes from them), listed in ``COMPOSITES``;
the ``*_scatter`` functions write through a view of a clone, as PyTorch defines them.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..base.user_frame import warn_at_user
from ..core import creation
from ..core.dispatch import composite
from ..core.arguments import int_argument, refuse_non_tensors
from ..core.tensor import _wrap_dim
from ._util import Tensor, warn_once
from .movement import cat, flip, split, stack
from .reduce import vector_norm

__all__ = ["diagonal_scatter", "select_scatter", "slice_scatter", "diag_embed", "diagflat", "rot90", "ravel",
           "dsplit", "hsplit", "vsplit", "split_with_sizes", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
           "repeat_interleave", "masked_scatter", "put", "index_reduce", "segment_reduce", "addbmm", "addmv", "addr",
           "adjoint", "cross", "positive", "block_diag", "cartesian_prod", "combinations", "tril_indices", "triu_indices", "vander",
           "trapezoid", "trapz", "cumulative_trapezoid", "gradient", "cdist", "chain_matmul", "unravel_index", "row_stack",
           "meshgrid", "narrow_copy", "nonzero_static"]


# ---------------------------------------------------------------- scatters into views
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """``input`` with its ``offset`` diagonal (over ``dim1``, ``dim2``) replaced by ``src``: an
    ``index_put`` at the diagonal's flat positions, laid out as ``input.diagonal(...)`` lays them out."""
    if _DISPATCH.functions is not None and has_tensor_like((input, src)):
        return handle_torch_function(diagonal_scatter, (input, src), input, src, offset=offset, dim1=dim1, dim2=dim2)
    d1, d2 = _wrap_dim(dim1, input.ndim, "diagonal_scatter"), _wrap_dim(dim2, input.ndim, "diagonal_scatter")
    positions = np.diagonal(np.arange(input.numel()).reshape(tuple(input.shape)), offset, d1, d2)
    if positions.shape != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(positions.shape)}")
    index = creation.tensor(np.ascontiguousarray(positions).reshape(-1), device=input.device)
    flat = input.reshape(-1).index_put((index,), src.reshape(-1).to(input.dtype))
    return flat.reshape(tuple(input.shape))


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, src)):
        return handle_torch_function(select_scatter, (input, src), input, src, dim, index)
    out = input.clone()
    view = out.select(dim, index)
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(view.shape)}")
    view.copy_(src)
    return out


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:
    """``input`` with the slice ``start:end:step`` of ``dim`` replaced by ``src``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, src)):
        return handle_torch_function(slice_scatter, (input, src), input, src, dim=dim, start=start, end=end,
                                     step=step)
    out = input.clone()
    d = _wrap_dim(dim, input.ndim, "slice_scatter")
    key = (slice(None),) * d + (slice(start, end, step),)
    view = out[key]
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(view.shape)}")
    view.copy_(src)
    return out


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices (over ``dim1``, ``dim2``) whose ``offset`` diagonal is the last dim of ``input``."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(diag_embed, (input,), input, offset=offset, dim1=dim1, dim2=dim2)
    nd = input.ndim + 1
    d1, d2 = _wrap_dim(dim1, nd, "diag_embed"), _wrap_dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] + abs(offset) if input.ndim else 1 + abs(offset)
    batch = list(input.shape[:-1])
    shape = []
    for i in range(nd):
        shape.append(n if i in (d1, d2) else batch.pop(0))
    zeros = creation.zeros(tuple(shape), dtype=input.dtype, device=input.device)
    return diagonal_scatter(zeros, input, offset, d1, d2)


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A 2-d matrix with the flattened ``input`` on its ``offset`` diagonal."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(diagflat, (input,), input, offset=offset)
    return diag_embed(input.reshape(-1), offset)


# ---------------------------------------------------------------- rotations, splits, repeats
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane ``dims`` (from the first axis towards the second)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, dims)):
        return handle_torch_function(rot90, (input, dims), input, k=k, dims=dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = _wrap_dim(dims[0], input.ndim, "rot90"), _wrap_dim(dims[1], input.ndim, "rot90")
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    k %= 4
    if k == 1:
        return flip(input, b).transpose(a, b)
    if k == 2:
        return flip(input, a, b)
    if k == 3:
        return flip(input, a).transpose(a, b)
    return input.clone()


def ravel(input: Tensor) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(ravel, (input,), input)
    return input.reshape(-1)


def _split_axis(input: Tensor, sections, dim: int, name: str, min_dims: int):
    try:
        nd = input.ndim
    except AttributeError:
        refuse_non_tensors(name, input)
        raise
    if nd < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                           f"{input.shape[dim]} is not divisible by the split_size {sections}!")
    return input.tensor_split(sections, dim)


def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along the third dim."""
    if _DISPATCH.functions is not None and has_tensor_like((input, indices_or_sections)):
        return handle_torch_function(dsplit, (input, indices_or_sections), input, indices_or_sections)
    return _split_axis(input, indices_or_sections, 2, "dsplit", 3)


def hsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along the second dim (the first for 1-d input)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, indices_or_sections)):
        return handle_torch_function(hsplit, (input, indices_or_sections), input, indices_or_sections)
    return _split_axis(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit", 1)


def vsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along the first dim."""
    if _DISPATCH.functions is not None and has_tensor_like((input, indices_or_sections)):
        return handle_torch_function(vsplit, (input, indices_or_sections), input, indices_or_sections)
    return _split_axis(input, indices_or_sections, 0, "vsplit", 2)


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((input, split_sizes)):
        return handle_torch_function(split_with_sizes, (input, split_sizes), input, split_sizes, dim=dim)
    d = _wrap_dim(dim, input.ndim, "split_with_sizes")
    if sum(split_sizes) != input.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input.shape[d]} (input tensor's "
                           f"size at dimension {d}), but got split_sizes={list(split_sizes)}")
    return split(input, list(split_sizes), d)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(unsafe_chunk, (input,), input, chunks, dim=dim)
    return input.chunk(chunks, dim)


def unsafe_split(input: Tensor, split_size, dim: int = 0) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((input, split_size)):
        return handle_torch_function(unsafe_split, (input, split_size), input, split_size, dim=dim)
    return split(input, split_size, dim)


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    if _DISPATCH.functions is not None and has_tensor_like((input, split_sizes)):
        return handle_torch_function(unsafe_split_with_sizes, (input, split_sizes), input, split_sizes, dim=dim)
    return split_with_sizes(input, split_sizes, dim)


def repeat_interleave(input, repeats=None, dim: int | None = None, *, output_size: int | None = None,
                      axis=None) -> Tensor:
    """Repeat each element (slice along ``dim``) ``repeats`` times; with only a tensor of counts,
    the indices ``0, 0, 1, ...`` that many times."""
    if _DISPATCH.functions is not None and has_tensor_like((input, repeats, axis)):
        return handle_torch_function(repeat_interleave, (input, repeats, axis), input, repeats=repeats, dim=dim,
                                     output_size=output_size, axis=axis)
    dim = dim if axis is None else axis
    if repeats is None:
        counts = input.tolist()
        if input.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if any(c < 0 for c in counts):
            raise RuntimeError("repeats can not be negative")
        return creation.tensor(np.repeat(np.arange(len(counts)), counts), dtype=input.dtype, device=input.device)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, input.ndim, "repeat_interleave")
    n = x.shape[d] if x.ndim else 1
    counts = [int(repeats)] * n if not isinstance(repeats, Tensor) or repeats.numel() == 1 and repeats.ndim == 0 \
        else repeats.tolist()
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim <= 1:
        counts = [int(repeats.reshape(-1)[0])] * n
    if len(counts) != n:
        raise RuntimeError("repeats must have the same size as input along dim")
    if any(c < 0 for c in counts):
        raise RuntimeError("repeats can not be negative")
    index = creation.tensor(np.repeat(np.arange(n), counts), dtype=_dtype.int64, device=input.device)
    if output_size is not None and output_size != index.shape[0]:
        raise RuntimeError("allocated size does not match required size")
    return x.index_select(d, index) if x.ndim else x.reshape(1).index_select(0, index)


# ---------------------------------------------------------------- masked, flat and index writes
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with the positions where ``mask`` holds filled, in order, from ``source``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, mask, source)):
        return handle_torch_function(masked_scatter, (input, mask, source), input, mask, source)
    if mask.dtype != _dtype.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{str(mask.dtype).split('.')[-1]}")
    shape = tuple(np.broadcast_shapes(tuple(input.shape), tuple(mask.shape)))
    base = input.expand(*shape).reshape(-1)
    where_ = mask.expand(*shape).reshape(-1).nonzero().reshape(-1)
    k = where_.shape[0]
    if source.numel() < k:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in mask")
    return base.index_put((where_,), source.reshape(-1)[:k]).reshape(shape)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """``input`` (read flat) with ``source`` written (or added) at flat positions ``index``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, index, source)):
        return handle_torch_function(put, (input, index, source), input, index, source, accumulate=accumulate)
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = input.numel()
    flat_index = index.reshape(-1)
    flat_index = flat_index.where(flat_index >= 0, flat_index + n)
    return input.reshape(-1).index_put((flat_index,), source.reshape(-1), accumulate).reshape(tuple(input.shape))


_index_reduce_warned = False


def _warn_beta_once() -> None:
    """ATen's TORCH_WARN_ONCE on index_reduce's first call in the process, shown at the program's line."""
    global _index_reduce_warned
    _index_reduce_warned = True
    warn_at_user("index_reduce() is in beta and the API may change at any time.")


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """Reduce (``prod``, ``mean``, ``amax``, ``amin``) the slices of ``source`` into ``input`` at ``index``
    along ``dim``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, index, source)):
        return handle_torch_function(index_reduce, (input, index, source), input, dim, index, source, reduce,
                                     include_self=include_self)
    if not _index_reduce_warned:
        _warn_beta_once()
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d = _wrap_dim(dim, input.ndim, "index_reduce") if input.ndim else 0
    shape = [1] * source.ndim
    shape[d] = index.shape[0]
    expanded = index.reshape(shape).expand(*source.shape)
    return input.scatter_reduce(d, expanded, source, reduce, include_self=include_self)


_SEGMENT_EMPTY = {"amax": float("-inf"), "amin": float("inf"), "sum": 0.0, "prod": 1.0, "mean": float("nan")}


def segment_reduce(data: Tensor, reduce: str, *, lengths: Tensor | None = None, indices: Tensor | None = None,
                   offsets: Tensor | None = None, axis: int = 0, unsafe: bool = False, initial=None) -> Tensor:
    """Reduce (``sum``, ``mean``, ``max``, ``min``, ``prod``) consecutive segments of ``data`` along ``axis``,
    their sizes given by ``lengths`` (or ``offsets``), as PyTorch's (graph libraries' pooling): an empty
    segment gives ``initial``, or the reduction's identity (-inf, inf, 0, 1; NaN for the mean); ``initial``
    takes part in every segment (the mean divides by the segment's own length)."""
    if _DISPATCH.functions is not None and has_tensor_like((data, lengths, offsets)):
        return handle_torch_function(segment_reduce, (data, lengths, offsets), data, reduce, lengths=lengths,
                                     indices=indices, offsets=offsets, axis=axis, unsafe=unsafe, initial=initial)
    how = {"max": "amax", "min": "amin", "sum": "sum", "mean": "mean", "prod": "prod"}.get(reduce)
    if how is None:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    axis = _wrap_dim(axis, data.ndim)
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if lengths is not None:
        sizes = np.asarray(lengths.detach().cpu().numpy(), dtype=np.int64)
    else:
        off = np.asarray(offsets.detach().cpu().numpy(), dtype=np.int64)
        sizes = off[..., 1:] - off[..., :-1]
    if sizes.ndim - 1 != axis:
        raise RuntimeError("segment_reduce(): Expected axis to be the last dimension of lengths but got "
                           f"{axis}.")
    if not unsafe and (np.any(sizes < 0) or np.any(sizes.sum(-1) != data.shape[axis])):
        raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                           "data.size(lengths.dim()-1) when !unsafe.")
    if not data.dtype.is_floating_point:
        raise NotImplementedError(f'"_segment_reduce_cpu" not implemented for \'{data.dtype.scalar_type}\'')
    lead = sizes.shape[:-1]
    k = sizes.shape[-1]
    ids = np.empty(lead + (data.shape[axis],), dtype=np.int64)
    for row in np.ndindex(*lead):
        ids[row] = np.repeat(np.arange(k), sizes[row])
    rest = tuple(data.shape[axis + 1:])
    index = creation.tensor(ids.reshape(ids.shape + (1,) * len(rest)), dtype=_dtype.int64, device=data.device)
    index = index.expand(*data.shape)
    out_shape = lead + (k,) + rest
    fill = _SEGMENT_EMPTY[how] if initial is None else float(initial)
    start = creation.full(out_shape, fill, dtype=data.dtype, device=data.device)
    if how == "mean":
        if initial is None:
            return start.scatter_reduce(axis, index, data, "mean", include_self=False)
        total = start.scatter_reduce(axis, index, data, "sum", include_self=True)
        count = creation.tensor(sizes.reshape(sizes.shape + (1,) * len(rest)), dtype=data.dtype, device=data.device)
        return (total / count.clamp(min=1)).where(count > 0, start)
    return start.scatter_reduce(axis, index, data, how, include_self=initial is not None)


# ---------------------------------------------------------------- products
def _beta_alpha(input: Tensor, product: Tensor, beta, alpha) -> Tensor:
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:                         # PyTorch ignores input (even NaN/inf) when beta is 0
        return scaled.expand(*np.broadcast_shapes(tuple(input.shape), tuple(scaled.shape))).clone()
    return (input if beta == 1 else input * beta) + scaled


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, batch1, batch2, beta, alpha)):
        return handle_torch_function(addbmm, (input, batch1, batch2, beta, alpha), input, batch1, batch2, beta=beta,
                                     alpha=alpha)
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    return composite("addbmm", lambda i, b1, b2: _beta_alpha(i, b1.matmul(b2).sum(0), beta, alpha), input, batch1,
                     batch2)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * mat @ vec``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, mat, vec, beta, alpha)):
        return handle_torch_function(addmv, (input, mat, vec, beta, alpha), input, mat, vec, beta=beta, alpha=alpha)
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    return composite("addmv", lambda i, m, v: _beta_alpha(i, m.matmul(v), beta, alpha), input, mat, vec)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, vec1, vec2, beta, alpha)):
        return handle_torch_function(addr, (input, vec1, vec2, beta, alpha), input, vec1, vec2, beta=beta,
                                     alpha=alpha)
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D")
    return composite("addr", lambda i, a, b: _beta_alpha(i, a.unsqueeze(1) * b.unsqueeze(0), beta, alpha), input,
                     vec1, vec2)


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (a transpose of a real tensor)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(adjoint, (input,), input)
    if input.ndim < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return input.transpose(-2, -1).conj()


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The 3-d cross product along ``dim`` (the first dim of size 3 when None, with PyTorch's warning)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, other)):
        return handle_torch_function(cross, (input, other), input, other, dim=dim)
    if input.dtype != other.dtype:   # PyTorch's kernel takes one dtype: no promotion
        raise RuntimeError(f"expected scalar type {input.dtype.scalar_type} but found {other.dtype.scalar_type}")
    shape = tuple(np.broadcast_shapes(tuple(input.shape), tuple(other.shape)))
    a, b = input.expand(*shape), other.expand(*shape)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    d = _wrap_dim(dim, len(shape), "cross")
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and "
                           f"{other.shape[d]}")
    a0, a1, a2 = a.unbind(d)
    b0, b1, b2 = b.unbind(d)
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def positive(input: Tensor) -> Tensor:
    """``input`` itself (refused for bool, as in PyTorch)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(positive, (input,), input)
    if input.dtype == _dtype.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# ---------------------------------------------------------------- assembling and index grids
def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix of the (0-, 1- or 2-d) ``tensors``."""
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(block_diag, tensors, *tensors)
    mats = []
    for t in tensors:
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {len(mats)} "
                               f"has {t.ndim} dimensions")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return creation.zeros((1, 0))
    dtype = _dtype.promote_types(mats[0].dtype, mats[0].dtype)
    for m in mats[1:]:
        dtype = _dtype.promote_types(dtype, m.dtype)
    cols = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        right = cols - left - m.shape[1]
        pieces = [creation.zeros((m.shape[0], left), dtype=dtype, device=m.device), m.to(dtype),
                  creation.zeros((m.shape[0], right), dtype=dtype, device=m.device)]
        rows.append(cat(pieces, 1))
        left += m.shape[1]
    return cat(rows, 0)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of one element from each 1-d tensor, as rows (a 1-d result for one input)."""
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(cartesian_prod, tensors, *tensors)
    if len(tensors) == 1:
        return tensors[0]
    grids = [g.reshape(-1) for g in _meshgrid_ij(tensors)]
    return stack(grids, 1)


def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids of 0/1-d tensors: ``"ij"`` (matrix, the default with PyTorch's warning) or ``"xy"``
    (Cartesian: the first two grid dims swapped). The grids are broadcast views of the inputs."""
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(meshgrid, tensors, *tensors, indexing=indexing)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    if any(t.ndim > 1 for t in tensors):
        raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    swap = indexing == "xy" and len(tensors) >= 2
    order = (tensors[1], tensors[0], *tensors[2:]) if swap else tensors
    grids = _meshgrid_ij(order)
    return (grids[1], grids[0], *grids[2:]) if swap else tuple(grids)


def _meshgrid_ij(tensors):
    n = len(tensors)
    shape = tuple(t.numel() for t in tensors)
    return [t.reshape([-1 if i == j else 1 for j in range(n)]).expand(*shape) for i, t in enumerate(tensors)]


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """Length-``r`` combinations of the elements of a 1-d tensor, as rows."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(combinations, (input,), input, r=r, with_replacement=with_replacement)
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    n = input.shape[0]
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = list(make(range(n), r))
    if r == 0:
        return creation.zeros((0,), dtype=input.dtype, device=input.device)
    if not idx:
        return creation.zeros((0, r), dtype=input.dtype, device=input.device)
    index = creation.tensor(np.asarray(idx, dtype=np.int64).reshape(-1), device=input.device)
    return input.index_select(0, index).reshape(len(idx), r)


def _tri_indices(row: int, col: int, offset: int, upper: bool, dtype, device) -> Tensor:
    name = "triu_indices" if upper else "tril_indices"
    row, col = int_argument(row, name, "row", 1), int_argument(col, name, "col", 2)
    offset = int_argument(offset, name, "offset", 3)
    r, c = np.triu_indices(row, offset, col) if upper else np.tril_indices(row, offset, col)
    return creation.tensor(np.stack([r, c]).astype(np.int64), dtype=dtype, device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None,
                 pin_memory: bool = False) -> Tensor:
    """The (2, N) coordinates of the lower triangle of a ``row x col`` matrix."""
    if _DISPATCH.functions is not None and has_tensor_like((row,)):
        return handle_torch_function(tril_indices, (row,), row, col, offset=offset, dtype=dtype, device=device,
                                     layout=layout, pin_memory=pin_memory)
    return _tri_indices(row, col, offset, False, dtype or _dtype.int64, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None,
                 pin_memory: bool = False) -> Tensor:
    """The (2, N) coordinates of the upper triangle of a ``row x col`` matrix."""
    if _DISPATCH.functions is not None and has_tensor_like((row,)):
        return handle_torch_function(triu_indices, (row,), row, col, offset=offset, dtype=dtype, device=device,
                                     layout=layout, pin_memory=pin_memory)
    return _tri_indices(row, col, offset, True, dtype or _dtype.int64, device)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix: columns are powers of ``x`` (decreasing unless ``increasing``)."""
    if _DISPATCH.functions is not None and has_tensor_like((x,)):
        return handle_torch_function(vander, (x,), x, N=N, increasing=increasing)
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if n == 0:
        return creation.zeros((x.shape[0], 0), dtype=x.dtype, device=x.device)
    base = x if x.is_floating_point() else x.long()
    cols = [creation.ones_like(base)]
    for _ in range(1, n):
        cols.append(cols[-1] * base)
    out = stack(cols, 1)
    return out if increasing else out.flip(1)


def _trapezoid_pieces(y: Tensor, x, dx, dim: int):
    d = _wrap_dim(dim, y.ndim, "trapezoid")
    n = y.shape[d]
    mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2 if n > 1 else None
    if x is None:
        return mid, (1.0 if dx is None else dx), d
    xs = x if x.ndim == y.ndim or x.ndim != 1 else x.reshape([-1 if i == d else 1 for i in range(y.ndim)])
    spacing = xs.narrow(d if xs.ndim == y.ndim else -1, 1, n - 1) - xs.narrow(d if xs.ndim == y.ndim else -1, 0, n - 1)
    return mid, spacing, d


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim`` (unit or ``dx`` spacing, or sample points ``x``)."""
    if _DISPATCH.functions is not None and has_tensor_like((y, x)):
        return handle_torch_function(trapezoid, (y, x), y, x=x, dx=dx, dim=dim)
    mid, spacing, d = _trapezoid_pieces(y, x, dx, dim)
    if mid is None:
        return y.sum(d) * 0.0
    return (mid * spacing).sum(d)


def trapz(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((y, x)):
        return handle_torch_function(trapz, (y, x), y, x=x, dx=dx, dim=dim)
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one element shorter)."""
    if _DISPATCH.functions is not None and has_tensor_like((y, x)):
        return handle_torch_function(cumulative_trapezoid, (y, x), y, x=x, dx=dx, dim=dim)
    mid, spacing, d = _trapezoid_pieces(y, x, dx, dim)
    if mid is None:
        return y.narrow(d, 0, 0)
    return (mid * spacing).cumsum(d)


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """``torch.gradient``: the derivative along each of ``dim`` (every dim by default) by central
    differences inside and one-sided ones of ``edge_order`` (1 or 2) at the ends, as NumPy's
    ``gradient``; ``spacing`` is one number, one per dim, or one coordinate tensor per dim (unevenly
    spaced samples). Differentiable: slices and arithmetic."""
    if _DISPATCH.functions is not None and has_tensor_like((input, spacing, dim)):
        return handle_torch_function(gradient, (input, spacing, dim), input, spacing=spacing, dim=dim,
                                     edge_order=edge_order)
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [_wrap_dim(d, input.ndim, "gradient") for d in dims]
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or a list of length "
                           f"{len(dims)}, but got a list of length {len(spacings)}")
    out = []
    for d, h in zip(dims, spacings):
        n = input.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        out.append(_gradient_along(input, d, n, h, edge_order))
    return tuple(out)


def _gradient_along(f: Tensor, d: int, n: int, h, edge_order: int) -> Tensor:
    def at(lo, length):
        return f.narrow(d, lo, length)
    if not isinstance(h, Tensor):   # evenly spaced: central differences over 2h
        inner = (at(2, n - 2) - at(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first, last = (at(1, 1) - at(0, 1)) / h, (at(n - 1, 1) - at(n - 2, 1)) / h
        else:
            first = (at(0, 1) * -1.5 + at(1, 1) * 2.0 - at(2, 1) * 0.5) / h
            last = (at(n - 3, 1) * 0.5 - at(n - 2, 1) * 2.0 + at(n - 1, 1) * 1.5) / h
        return cat([first, inner, last], d)
    if h.ndim != 1 or h.shape[0] != n:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and to have one "
                           f"dimension of size {n}, but got coordinates of shape {list(h.shape)}")
    shape = [-1 if i == d else 1 for i in range(f.ndim)]
    dx = (h[1:] - h[:-1]).reshape(shape)
    hl, hr = dx.narrow(d, 0, n - 2), dx.narrow(d, 1, n - 2)
    inner = (hl * hl * at(2, n - 2) - hr * hr * at(0, n - 2) + (hr * hr - hl * hl) * at(1, n - 2)) / (hl * hr * (hl + hr))
    if edge_order == 1:
        first = (at(1, 1) - at(0, 1)) / dx.narrow(d, 0, 1)
        last = (at(n - 1, 1) - at(n - 2, 1)) / dx.narrow(d, n - 2, 1)
    else:
        a1, a2 = dx.narrow(d, 0, 1), dx.narrow(d, 1, 1)
        first = (at(0, 1) * -(2 * a1 + a2) / (a1 * (a1 + a2)) + at(1, 1) * (a1 + a2) / (a1 * a2)
                 - at(2, 1) * a1 / (a2 * (a1 + a2)))
        b1, b2 = dx.narrow(d, n - 3, 1), dx.narrow(d, n - 2, 1)
        last = (at(n - 3, 1) * b2 / (b1 * (b1 + b2)) - at(n - 2, 1) * (b2 + b1) / (b1 * b2)
                + at(n - 1, 1) * (2 * b2 + b1) / (b2 * (b1 + b2)))
    return cat([first, inner, last], d)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of ``x1`` and each row of ``x2`` (batched over leading dims)."""
    if _DISPATCH.functions is not None and has_tensor_like((x1, x2)):
        return handle_torch_function(cdist, (x1, x2), x1, x2, p=p, compute_mode=compute_mode)
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {x.dtype.scalar_type}")
    # two dtypes PyTorch refuses (a float16/bfloat16 operand autocast's fp32 policy for cdist casts to
    # float32 first; here it computes promoted)
    if x1.dtype != x2.dtype and not {x1.dtype, x2.dtype} & {_dtype.float16, _dtype.bfloat16}:
        raise RuntimeError(f"expected scalar type {x1.dtype.scalar_type} but found {x2.dtype.scalar_type}")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if p == 2 and x1.numel() and x2.numel() and (compute_mode == "use_mm_for_euclid_dist" or (
            compute_mode == "use_mm_for_euclid_dist_if_necessary" and (x1.shape[-2] > 25 or x2.shape[-2] > 25))):
        return _euclidean_dist(x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == 0:
        return (diff != 0).sum(-1).to(x1.dtype)
    if p == float("inf"):
        return diff.abs().amax(-1)
    # ATen's distance loop adds each pair's terms one at a time: the 1-norm's sequential sum
    if p == 2:
        # the gradient of sqrt at a zero distance is 0 here, as PyTorch's cdist backward gives
        sq = vector_norm(diff * diff, 1, dim=-1)
        safe = sq.where(sq > 0, 1.0)
        return safe.sqrt().where(sq > 0, 0.0)
    return vector_norm(diff, p, dim=-1)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _euclidean_dist(x1: Tensor, x2: Tensor) -> Tensor:
    """ATen's matrix-product form of the p=2 distance (cdist's when asked, or by default when an input
    has more than 25 rows): ``|x1|^2 - 2 x1.x2 + |x2|^2`` as one GEMM, clamped at 0, with its
    cancellation (a row's distance to itself need not be 0, as in PyTorch); the gradient is 0
    where the distance is, as ATen's ``_euclidean_dist_backward``."""
    x1_norm = x1.pow(2).sum(-1, keepdim=True)
    x2_norm = x2.pow(2).sum(-1, keepdim=True)
    x1_ = cat([x1.mul(-2), x1_norm, creation.ones_like(x1_norm)], -1)
    x2_ = cat([x2, creation.ones_like(x2_norm), x2_norm], -1)
    squared = x1_.matmul(x2_.mT)
    positive = squared > 0
    return squared.where(positive, 1.0).sqrt().where(positive, 0.0)


def chain_matmul(*matrices: Tensor) -> Tensor:
    """``matrices[0] @ matrices[1] @ ...`` (deprecated in PyTorch in favour of ``linalg.multi_dot``)."""
    if _DISPATCH.functions is not None and has_tensor_like(matrices):
        return handle_torch_function(chain_matmul, matrices, *matrices)
    warn_once("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
              "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
              "parameters.")
    if len(matrices) == 1:
        return matrices[0].clone()
    out = matrices[0]
    for m in matrices[1:]:
        out = out.matmul(m)
    return out


def unravel_index(indices, shape) -> tuple:
    """Flat indices into ``shape`` as one coordinate tensor per dim."""
    if _DISPATCH.functions is not None and has_tensor_like((indices, shape)):
        return handle_torch_function(unravel_index, (indices, shape), indices, shape)
    idx = indices if isinstance(indices, Tensor) else creation.tensor(indices)
    if idx.is_floating_point() or idx.dtype == _dtype.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {idx.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = int(np.prod(shape, dtype=np.int64))
    if idx.numel() and (int(idx.min()) < -total or int(idx.max()) >= total):
        raise RuntimeError("'indices' must be in range [-{0}, {0})".format(total) if total else
                           "'indices' must be in range")
    flat = idx.where(idx >= 0, idx + total)
    out = []
    for size in reversed(shape):
        out.append(flat.remainder(size))
        flat = flat.div(size, rounding_mode="floor")
    return tuple(reversed(out))


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``input.narrow(...)`` copied out (no memory shared)."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(narrow_copy, (input,), input, dim, start, length)
    return input.narrow(dim, start, length).clone()


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero()`` cut or padded with ``fill_value`` to exactly ``size`` rows."""
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(nonzero_static, (input,), input, size=size, fill_value=fill_value)
    found = input.nonzero()
    if found.shape[0] >= size:
        return found[:size]
    pad = creation.full((size - found.shape[0], input.ndim), fill_value, dtype=found.dtype, device=found.device)
    return cat([found, pad], 0)


def row_stack(tensors) -> Tensor:
    """``vstack`` under its NumPy alias."""
    if _DISPATCH.functions is not None and has_tensor_like((tensors,)):
        return handle_torch_function(row_stack, (tensors,), tensors)
    if isinstance(tensors, (list, tuple)) and not tensors:
        raise RuntimeError("vstack expects a non-empty TensorList")
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


# ---------------------------------------------------------------- Tensor methods
def _unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Every window of ``size`` elements along ``dimension``, ``step`` apart, as a new last dim
    (a copy: writes to the result do not reach ``self``)."""
    d = _wrap_dim(dimension, self.ndim, "unfold") if self.ndim else 0
    x = self if self.ndim else self.reshape(1)
    n = x.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (n - size) // step + 1
    index = (np.arange(count)[:, None] * step + np.arange(size)).reshape(-1)
    picked = x.index_select(d, creation.tensor(index, device=x.device))
    shape = tuple(x.shape[:d]) + (count, size) + tuple(x.shape[d + 1:])
    out = picked.reshape(shape).movedim(d + 1, -1)
    return out if self.ndim else out.reshape(count, size)


def _fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = min(self.shape)
    if self.ndim == 2:
        rows, cols = self.shape
        step = cols + 1
        end = rows * cols if wrap or rows <= cols else cols * cols
        flat = np.arange(0, min(end, rows * cols), step)
    else:
        stride = sum(int(np.prod(self.shape[i + 1:])) for i in range(self.ndim))
        flat = np.arange(n) * stride
    index = creation.tensor(flat.astype(np.int64), device=self.device)
    return self.copy_(self.reshape(-1).index_fill(0, index, fill_value).reshape(tuple(self.shape)))


def _sum_to_size(self: Tensor, *size) -> Tensor:
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    lead = self.ndim - len(shape)
    if lead < 0 or any(s != 1 and s != n for s, n in zip(shape, self.shape[lead:])):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(self.shape)}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and self.shape[lead + i] != 1)
    out = self.sum(dims, keepdim=True) if dims else self
    return out.reshape(shape)


def _in_place(fn):
    def method(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    return method


def _bmm_inplace(fn):
    def method(self, *args, beta=1, alpha=1):
        return self.copy_(fn(self, *args, beta=beta, alpha=alpha))
    method.__name__ = fn.__name__ + "_"
    return method


def _addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    return self.copy_(self.addmm(mat1, mat2, beta=beta, alpha=alpha))


def _baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    return self.copy_(self.baddbmm(batch1, batch2, beta=beta, alpha=alpha))


METHODS = ("diagonal_scatter", "select_scatter", "slice_scatter", "diag_embed", "diagflat", "rot90", "ravel", "dsplit",
           "hsplit", "vsplit", "split_with_sizes", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
           "repeat_interleave", "masked_scatter", "put", "index_reduce", "addbmm", "addmv", "addr", "adjoint",
           "cross", "positive", "narrow_copy", "nonzero_static")
PROPERTIES = {"H": lambda self: adjoint(self) if self.ndim == 2 else _refuse_H(self),
              "mH": lambda self: adjoint(self)}
OPERATORS = {"unfold": _unfold, "fill_diagonal_": _fill_diagonal_, "sum_to_size": _sum_to_size,
             "masked_scatter_": _in_place(masked_scatter), "index_reduce_": _in_place(index_reduce),
             "put_": lambda self, index, source, accumulate=False: self.copy_(put(self, index, source, accumulate)),
             "addbmm_": _bmm_inplace(addbmm), "addmv_": _bmm_inplace(addmv), "addr_": _bmm_inplace(addr),
             "addmm_": _addmm_, "baddbmm_": _baddbmm_,
             "cumsum_": lambda self, dim, *, dtype=None: self.copy_(self.cumsum(dim, dtype=dtype)),
             "cumprod_": lambda self, dim, *, dtype=None: self.copy_(self.cumprod(dim, dtype=dtype))}


def _refuse_H(self: Tensor):
    raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")


# ("diag_embed" is also linalg's internal op that builds diagonals, and cumsum_/cumprod_ resolve to the
# cumsum/cumprod ops, so those are not listed)
COMPOSITES = {name: "views and ops of the existing families (see engine/ops/shaping.py)" for name in
              METHODS + tuple(PROPERTIES) + tuple(OPERATORS) + tuple(__all__)
              if name not in ("diag_embed", "cumsum_", "cumprod_")}
