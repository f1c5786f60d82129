"""Sparse COO tensors: construction, conversion, structure and the sparse products.

A sparse tensor is a Tensor whose data is a ``COOArray`` (``base/coo.py``), so every op here
is an ordinary declared ``Op`` and the tape, modes and autograd see it. Dense ops need no
sparse variant where the array answers them (``+``, scalar ``*``, ``t()``, ``mm``/``matmul``/
``@`` with a dense right operand, whose vjp gives the sparse operand a dense gradient as
PyTorch's does); every other dense op on a sparse tensor raises PyTorch's NotImplementedError.
``torch.sparse.mm`` is its own op because its gradient to the sparse operand is sparse, with
that operand's pattern.
"""
from __future__ import annotations

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base.coo import COOArray
from ..base.dtype import int64
from ..base.layout import sparse_coo, strided
from ..kernels.gemm import coo_product
from ..core.creation import tensor as _tensor
from ..core.dispatch import apply
from ..core.registry import NONE, OTHERS, Op
from ._util import Tensor, _wrap_dim
from .linalg import mm
from ._sparse_invariants import (_invariant_checks, _warn_if_checks_implicit,  # noqa: F401  (the setting lives there)
                                 invariant_checks_enabled, set_invariant_checks)
from . import sparse_compressed as _compressed
from .sparse_compressed import (BLOCK_LAYOUTS, COMPRESSED_LAYOUTS, is_compressed, layout_name, sparse_bsc_tensor,
                                sparse_bsr_tensor, sparse_compressed_tensor, sparse_csc_tensor, sparse_csr_tensor,
                                to_sparse_bsc, to_sparse_bsr, to_sparse_csc, to_sparse_csr)

# the compressed layouts' constructors and conversions are declared in sparse_compressed.py and
# published here, with the COO family's
__all__ = ["sparse_coo_tensor", "spmm", "dsmm", *_compressed.__all__]
METHODS = ("to_dense", "to_sparse", "to_sparse_coo", "coalesce", "sparse_mask", *_compressed.METHODS)
OPERATORS = dict(_compressed.OPERATORS)


def _is_coo(t) -> bool:
    return isinstance(t, Tensor) and type(t._data) is COOArray


# ---------------------------------------------------------------- construction
def _values_at(g: Tensor, indices: Tensor) -> Tensor:
    """The entries of ``g`` (dense, or sparse made dense) at each column of ``indices``."""
    dense = g.to_dense()
    if not indices.shape[1]:
        return dense.new_zeros((0,) + tuple(dense.shape[indices.shape[0]:]))
    return dense[tuple(indices.unbind(0))]


_coo = Op("sparse_coo_tensor",
          lambda xp, indices, values, *, size, coalesced: COOArray(xp, indices, values, size, coalesced),
          lambda g, out, indices, values, *, size, coalesced: (None, _values_at(g, indices)), saves=NONE)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, requires_grad: bool = False,
                      check_invariants=None, is_coalesced=None) -> Tensor:
    """A sparse COO tensor with ``values[k]`` at ``indices[:, k]`` (``torch.sparse_coo_tensor``).

    Args:
        indices: ``(sparse_dim, nnz)`` integers; values: ``(nnz, *dense_dims)``; size: the full
            shape (default: one past the largest index per sparse dim, then the dense dims).

    >>> s = tapelab.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> s.to_dense()
    tensor([[0., 2.],
            [3., 0.]])

    The indices are always checked against ``size`` (PyTorch checks them only with invariant checks on).
    """
    _warn_if_checks_implicit(check_invariants)
    if not isinstance(values, Tensor):
        values = _tensor(values, dtype=dtype, device=device)
    if not isinstance(indices, Tensor):
        indices = _tensor(indices, dtype=int64, device=values.device)
    if device is not None:
        values, indices = values.to(device), indices.to(device)
    if dtype is not None:
        values = values.to(dtype)
    if indices.dtype is not int64:
        indices = indices.to(int64)
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    nnz, sd = indices.shape[1], indices.shape[0]
    if values.ndim == 0 or values.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, "
                           f"nnz from values: {values.shape[0] if values.ndim else 0}")
    host = indices.detach().__array__()
    if size is None:
        size = tuple((host.max(axis=1) + 1).tolist() if nnz else [0] * sd) + tuple(values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sd + values.ndim - 1:
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim ({values.ndim - 1}), "
                           f"but got {len(size)}")
    if nnz:
        if host.min() < 0:
            raise RuntimeError(f"found negative index {int(host.min())} for dim {int(host.min(axis=1).argmin())}")
        for d, (top, n) in enumerate(zip(host.max(axis=1).tolist(), size)):
            if top >= n:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {n} but found index {top}")
    out = apply(_coo, indices, values, size=size, coalesced=bool(is_coalesced))
    return out.requires_grad_() if requires_grad else out


