"""``CompressedArray``: the array behind a sparse compressed tensor (CSR, CSC, BSR, BSC).

As ``COOArray`` is for sparse COO, a compressed tensor is an ordinary ``Tensor`` whose ``_data``
is a ``CompressedArray``: ``compressed`` indices (``crow_indices`` for the row layouts,
``ccol_indices`` for the column ones; ``*batch`` x ``n + 1``), ``plain`` indices (``col_indices`` /
``row_indices``; ``*batch`` x ``nnz``) and ``values`` (``*batch`` x ``nnz``, with a block's two dims
after it for BSR/BSC), the full ``shape`` and the ``layout`` object. The index dtype is the one
given (int64 by default, int32 kept), as PyTorch's. Dense ops run on it where the array answers
them: ``@`` with a dense operand (scipy.sparse's product), scalar ``*``, ``+``, ``neg`` and the
zero-preserving unary ufuncs, ``transpose`` (CSR <-> CSC, BSR <-> BSC), ``sum()`` and ``astype``;
every other forward ends in PyTorch's "Could not run 'aten::<op>' with arguments from the
'SparseCsrCPU' backend" error.
"""
from __future__ import annotations

import math

import numpy as np

from .coo import COOArray, _is_scalar, _keeps_zero, sparse_module
from .dtype import from_np
from .layout import sparse_bsc, sparse_bsr, sparse_csc, sparse_csr

__all__ = ["CompressedArray", "LAYOUT_NAMES", "compressed_unsupported", "from_dense", "from_coo", "ROW_LAYOUTS",
           "BLOCK_LAYOUTS", "COMPRESSED_LAYOUTS"]

# PyTorch's names for the layouts in its messages (``SparseCsr``) and the dispatch key of all four
LAYOUT_NAMES = {sparse_csr: "SparseCsr", sparse_csc: "SparseCsc", sparse_bsr: "SparseBsr", sparse_bsc: "SparseBsc"}
COMPRESSED_LAYOUTS = tuple(LAYOUT_NAMES)
ROW_LAYOUTS = (sparse_csr, sparse_bsr)
BLOCK_LAYOUTS = (sparse_bsr, sparse_bsc)


def compressed_unsupported(name: str, xp) -> NotImplementedError:
    """PyTorch's error for an op with no sparse compressed kernel (short form)."""
    backend = "SparseCsrCPU" if xp is np else "SparseCsrCUDA"
    return NotImplementedError(f"Could not run 'aten::{name}' with arguments from the '{backend}' backend. "
                               f"tapelab's sparse compressed tensors support to_dense, values and the index "
                               f"accessors, conversions, t/transpose, +, scalar *, sum(), sparse @ dense "
                               f"(mm, matmul, addmm, mv, torch.sparse.mm); call .to_dense() first for other ops.")


def _layout_error(xp) -> RuntimeError:
    return RuntimeError("unsupported tensor layout: SparseCsr")


class _Flags:
    c_contiguous = f_contiguous = False


