"""Sparse compressed tensors (CSR, CSC, BSR, BSC): construction, conversion, structure.

A compressed tensor is a Tensor whose data is a ``CompressedArray`` (``base/compressed.py``), so
every op here is an ordinary declared ``Op``. The dense ops the array answers need no variant here:
``mm``/``matmul``/``@``/``addmm``/``mv`` with a dense operand (the compressed operand gets a dense
gradient, as PyTorch's), ``t``/``transpose`` (CSR <-> CSC), scalar ``*``, ``+``, ``sum()``.
``torch.sparse.mm`` (``ops/sparse.py``) gives the compressed operand a gradient with its pattern.

The constructor's gradient to its ``values`` gathers the output's gradient at the stored entries
(``_gather``), and ``to_dense``'s gradient is the gradient at the input's pattern, as PyTorch's.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..base.compressed import (BLOCK_LAYOUTS, COMPRESSED_LAYOUTS, LAYOUT_NAMES, ROW_LAYOUTS, CompressedArray,
                               convert, from_coo, from_dense)
from ..base.coo import COOArray
from ..base.dtype import int32, int64
from ..base.layout import sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from ..core.creation import tensor as _tensor
from ..core.dispatch import apply
from ..core.registry import NONE, Op
from ._sparse_invariants import _warn_if_checks_implicit, invariant_checks_enabled
from ._util import Tensor

__all__ = ["sparse_compressed_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor",
           "sparse_bsc_tensor"]
METHODS = ("to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc")
OPERATORS: dict = {}


_BETA = {"warned": False}


def _beta_warning(stacklevel: int) -> None:
    """PyTorch warns once per process, when its first compressed tensor is made."""
    if not _BETA["warned"]:
        _BETA["warned"] = True
        warnings.warn("Sparse CSR tensor support is in beta state. If you miss a functionality in the sparse tensor "
                      "support, please submit a feature request to https://github.com/pytorch/pytorch/issues.",
                      UserWarning, stacklevel=stacklevel + 1)


def is_compressed(t) -> bool:
    return isinstance(t, Tensor) and type(t._data) is CompressedArray


def layout_name(t: Tensor) -> str:
    """PyTorch's name for ``t``'s layout in messages (``Strided``, ``Sparse``, ``SparseCsr``...)."""
    if type(t._data) is CompressedArray:
        return LAYOUT_NAMES[t._data.layout]
    return "Sparse" if type(t._data) is COOArray else "Strided"


# ---------------------------------------------------------------- construction
def _gather(xp, dense, compressed, plain, layout, blocksize):
    nb = compressed.ndim - 1
    row = layout in ROW_LAYOUTS
    bh, bw = blocksize
    out = []
    for b in np.ndindex(*dense.shape[:nb]):
        comp = compressed[b].astype(xp.int64)
        major = xp.repeat(xp.arange(comp.shape[0] - 1, dtype=xp.int64), xp.diff(comp))
        minor = plain[b].astype(xp.int64)
        rows, cols = (major, minor) if row else (minor, major)
        m = dense[b]
        if layout in BLOCK_LAYOUTS:
            blocks = m.reshape(m.shape[0] // bh, bh, m.shape[1] // bw, bw).transpose(0, 2, 1, 3)
            out.append(blocks[rows, cols])
        else:
            out.append(m[rows, cols])
    shape_b = dense.shape[:nb]
    return xp.stack(out).reshape(shape_b + out[0].shape) if out else xp.zeros(shape_b + (0,), dense.dtype)


_gather_op = Op("sparse_compressed_gather",
                lambda xp, dense, compressed, plain, *, layout, blocksize: _gather(xp, dense, compressed, plain,
                                                                                   layout, blocksize),
                lambda g, out, dense, compressed, plain, *, layout, blocksize: (
                    to_dense(apply(_construct, compressed, plain, g, size=tuple(dense.shape), layout=layout)),
                    None, None),
                saves=NONE)


def _construct_vjp(g, out, compressed, plain, values, *, size, layout):
    if not isinstance(values, Tensor):
        return None, None, None
    dense = g.to_dense() if g.layout is not strided else g
    blocksize = tuple(values.shape[-2:]) if layout in BLOCK_LAYOUTS else (1, 1)
    return None, None, apply(_gather_op, dense, compressed, plain, layout=layout, blocksize=blocksize)


_construct = Op("sparse_compressed_tensor",
                lambda xp, compressed, plain, values, *, size, layout: CompressedArray(xp, layout, compressed, plain,
                                                                                        values, size),
                _construct_vjp, saves=NONE, backward_name="SparseCompressedTensorBackward0",
                aliases=("sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor"))


def _index_tensor(x, device) -> Tensor:
    if not isinstance(x, Tensor):
        x = _tensor(x, device=device)
        if x.ndim == 1 and not x.numel():
            x = x.to(int64)     # an empty list
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype.name == "bool":
        raise NotImplementedError(f'"convert_indices_from_csr_to_coo_cpu" not implemented for '
                                  f"'{x.dtype.scalar_type}'")
    return x if x.dtype in (int32, int64) else x.to(int64)


def _check_invariants(comp: Tensor, plain: Tensor, values: Tensor, size: tuple, layout, full: bool) -> None:
    """The shape checks (always) and PyTorch's check_invariants checks (``full``), with its messages."""
    row = layout in ROW_LAYOUTS
    cname, pname = ("crow_indices", "col_indices") if row else ("ccol_indices", "row_indices")
    if comp.ndim < 1 or plain.ndim != comp.ndim:
        raise RuntimeError(f"{cname} and {pname} must have the same number of dimensions (a batch of 1-d "
                           f"index arrays), but got {comp.ndim} and {plain.ndim}")
    nb = comp.ndim - 1
    if len(size) != nb + 2:
        raise RuntimeError(f"tensor dimensionality must be sum of batch, base, and dense dimensionalities "
                           f"(={nb} + 2 + 0) but got {len(size)}")
    bh, bw = tuple(values.shape[-2:]) if layout in BLOCK_LAYOUTS else (1, 1)
    n_major = (size[nb] // bh) if row else (size[nb + 1] // bw)
    if comp.shape[-1] != n_major + 1:
        raise RuntimeError(f"{cname}.size(-1) must be equal to size[-{2 if row else 1}] + 1 (that is {n_major + 1}), "
                           f"but got: {comp.shape[-1]}")
    nnz = plain.shape[-1]
    want = tuple(size[:nb]) + (nnz,) + ((bh, bw) if layout in BLOCK_LAYOUTS else ())
    if tuple(values.shape) != want:
        raise RuntimeError(f"values must have shape {list(want)} (batch, nnz{', blocksize' if bh * bw > 1 or layout in BLOCK_LAYOUTS else ''}) "
                           f"for this {cname} and {pname}, but got {list(values.shape)}")
    if layout in BLOCK_LAYOUTS and (size[nb] % bh or size[nb + 1] % bw):
        raise RuntimeError(f"sparse_compressed_tensor: tensor size {tuple(size)} must be divisible by the blocksize "
                           f"({bh}, {bw})")
    c, p = comp.detach().__array__().astype(np.int64), plain.detach().__array__().astype(np.int64)
    n_minor = (size[nb + 1] // bw) if row else (size[nb] // bh)
    if full:
        if comp.dtype is not plain.dtype:
            raise RuntimeError(f"{cname} and {pname} must have the same dtype, bot got {comp.dtype.scalar_type} and "
                               f"{plain.dtype.scalar_type}, respectively")
        if c.size and (c[..., 0] != 0).any():
            raise RuntimeError(f"`{cname}[..., 0] == 0` is not satisfied.")
        if c.size and (c[..., -1] != nnz).any():
            raise RuntimeError(f"`{cname}[..., -1] == nnz` is not satisfied.")
        if (np.diff(c, axis=-1) < 0).any():
            raise RuntimeError(f"`0 <= {cname}[..., 1:] - {cname}[..., :-1] <= {n_minor}` is not satisfied.")
        if p.size and (p.min() < 0 or p.max() >= n_minor):
            raise RuntimeError(f"`0 <= {pname} < n{'cols' if row else 'rows'}` is not satisfied.")
        for b in np.ndindex(*c.shape[:-1]):
            for i in range(c.shape[-1] - 1):
                seg = p[b][c[b][i]:c[b][i + 1]]
                if (np.diff(seg) <= 0).any():
                    raise RuntimeError(f"`{pname}[..., {cname}[..., i - 1]:{cname}[..., i]] for all i = 1, ..., "
                                       f"n{'rows' if row else 'cols'} are sorted and distinct along the last "
                                       f"dimension values` is not satisfied.")
    else:   # what the product and to_dense need to stay in bounds (PyTorch reads out of range here)
        if c.size and (c.min() < 0 or c.max() > nnz or (np.diff(c, axis=-1) < 0).any()):
            raise RuntimeError(f"`0 <= {cname} <= nnz` and non-decreasing is not satisfied "
                               f"(pass check_invariants=True for PyTorch's checks)")
        if p.size and (p.min() < 0 or p.max() >= n_minor):
            raise IndexError("index out of range in self")


def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=None, *, dtype=None, layout=None,
                             device=None, pin_memory=False, requires_grad: bool = False,
                             check_invariants=None) -> Tensor:
    """A sparse tensor in a compressed layout (``torch.sparse_compressed_tensor``).

    >>> c = tapelab.sparse_csr_tensor([0, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0], (2, 3))
    >>> c.to_dense()
    tensor([[0., 2., 0.],
            [3., 0., 4.]])
    """
    if layout not in COMPRESSED_LAYOUTS:
        got = "none" if layout is None else {strided: "Strided", sparse_coo: "Sparse"}.get(layout, str(layout))
        raise RuntimeError(f"sparse_compressed_tensor expected sparse compressed tensor layout but got {got}")
    _warn_if_checks_implicit(check_invariants)
    return _make(compressed_indices, plain_indices, values, size, dtype, layout, device, requires_grad,
                 check_invariants)


def _make(compressed_indices, plain_indices, values, size, dtype, layout, device, requires_grad,
          check_invariants) -> Tensor:
    _beta_warning(3)
    if not isinstance(values, Tensor):
        values = _tensor(values, dtype=dtype, device=device)
    comp = _index_tensor(compressed_indices, values.device)
    plain = _index_tensor(plain_indices, values.device)
    if device is not None:
        values, comp, plain = values.to(device), comp.to(device), plain.to(device)
    if dtype is not None:
        values = values.to(dtype)
    row = layout in ROW_LAYOUTS
    if size is None:
        nb = comp.ndim - 1
        bh, bw = tuple(values.shape[-2:]) if layout in BLOCK_LAYOUTS else (1, 1)
        n_major = comp.shape[-1] - 1
        p = plain.detach().__array__()
        n_minor = int(p.max()) + 1 if p.size else 0
        base = (n_major * bh, n_minor * bw) if row else (n_minor * bh, n_major * bw)
        size = tuple(values.shape[:nb]) + base
    size = tuple(int(s) for s in size)
    full = bool(check_invariants) if check_invariants is not None else invariant_checks_enabled()
    _check_invariants(comp, plain, values, size, layout, full)
    out = apply(_construct, comp, plain, values, size=size, layout=layout)
    return out.requires_grad_() if requires_grad else out


def _layout_ctor(layout, cname, pname):
    def ctor(compressed_indices, plain_indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
             requires_grad: bool = False, check_invariants=None) -> Tensor:
        _warn_if_checks_implicit(check_invariants)
        return _make(compressed_indices, plain_indices, values, size, dtype, layout, device, requires_grad,
                     check_invariants)
    name = f"sparse_{layout.name[7:]}_tensor"
    ctor.__name__ = ctor.__qualname__ = name
    ctor.__doc__ = (f"A sparse {layout.name[7:].upper()} tensor from ``{cname}``, ``{pname}`` and ``values`` "
                    f"(``torch.{name}``).")
    return ctor


sparse_csr_tensor = _layout_ctor(sparse_csr, "crow_indices", "col_indices")
sparse_csc_tensor = _layout_ctor(sparse_csc, "ccol_indices", "row_indices")
sparse_bsr_tensor = _layout_ctor(sparse_bsr, "crow_indices", "col_indices")
sparse_bsc_tensor = _layout_ctor(sparse_bsc, "ccol_indices", "row_indices")


# ---------------------------------------------------------------- structure
def _indices_of(x: Tensor) -> tuple:
    return apply(_compressed_ix, x), apply(_plain_ix, x)


_compressed_ix = Op("compressed_indices", lambda xp, x: x.compressed, None, saves=NONE,
                    aliases=("crow_indices", "ccol_indices"))
_plain_ix = Op("plain_indices", lambda xp, x: x.plain, None, saves=NONE, aliases=("col_indices", "row_indices"))


def _at_pattern(g: Tensor, x: Tensor) -> Tensor:
    """Gradient ``g`` (dense or compressed) at compressed ``x``'s stored entries, as a tensor of x's pattern."""
    comp, plain = _indices_of(x)
    data = x._data
    dense = g.to_dense() if g.layout is not strided else g
    vals = apply(_gather_op, dense, comp, plain, layout=data.layout, blocksize=data.blocksize)
    return apply(_construct, comp, plain, vals, size=tuple(x.shape), layout=data.layout)


_values = Op("compressed_values", lambda xp, x: x.values,
             lambda g, out, x: (apply(_construct, *_indices_of(x), g, size=tuple(x.shape), layout=x._data.layout),),
             saves=NONE, backward_name="ValuesBackward0")


def values(t: Tensor) -> Tensor:
    return apply(_values, t)


def _accessor(name: str, row: bool, compressed: bool):
    kind = "row" if row else "column"

    def method(self: Tensor) -> Tensor:
        if type(self._data) is not CompressedArray or (self._data.layout in ROW_LAYOUTS) != row:
            raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but got {layout_name(self)}")
        return apply(_compressed_ix if compressed else _plain_ix, self)
    method.__name__ = name
    method.__doc__ = f"The {name} of a sparse {'CSR/BSR' if row else 'CSC/BSC'} tensor (int64, or int32 as given)."
    return method


OPERATORS.update({
    "crow_indices": _accessor("crow_indices", True, True),
    "col_indices": _accessor("col_indices", True, False),
    "ccol_indices": _accessor("ccol_indices", False, True),
    "row_indices": _accessor("row_indices", False, False),
})


# ---------------------------------------------------------------- conversion
_to_dense = Op("compressed_to_dense", lambda xp, x: x.todense(), lambda g, out, x: (_at_pattern(g, x),),
               saves=NONE, backward_name="ToDenseBackward0")


def to_dense(t: Tensor) -> Tensor:
    return apply(_to_dense, t)


def _dense_grad(g, out, x, **params):
    return (g.to_dense() if g.layout is not strided else g,)


_from_dense = Op("to_sparse_compressed", lambda xp, x, *, layout, blocksize: from_dense(xp, x, layout, blocksize),
                 _dense_grad, saves=NONE, data_dependent="to_sparse_csr (its nnz depends on the values)",
                 backward_name="ToSparseCsrBackward0",
                 aliases=("to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc"))
_from_coo = Op("coo_to_compressed", lambda xp, x, *, layout: from_coo(x, layout), _dense_grad, saves=NONE)
_to_coo = Op("compressed_to_coo", lambda xp, x: x.to_coo(), _dense_grad, saves=NONE, aliases=("to_sparse_coo",))
_convert = Op("compressed_convert", lambda xp, x, *, layout: convert(x, layout), _dense_grad, saves=NONE)


def _blocksize_arg(blocksize) -> tuple:
    if isinstance(blocksize, int):
        return (blocksize, blocksize)
    if blocksize is None or len(tuple(blocksize)) != 2:
        raise RuntimeError(f"blocksize needs to be a tuple of two integers, got {blocksize}")
    return tuple(int(b) for b in blocksize)


def to_compressed(self: Tensor, layout, blocksize=None, dense_dim=None) -> Tensor:
    """``self`` in compressed ``layout`` from strided, COO or another compressed layout."""
    src = layout_name(self)
    fn = f"to_sparse_{layout.name[7:]}"
    if dense_dim is not None:
        if src != "Strided":
            raise RuntimeError(f"{fn}: conversion from {src} to {LAYOUT_NAMES[layout]} with dense_dim argument "
                               f"given is not supported")
        if dense_dim != 0:
            raise RuntimeError(f"dense_to_sparse_{layout.name[7:]}: dense_dim argument must be in [0,{self.ndim - 2}] "
                               f"range, but {dense_dim} is given") if dense_dim > self.ndim - 2 or dense_dim < 0 else \
                NotImplementedError(f"{fn}: tapelab has no hybrid (dense_dim > 0) compressed tensors")
    if layout in BLOCK_LAYOUTS:
        blocksize = _blocksize_arg(blocksize)
    _beta_warning(3)
    if type(self._data) is CompressedArray:
        if self._data.layout is layout and (layout not in BLOCK_LAYOUTS or self._data.blocksize == blocksize):
            return self
        if self._data.layout in BLOCK_LAYOUTS and layout not in BLOCK_LAYOUTS:
            raise RuntimeError(f"sparse_compressed_to_sparse_{layout.name[7:]}: expected SparseCsr or SparseCsc "
                               f"layout but got {LAYOUT_NAMES[self._data.layout]}")
        if layout in BLOCK_LAYOUTS or self._data.layout in BLOCK_LAYOUTS:
            return to_compressed(to_dense(self), layout, blocksize)
        return apply(_convert, self, layout=layout)
    if type(self._data) is COOArray:
        if self.ndim != 2 or self._data.dense_dim:
            raise NotImplementedError(f"{fn}: tapelab converts 2-d sparse COO matrices only, got a "
                                      f"{self.ndim}-d one with {self._data.dense_dim} dense dims")
        if layout in BLOCK_LAYOUTS:
            return to_compressed(self.to_dense(), layout, blocksize)
        return apply(_from_coo, self, layout=layout)
    if self.ndim < 2:
        raise IndexError(f"{fn}: expected a tensor of at least 2 dimensions, got a {self.ndim}-d one")
    if layout in BLOCK_LAYOUTS:
        h, w = self.shape[-2:]
        if h % blocksize[0] or w % blocksize[1]:
            raise RuntimeError(f"dense_to_sparse_{layout.name[7:]}: tensor sparse size ({h},{w}) must be divisible "
                               f"by given blocksize ({blocksize[0]},{blocksize[1]})")
    return apply(_from_dense, self, layout=layout, blocksize=blocksize if layout in BLOCK_LAYOUTS else (1, 1))


def to_sparse_csr(self: Tensor, dense_dim=None) -> Tensor:
    """The tensor as sparse CSR (leading dims a batch, each with the same nnz)."""
    return to_compressed(self, sparse_csr, dense_dim=dense_dim)


def to_sparse_csc(self: Tensor, dense_dim=None) -> Tensor:
    """The tensor as sparse CSC."""
    return to_compressed(self, sparse_csc, dense_dim=dense_dim)


def to_sparse_bsr(self: Tensor, blocksize, dense_dim=None) -> Tensor:
    """The tensor as sparse BSR with ``blocksize`` blocks (a block is kept where any element is nonzero)."""
    return to_compressed(self, sparse_bsr, blocksize, dense_dim)


def to_sparse_bsc(self: Tensor, blocksize, dense_dim=None) -> Tensor:
    """The tensor as sparse BSC with ``blocksize`` blocks."""
    return to_compressed(self, sparse_bsc, blocksize, dense_dim)


def compressed_to_coo(self: Tensor) -> Tensor:
    return apply(_to_coo, self)


def at_pattern(g: Tensor, x: Tensor) -> Tensor:
    """``g`` at compressed ``x``'s stored entries (torch.sparse.mm's gradient to a compressed operand)."""
    return _at_pattern(g, x)