# ---------------------------------------------------------------- conversion
def _to_sparse_fwd(xp, x, *, sparse_dim):
    # an entry is kept where any of its dense-dim values is nonzero
    nz = xp.nonzero(x.reshape(x.shape[:sparse_dim] + (-1,)).any(axis=-1) if sparse_dim < x.ndim else x)
    return COOArray(xp, xp.stack(nz).astype(xp.int64), x[nz], x.shape, coalesced=True)


_to_sparse = Op("to_sparse", _to_sparse_fwd, lambda g, out, x, *, sparse_dim: (g.to_dense(),), saves=NONE,
                data_dependent="to_sparse (its nnz depends on the values)")
# the gradient lands on the coalesced pattern (a duplicated index must not receive it twice)
_to_dense = Op("to_dense", lambda xp, x: x.todense(), lambda g, out, x: (sparse_mask(g, x.coalesce()),), saves=NONE)


def to_sparse(input: Tensor, sparse_dim: int | None = None, *, layout=None, blocksize=None,
              dense_dim=None) -> Tensor:
    """The tensor as sparse COO (its nonzeros), or in ``layout`` (a compressed one, or strided: as is), as
    ``Tensor.to_sparse``; a tensor already in that layout is returned as is."""
    if layout is strided:
        return input
    if layout in COMPRESSED_LAYOUTS:
        if sparse_dim is not None:
            raise RuntimeError(f"to_sparse: sparse_dim argument must be None for the {layout} layout")
        src = f"{'dense' if input.layout is strided else layout_name(input)}_to_sparse"
        if layout in BLOCK_LAYOUTS and blocksize is None:
            raise RuntimeError(f"{src}: conversion from {layout_name(input)} to {_compressed.LAYOUT_NAMES[layout]} "
                               f"without blocksize argument given is not supported")
        if layout not in BLOCK_LAYOUTS and blocksize is not None:
            raise RuntimeError(f"{src}: conversion from {layout_name(input)} to {_compressed.LAYOUT_NAMES[layout]} "
                               f"with blocksize argument given is not supported")
        return _compressed.to_compressed(input, layout, blocksize, dense_dim)
    if layout not in (None, sparse_coo):
        raise RuntimeError(f"to_sparse: unknown layout {layout}")
    if _is_coo(input):
        return input
    if is_compressed(input):
        return _compressed.compressed_to_coo(input)
    sd = input.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < sd <= input.ndim:
        raise RuntimeError(f"sparse_dim must be in [1, {input.ndim}] for a {input.ndim}-d tensor, got {sd}")
    return apply(_to_sparse, input, sparse_dim=sd)


def to_sparse_coo(input: Tensor) -> Tensor:
    """The tensor as sparse COO (``Tensor.to_sparse_coo``)."""
    return to_sparse(input)


def to_dense(input: Tensor, dtype=None, *, masked_grad=None) -> Tensor:
    """The dense tensor a sparse one stands for (a dense tensor is returned as is)."""
    out = apply(_to_dense, input) if _is_coo(input) else _compressed.to_dense(input) if is_compressed(input) else input
    return out if dtype is None else out.to(dtype)


_coalesce = Op("coalesce", lambda xp, x: x.coalesce(), lambda g, out, x: (g,), saves=NONE)


def coalesce(input: Tensor) -> Tensor:
    """Entries sorted by index, duplicates summed; a coalesced tensor is returned as is."""
    return input if input._coo("coalesce").coalesced else apply(_coalesce, input)