class CompressedArray:
    """Sparse compressed data on the array namespace ``xp`` (no Tensor: the dispatcher wraps it)."""

    __slots__ = ("xp", "layout", "compressed", "plain", "values", "shape", "_mat")
    __array_priority__ = 2000
    flags = _Flags()

    def __init__(self, xp, layout, compressed, plain, values, shape: tuple):
        self.xp, self.layout = xp, layout
        self.compressed, self.plain, self.values = compressed, plain, values
        self.shape = tuple(int(s) for s in shape)
        self._mat = None

    # ------------------------------------------------------------ ndarray-like metadata
    ndim = property(lambda self: len(self.shape))
    dtype = property(lambda self: self.values.dtype)
    size = property(lambda self: math.prod(self.shape))
    itemsize = property(lambda self: self.values.itemsize)
    nbytes = property(lambda self: self.compressed.nbytes + self.plain.nbytes + self.values.nbytes)
    strides = property(lambda self: (0,) * len(self.shape))
    nnz = property(lambda self: int(self.plain.shape[-1]))
    batch_ndim = property(lambda self: self.compressed.ndim - 1)
    sparse_dim = property(lambda self: 2)
    dense_dim = property(lambda self: 0)
    row_major = property(lambda self: self.layout in ROW_LAYOUTS)
    blocksize = property(lambda self: tuple(self.values.shape[-2:]) if self.layout in BLOCK_LAYOUTS else (1, 1))

    def _like(self, values, layout=None, compressed=None, plain=None, shape=None) -> "CompressedArray":
        return CompressedArray(self.xp, self.layout if layout is None else layout,
                               self.compressed if compressed is None else compressed,
                               self.plain if plain is None else plain, values, self.shape if shape is None else shape)

    def filled(self, value, dtype=None) -> "CompressedArray":
        """``value`` at the stored entries (a zero: no entries), as PyTorch's ``*_like`` and ``fill_``/``zero_``."""
        xp, dtype = self.xp, self.values.dtype if dtype is None else dtype
        if type(value) in (int, float, bool) and not value:
            nb = self.batch_ndim
            empty = self.values.shape[:nb] + (0,) + self.values.shape[nb + 1:]
            return self._like(xp.zeros(empty, dtype), compressed=xp.zeros_like(self.compressed),
                              plain=xp.zeros(self.plain.shape[:nb] + (0,), self.plain.dtype))
        return self._like(xp.full(self.values.shape, value, dtype))

    def _assign(self, other: "CompressedArray") -> "CompressedArray":
        """An in-place op's write: this array takes ``other``'s entries (same shape and layout)."""
        if not isinstance(other, CompressedArray) or other.shape != self.shape or other.layout is not self.layout:
            raise compressed_unsupported("copy_", self.xp)
        self.compressed, self.plain = other.compressed, other.plain
        self.values, self._mat = other.values.astype(self.values.dtype, copy=False), None
        return self

    def copy(self) -> "CompressedArray":
        return self._like(self.values.copy(), compressed=self.compressed.copy(), plain=self.plain.copy())

    def astype(self, dtype, copy: bool = True) -> "CompressedArray":
        return self._like(self.values.astype(dtype, copy=copy))

    def moved(self, xp, fn) -> "CompressedArray":
        return CompressedArray(xp, self.layout, fn(self.compressed), fn(self.plain), fn(self.values), self.shape)

    # ------------------------------------------------------------ structure
    def _triplets(self, b=()):
        """Batch entry ``b``'s (compressed-dim index, plain-dim index, value) per stored entry (blocks whole)."""
        xp = self.xp
        comp, plain, values = self.compressed[b], self.plain[b], self.values[b]
        counts = xp.diff(comp.astype(xp.int64))
        major = xp.repeat(xp.arange(comp.shape[0] - 1, dtype=xp.int64), counts)
        return major, plain.astype(xp.int64), values

    def _batches(self):
        return list(np.ndindex(*self.shape[:self.batch_ndim]))

    def _elements(self, b=()):
        """Batch entry ``b``'s (row, column, value) per stored element: a block gives each of its elements."""
        xp = self.xp
        major, minor, vals = self._triplets(b)
        rows, cols = (major, minor) if self.row_major else (minor, major)
        if self.layout in BLOCK_LAYOUTS:
            bh, bw = self.blocksize
            r = rows[:, None, None] * bh + xp.arange(bh)[None, :, None]
            c = cols[:, None, None] * bw + xp.arange(bw)[None, None, :]
            rows, cols = xp.broadcast_to(r, vals.shape).reshape(-1), xp.broadcast_to(c, vals.shape).reshape(-1)
            vals = vals.reshape(-1)
        return rows, cols, vals

    def todense(self):
        xp = self.xp
        out = xp.zeros(self.shape, self.values.dtype)
        for b in self._batches():
            rows, cols, vals = self._elements(b)
            xp.add.at(out[b] if b else out, (rows, cols), vals)
        return out

    def to_coo(self) -> COOArray:
        """The same entries as sparse COO (int64 indices, coalesced; blocks give all their elements)."""
        xp = self.xp
        parts_i, parts_v = [], []
        for b in self._batches():
            rows, cols, vals = self._elements(b)
            idx = [xp.full(rows.shape, k, xp.int64) for k in b] + [rows, cols]
            parts_i.append(xp.stack(idx) if idx else xp.zeros((2, 0), xp.int64))
            parts_v.append(vals)
        indices = xp.concatenate(parts_i, axis=1) if parts_i else xp.zeros((self.ndim, 0), xp.int64)
        values = xp.concatenate(parts_v) if parts_v else xp.zeros(0, self.values.dtype)
        if indices.shape[1]:
            order = xp.lexsort(indices[::-1])
            indices, values = indices[:, order], values[order]
        return COOArray(xp, indices, values, self.shape, coalesced=True)

    def transpose(self, axes=None):
        axes = tuple(reversed(range(self.ndim))) if axes is None else tuple(axes)
        nb = self.batch_ndim
        if axes != tuple(range(nb)) + (nb + 1, nb):
            if axes == tuple(range(self.ndim)):
                return self
            moved = [i for i, a in enumerate(axes) if a != i]
            if len(moved) == 2 and (moved[0] < nb) != (moved[1] < nb):
                kind = lambda d: "Batch" if d < nb else "Sparse"  # noqa: E731
                raise RuntimeError(f"transpose(): can only transpose dimensions of the same type (Batch, Sparse, "
                                   f"Dense), got {moved[0]}({kind(moved[0])}) and {moved[1]}({kind(moved[1])})")
            raise compressed_unsupported("transpose", self.xp)
        flipped = {sparse_csr: sparse_csc, sparse_csc: sparse_csr, sparse_bsr: sparse_bsc, sparse_bsc: sparse_bsr}
        values = self.values.swapaxes(-1, -2) if self.layout in BLOCK_LAYOUTS else self.values
        return self._like(values, layout=flipped[self.layout], shape=tuple(self.shape[a] for a in axes))

    T = property(lambda self: self.transpose())

    def reshape(self, *shape):
        raise RuntimeError("Sparse CSR tensors do not have strides")     # PyTorch's (view, unsqueeze, batched @)

    def sum(self, axis=None, keepdims: bool = False, dtype=None):
        if axis is not None and tuple(axis) != tuple(range(self.ndim)) or keepdims:
            raise RuntimeError("reduction operations on CSR tensors with keepdim=False is unsupported")
        return self.values.sum(dtype=dtype)

    # ------------------------------------------------------------ products
    def _matrix(self):
        """The backend's scipy.sparse matrix of a 2-d tensor (csr, csc or bsr; a BSC is the transpose of
        the BSR of its transpose), built once."""
        if self._mat is None:
            sp = sparse_module(self.xp)
            comp, plain = self.compressed, self.plain
            if comp.dtype != plain.dtype:
                comp, plain = comp.astype(self.xp.int64), plain.astype(self.xp.int64)
            if self.layout is sparse_csr:
                m = sp.csr_matrix((self.values, plain, comp), shape=self.shape, copy=False)
            elif self.layout is sparse_csc:
                m = sp.csc_matrix((self.values, plain, comp), shape=self.shape, copy=False)
            elif self.layout is sparse_bsr:
                m = sp.bsr_matrix((self.values, plain, comp), shape=self.shape, copy=False)
            else:
                m = sp.bsr_matrix((self.values.swapaxes(-1, -2), plain, comp), shape=self.shape[::-1], copy=False).T
            self._mat = m
        return self._mat

    def _check_product(self, other, name: str) -> None:
        if self.values.dtype.kind not in "fc" or self.values.dtype.itemsize < 4:   # PyTorch's CPU kernel is MKL's
            raise NotImplementedError(f'"addmm_out_sparse_csr_impl_mkl" not implemented for '
                                      f"'{from_np(self.values.dtype).scalar_type}'")
        if self.layout is sparse_bsc and not isinstance(other, CompressedArray):
            raise RuntimeError("addmm: computation on CPU is not implemented for Strided + SparseBsc @ Strided")
        if getattr(other, "ndim", 2) > 2:      # PyTorch's matmul broadcasts the batch: no compressed expand
            raise RuntimeError(f"expand is unsupported for {LAYOUT_NAMES[self.layout]} tensors")
        if self.batch_ndim or isinstance(other, CompressedArray) and other.batch_ndim:
            raise NotImplementedError(f"{name}: tapelab multiplies 2-d sparse compressed matrices only "
                                      f"(got a batched {LAYOUT_NAMES[self.layout]} tensor)")

    def __matmul__(self, other):
        self._check_product(other, "matmul")
        if isinstance(other, CompressedArray):
            return _from_scipy(self.xp, (self._matrix() @ other._matrix()), self.layout if self.layout in
                               (sparse_csr, sparse_csc) else sparse_csr, _index_dtype(self, other))
        out = self._matrix() @ other
        return self.xp.asarray(out).astype(self.values.dtype, copy=False)

    def __rmatmul__(self, other):
        self._check_product(other, "matmul")
        m = self._matrix()
        out = (m.T @ other.T).T if other.ndim == 2 else m.T @ other
        return self.xp.asarray(out).astype(self.values.dtype, copy=False)

    # ------------------------------------------------------------ arithmetic
    def _check_same(self, other, name):
        if tuple(other.shape) != self.shape:
            raise RuntimeError(f"{name}: expected sizes of 'self' and 'other' to match, but {list(self.shape)} "
                               f"!= {list(other.shape)}")

    def _same_pattern(self, other) -> bool:
        xp = self.xp
        return (other.layout is self.layout and other.plain.shape == self.plain.shape
                and other.values.shape[1:] == self.values.shape[1:]
                and bool(xp.array_equal(other.compressed, self.compressed)) and bool(xp.array_equal(other.plain, self.plain)))

    def __add__(self, other):
        if isinstance(other, CompressedArray):
            self._check_same(other, "add")
            dtype = np.result_type(self.values.dtype, other.values.dtype)
            if self._same_pattern(other):
                return self._like(self.values.astype(dtype) + other.values.astype(dtype))
            if self.batch_ndim or self.layout in BLOCK_LAYOUTS or other.layout in BLOCK_LAYOUTS:
                raise compressed_unsupported("add", self.xp)
            return _from_scipy(self.xp, self._matrix().astype(dtype) + other._matrix().astype(dtype), self.layout,
                               _index_dtype(self, other))
        if hasattr(other, "shape") and tuple(other.shape) == self.shape:
            return self.todense() + other
        raise compressed_unsupported("add", self.xp)

    def __radd__(self, other):
        if hasattr(other, "shape") and tuple(other.shape) == self.shape:
            return other + self.todense()
        raise compressed_unsupported("add", self.xp)

    def __neg__(self):
        return self._like(-self.values)

    def __sub__(self, other):
        raise _layout_error(self.xp)

    __rsub__ = __sub__

    def __mul__(self, other):
        """By a scalar, a dense tensor of the same shape (the result keeps this pattern) or another
        compressed tensor (the entries both store), as PyTorch's."""
        if _is_scalar(other):
            return self._like(self.values * other)
        if isinstance(other, CompressedArray):
            self._check_same(other, "mul")
            if self._same_pattern(other):
                xp = self.xp
                return self._like(self.values * other.values, compressed=self.compressed.astype(xp.int64),
                                  plain=self.plain.astype(xp.int64))
            if self.batch_ndim or self.layout in BLOCK_LAYOUTS or other.layout in BLOCK_LAYOUTS:
                raise compressed_unsupported("mul", self.xp)
            dtype = np.result_type(self.values.dtype, other.values.dtype)
            prod = self._matrix().astype(dtype).multiply(other._matrix().astype(dtype))
            return _from_scipy(self.xp, prod, self.layout, _index_dtype(self, other))
        if hasattr(other, "shape") and tuple(other.shape) == self.shape and not self.batch_ndim \
                and self.layout not in BLOCK_LAYOUTS:
            major, minor, vals = self._triplets()
            rows, cols = (major, minor) if self.row_major else (minor, major)
            return self._like(vals * other[rows, cols])
        raise compressed_unsupported("mul", self.xp)

    __rmul__ = __mul__

    def __truediv__(self, other):
        raise _layout_error(self.xp)

    __pow__ = __rpow__ = __rtruediv__ = __lt__ = __le__ = __gt__ = __ge__ = __truediv__

    def __eq__(self, other):
        raise _layout_error(self.xp)

    __ne__ = __eq__
    __hash__ = object.__hash__

    # ------------------------------------------------------------ the array protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__
        out = kwargs.get("out")
        if method == "__call__" and out and len(out) == 1 and out[0] is self and set(kwargs) <= {"out", "casting"}:
            # an in-place op (add_, mul_, neg_, relu_...): the out-of-place result, written into this array
            return self._assign(self.__array_ufunc__(ufunc, method, *inputs))
        if method == "__call__" and not kwargs and len(inputs) == 2 and name in ("maximum", "fmax", "less") \
                and inputs[0] is self and _is_scalar(inputs[1]) and inputs[1] == 0:
            return self._like(ufunc(self.values, inputs[1]))     # max(0, 0) is 0 and 0 < 0 false: the entries alone
        if method == "__call__" and not kwargs and len(inputs) == 2:
            a, b = inputs
            if name == "add":
                return self.__add__(b) if a is self else self.__radd__(a)
            if name == "multiply":
                return self.__mul__(b if a is self else a)
            if name == "matmul":
                return self.__matmul__(b) if a is self else self.__rmatmul__(a)
            if name in ("subtract", "true_divide", "divide"):
                raise _layout_error(self.xp)
        if method == "__call__" and not kwargs and len(inputs) == 1 and _keeps_zero(ufunc):
            return self._like(ufunc(self.values))
        if method == "__call__" and len(inputs) == 1:
            raise _layout_error(self.xp)
        raise compressed_unsupported(name, self.xp)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.where and len(args) == 3 and not kwargs and self._selects_entries(*args):
            cond, a, b = args      # relu's ``where(x < 0, 0, x)``: a zero where the condition's zeros (false) are
            return self._like(np.where(cond.values, *(v.values if isinstance(v, CompressedArray) else v for v in (a, b))))
        fills = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}
        if func.__name__ in fills or func.__name__ == "full_like" and args and args[0] is self:
            value = fills.get(func.__name__, args[1] if len(args) > 1 else kwargs.get("fill_value"))
            return self.filled(value, kwargs.get("dtype"))       # zero_/fill_ keep the layout, as PyTorch's
        raise compressed_unsupported(func.__name__, self.xp)

    def _selects_entries(self, cond, a, b) -> bool:
        """Whether ``where(cond, a, b)`` acts on the stored entries alone: the condition and each array of
        this pattern, ``b`` (taken where the condition's implicit false is) zero or of this pattern."""
        return isinstance(cond, CompressedArray) and all(
            self._same_pattern(v) if isinstance(v, CompressedArray) else _is_scalar(v) for v in (cond, a, b)) \
            and (isinstance(b, CompressedArray) or b == 0)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"can't convert {LAYOUT_NAMES[self.layout]} layout tensor to numpy. "
                        f"Use Tensor.to_dense() first.")

    def __dlpack__(self, *args, **kwargs):
        raise RuntimeError("Sparse compressed tensors have no DLPack form; use Tensor.to_dense() first.")

    def __getitem__(self, key):
        """A row ``[i]``/``[i, :]`` or a column ``[:, j]`` as a 1-d sparse COO tensor and an element ``[i, j]``
        as a 0-d one, as PyTorch's select on a 2-d CSR/CSC; other keys are PyTorch's refusals."""
        key = key if isinstance(key, tuple) else (key,)
        while key and key[-1] is Ellipsis:      # the slicing op's trailing Ellipsis
            key = key[:-1]
        full = slice(None)
        ints = [isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in key]
        if self.ndim != 2 or self.layout in BLOCK_LAYOUTS or not any(ints) or len(key) > 2 \
                or any(not i and k != full for i, k in zip(ints, key)):
            if len(key) == 1 and isinstance(key[0], slice) or len(key) == 2 and isinstance(key[1], slice):
                raise RuntimeError("Sparse CSR tensors do not have strides")
            raise compressed_unsupported("index", self.xp)
        xp = self.xp
        picked = []
        for d, (k, is_int) in enumerate(zip(key, ints)):
            if is_int:
                if not -self.shape[d] <= k < self.shape[d]:
                    raise IndexError(f"index {k} is out of bounds for dimension {d} with size {self.shape[d]}")
                picked.append(int(k) % self.shape[d])
            else:
                picked.append(None)
        picked += [None] * (2 - len(picked))
        major, minor, vals = self._triplets()
        rows, cols = (major, minor) if self.row_major else (minor, major)
        mask = xp.ones(rows.shape, bool)
        if picked[0] is not None:
            mask &= rows == picked[0]
        if picked[1] is not None:
            mask &= cols == picked[1]
        if picked[0] is not None and picked[1] is not None:     # one element: its stored value, or zero
            return xp.asarray(vals[mask].sum(dtype=vals.dtype) if mask.any() else xp.zeros((), vals.dtype))
        kept = cols[mask] if picked[0] is not None else rows[mask]
        order = xp.argsort(kept, kind="stable")
        n = self.shape[1] if picked[0] is not None else self.shape[0]
        return COOArray(xp, kept[order][None, :].astype(xp.int64), vals[mask][order], (n,), coalesced=True)

    def __setitem__(self, key, value):
        if key is Ellipsis or key == slice(None):
            self._assign(value)
            return
        raise compressed_unsupported("copy_", self.xp)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise compressed_unsupported(name, object.__getattribute__(self, "xp"))