def _mask_fwd(xp, x, mask):
    if type(x) is COOArray:
        raise NotImplementedError("sparse_mask: a sparse input is not supported; "
                                  "use input.to_dense().sparse_mask(mask)")
    return COOArray(xp, mask.indices, x[tuple(mask.indices)], x.shape, coalesced=mask.coalesced)


_sparse_mask = Op("sparse_mask", _mask_fwd, lambda g, out, x, mask: (g.to_dense(), None), saves=NONE)


def sparse_mask(input: Tensor, mask: Tensor) -> Tensor:
    """The entries of ``input`` at the indices of the sparse ``mask`` (its pattern as it is), as a sparse tensor."""
    if not _is_coo(mask):
        raise NotImplementedError("Could not run 'aten::sparse_mask' with arguments from the 'CPU' backend: "
                                  "the mask must be a sparse COO tensor")
    if tuple(input.shape) != tuple(mask.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size {list(input.shape)} "
                           f"but mask has size {list(mask.shape)}")
    return apply(_sparse_mask, input, mask)


# ---------------------------------------------------------------- structure
_values = Op("values", lambda xp, x: x.values,
             lambda g, out, x: (apply(_coo, x._indices(), g, size=tuple(x.shape), coalesced=x._data.coalesced),),
             saves=NONE, aliases=("_values",))
_indices = Op("indices", lambda xp, x: x.indices, None, saves=NONE, aliases=("_indices",))


def _coalesced(t: Tensor, what: str) -> None:
    if not t._coo(what).coalesced:
        raise RuntimeError(f"Cannot get {what} on an uncoalesced tensor, please call .coalesce() first")


def _values_method(self: Tensor) -> Tensor:
    if is_compressed(self):
        return _compressed.values(self)
    if not _is_coo(self):
        raise RuntimeError(f"values expected sparse tensor layout but got {layout_name(self)}")
    _coalesced(self, "values")
    return apply(_values, self)


def _indices_method(self: Tensor) -> Tensor:
    _coalesced(self, "indices")
    return apply(_indices, self)


def _raw_values(self: Tensor) -> Tensor:
    """The stored values as they are, outside autograd (PyTorch's ``_values`` is not differentiable)."""
    if is_compressed(self):
        return _compressed.values(self).detach()
    self._coo("_values")
    return apply(_values, self).detach()


def _raw_indices(self: Tensor) -> Tensor:
    self._coo("_indices")
    return apply(_indices, self)


OPERATORS.update({
    "values": _values_method,
    "indices": _indices_method,
    "_values": _raw_values,
    "_indices": _raw_indices,
})


# ---------------------------------------------------------------- products and sums
def _sparse_mm_vjp(g, out, a, b, *, sparse_grad):
    ga = None
    if a.requires_grad:
        ga = g @ b.mT
        if sparse_grad:
            ga = _compressed.at_pattern(ga, a) if is_compressed(a) else sparse_mask(ga, a.coalesce())
    # the transposed sparse operand through this op again (its forward is the sparse matrix's own
    # product on either backend, cupyx's included)
    gb = apply(_sparse_mm, a.mT, g, sparse_grad=sparse_grad) if b.requires_grad else None
    return ga, gb


# sparse_grad: torch.sparse.mm gives the sparse operand a sparse gradient with its pattern,
# torch.spmm (like mm and @) a dense one; torch.dsmm is spmm under its older name (linear_operator's KISS-GP)
_sparse_mm = Op("sparse_mm", lambda xp, a, b, *, sparse_grad: coo_product(xp, a, b) if type(a) is COOArray else a @ b,
                _sparse_mm_vjp, saves=OTHERS,
                aliases=("spmm", "dsmm"),
                # PyTorch's nodes: torch.sparse.mm's is SparseAddmmBackward0, spmm's (an mm) MmBackward0
                backward_name=lambda ndims, params: "SparseAddmmBackward0" if (params or {}).get("sparse_grad")
                else "MmBackward0")


def sparse_mm(mat1: Tensor, mat2: Tensor) -> Tensor:
    """``torch.sparse.mm``: sparse @ dense; the sparse operand's gradient is sparse with its pattern."""
    return _spmm(mat1, mat2, "torch.sparse.mm", True)


def spmm(input: Tensor, mat2: Tensor) -> Tensor:
    """``torch.spmm``: ``mm`` with a sparse first operand (its gradient is dense, as PyTorch's)."""
    if _DISPATCH.functions is not None and has_tensor_like((input, mat2)):
        return handle_torch_function(spmm, (input, mat2), input, mat2)
    return _spmm(input, mat2, "spmm", False) if _is_coo(input) or is_compressed(input) else mm(input, mat2)


dsmm = spmm


def _spmm(mat1: Tensor, mat2: Tensor, name: str, sparse_grad: bool) -> Tensor:
    if not (_is_coo(mat1) or is_compressed(mat1)) or mat2.layout is not strided:
        raise NotImplementedError(f"{name}: tapelab supports a sparse COO or compressed mat1 and a dense mat2")
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"{name}: expected 2-D matrices, got {mat1.ndim}-D and {mat2.ndim}-D")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
                           f"{mat2.shape[0]}x{mat2.shape[1]})")
    if mat1.dtype is not mat2.dtype:      # PyTorch's: the sparse operand's dtype expected (torch.sparse.mm of a CSR: the dense one's)
        want, got = (mat2, mat1) if is_compressed(mat1) and sparse_grad else (mat1, mat2)
        raise RuntimeError(f"expected scalar type {want.dtype.scalar_type} but found {got.dtype.scalar_type}")
    return apply(_sparse_mm, mat1, mat2, sparse_grad=sparse_grad)


def _sum_fwd(xp, x, *, dims):
    if dims is None:
        return x.values.sum()
    sd, keep = x.sparse_dim, [d for d in range(x.sparse_dim) if d not in dims]
    dense_axes = tuple(d - sd + 1 for d in dims if d >= sd)
    values = x.values.sum(axis=dense_axes) if dense_axes else x.values
    shape = tuple(s for d, s in enumerate(x.shape) if d not in dims)
    if not keep:                                  # every sparse dim summed: a dense result
        return values.sum(axis=0) if x.nnz else xp.zeros(shape, x.dtype)
    return COOArray(xp, x.indices[keep], values, shape).coalesce()


def _sum_vjp(g, out, x, *, dims):
    """Onto ``x``'s coalesced pattern: each entry receives the gradient of the sum it went into."""
    c = x.detach().coalesce()
    ix, shape = c._indices(), c._data.values.shape
    if dims is None:
        vals = g.expand(shape)
    elif not c._data.nnz:
        vals = g.new_zeros(shape)
    else:
        gd = g.to_dense()
        for d in dims:                            # re-insert the summed dims with size 1
            gd = gd.unsqueeze(d)
        key = tuple(ix[d] if d not in dims else ix[d] * 0 for d in range(c._data.sparse_dim))
        vals = gd[key].expand(shape)
    return (apply(_coo, ix, vals, size=tuple(x.shape), coalesced=True),)


_sparse_sum = Op("sparse_sum", _sum_fwd, _sum_vjp, saves=NONE)


def sparse_sum(input: Tensor, dim=None, dtype=None) -> Tensor:
    """``torch.sparse.sum``: over all entries (dense 0-d) or over ``dim`` (sparse while sparse dims remain)."""
    if is_compressed(input):      # PyTorch's reads COO indices, which a compressed tensor has none of
        if dim is None:
            raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got {layout_name(input)}")
        raise NotImplementedError(f"Could not run 'aten::_indices' with arguments from the 'SparseCsrCPU' backend. "
                                  f"torch.sparse.sum(input, dim) takes a sparse COO tensor "
                                  f"(input.to_sparse_coo()); input.sum() sums a {layout_name(input)} tensor")
    input._coo("sparse.sum")
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        return apply(_sparse_sum, input, dims=None)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(sorted({_wrap_dim(d, input.ndim, "sparse.sum") for d in dims}))
    return apply(_sparse_sum, input, dims=dims)