def _index_dtype(*arrays):
    """A product's (or an elementwise product's) new pattern: int64 indices, as PyTorch's, whatever the operands'."""
    return np.int64


def _from_scipy(xp, m, layout, index_dtype) -> CompressedArray:
    """A scipy csr/csc result as a canonical (sorted) CompressedArray of ``layout``."""
    m = m.tocsr() if layout is sparse_csr else m.tocsc()
    m.sort_indices()
    return CompressedArray(xp, layout, xp.asarray(m.indptr).astype(index_dtype),
                           xp.asarray(m.indices).astype(index_dtype), xp.asarray(m.data), m.shape)


def _compress(xp, major, minor, n_major):
    """Compressed indices of entries already sorted by (major, minor)."""
    counts = xp.bincount(major, minlength=n_major) if major.size else xp.zeros(n_major, xp.int64)
    return xp.concatenate((xp.zeros(1, xp.int64), xp.cumsum(counts).astype(xp.int64)))


def from_dense(xp, x, layout, blocksize) -> CompressedArray:
    """The nonzeros of dense ``x`` (leading dims a batch; a block is kept where any element is nonzero)."""
    nb = x.ndim - 2
    row = layout in ROW_LAYOUTS
    bh, bw = blocksize if layout in BLOCK_LAYOUTS else (1, 1)
    comps, plains, vals, nnz = [], [], [], None
    for b in np.ndindex(*x.shape[:nb]):
        m = x[b]
        blocks = m.reshape(m.shape[0] // bh, bh, m.shape[1] // bw, bw).transpose(0, 2, 1, 3)
        mask = blocks.reshape(blocks.shape[:2] + (-1,)).any(axis=-1) if layout in BLOCK_LAYOUTS else m != 0
        major_mask = mask if row else mask.T
        major, minor = xp.nonzero(major_mask)
        rows, cols = (major, minor) if row else (minor, major)
        v = blocks[rows, cols] if layout in BLOCK_LAYOUTS else m[rows, cols]
        if nnz is not None and major.size != nnz:
            raise RuntimeError("Expect the same number of specified elements per batch.")
        nnz = major.size
        comps.append(_compress(xp, major, None, major_mask.shape[0]))
        plains.append(minor.astype(xp.int64))
        vals.append(v)
    shape_b = x.shape[:nb]
    comp = xp.stack(comps).reshape(shape_b + comps[0].shape) if comps else None
    plain = xp.stack(plains).reshape(shape_b + plains[0].shape)
    values = xp.stack(vals).reshape(shape_b + vals[0].shape)
    return CompressedArray(xp, layout, comp, plain, values, x.shape)


def from_coo(coo: COOArray, layout) -> CompressedArray:
    """A 2-d sparse COO matrix's entries (summed where duplicated) as CSR or CSC."""
    xp = coo.xp
    c = coo.coalesce()
    rows, cols = c.indices
    if layout is sparse_csr:
        major, minor, n = rows, cols, c.shape[0]
        order = None
    else:
        order = xp.lexsort((rows, cols))
        major, minor, n = cols[order], rows[order], c.shape[1]
    values = c.values if order is None else c.values[order]
    return CompressedArray(xp, layout, _compress(xp, major, minor, n), minor.astype(xp.int64), values, c.shape)


def convert(x: CompressedArray, layout) -> CompressedArray:
    """CSR <-> CSC (entries re-sorted, the index dtype kept); a block layout goes through its dense form."""
    if layout is x.layout:
        return x
    xp = x.xp
    if x.layout in BLOCK_LAYOUTS or layout in BLOCK_LAYOUTS:
        raise NotImplementedError(f"conversion from {LAYOUT_NAMES[x.layout]} to {LAYOUT_NAMES[layout]}")
    comps, plains, vals = [], [], []
    for b in x._batches():
        major, minor, v = x._triplets(b)
        order = xp.lexsort((major, minor))          # sorted by the new major index (the old minor one)
        n = x.shape[-1] if x.row_major else x.shape[-2]
        comps.append(_compress(xp, minor[order], None, n))
        plains.append(major[order])
        vals.append(v[order])
    shape_b = x.shape[:x.batch_ndim]
    dt = x.compressed.dtype
    return CompressedArray(xp, layout, xp.stack(comps).reshape(shape_b + comps[0].shape).astype(dt),
                           xp.stack(plains).reshape(shape_b + plains[0].shape).astype(x.plain.dtype),
                           xp.stack(vals).reshape(shape_b + vals[0].shape), x.shape)
