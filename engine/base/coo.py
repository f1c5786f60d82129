"""``COOArray``: the array behind a sparse COO tensor, as an ndarray is behind a dense one.

A sparse tensor is an ordinary ``Tensor`` whose ``_data`` is a ``COOArray``: ``indices``
(``sparse_dim`` x ``nnz``, int64) and ``values`` (``nnz`` x dense dims) in the device's array
namespace, the full ``shape`` and whether the entries are known to be coalesced (sorted, no
duplicate index). Ops run on it unchanged: the dense ops whose forward is an operator or a
ufunc this class implements (``+``, scalar ``*``, ``@`` with a dense operand, ``astype``,
``transpose``, zero-preserving unary ufuncs) work on it, and every other forward ends in
PyTorch's "Could not run 'aten::<op>' with arguments from the 'SparseCPU' backend" error.
Products go through ``sparse_module(xp)``: scipy.sparse on cpu, cupyx.scipy.sparse on cuda.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

__all__ = ["COOArray", "unsupported", "sparse_module"]

_SPARSE: dict = {}


def sparse_module(xp):
    """``scipy.sparse`` for numpy, ``cupyx.scipy.sparse`` for cupy (the products' matrices)."""
    sp = _SPARSE.get(xp)
    if sp is None:
        cupy = getattr(xp, "__name__", "") == "cupy"
        sp = _SPARSE[xp] = importlib.import_module("cupyx.scipy.sparse" if cupy else "scipy.sparse")
    return sp


class _Flags:
    """What ``ndarray.flags`` answers for a sparse tensor: not laid out in memory (PyTorch's
    ``is_contiguous()`` is False for it)."""

    c_contiguous = f_contiguous = False


def unsupported(name: str, xp) -> NotImplementedError:
    """PyTorch's error for an op that has no sparse kernel (short form)."""
    backend = "SparseCPU" if xp is np else "SparseCUDA"
    return NotImplementedError(f"Could not run 'aten::{name}' with arguments from the '{backend}' backend. "
                               f"tapelab's sparse COO tensors support to_dense, coalesce, indices/values, "
                               f"t, +, scalar *, sparse @ dense, torch.sparse.mm and torch.sparse.sum; "
                               f"call .to_dense() first for other ops.")


# the binary ufuncs a dense forward may call with a sparse operand, as this class's operators
_BINARY = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__", "true_divide": "__truediv__",
           "divide": "__truediv__", "matmul": "__matmul__"}
_REFLECTED = {"add": "__radd__", "subtract": "__rsub__", "multiply": "__rmul__", "matmul": "__rmatmul__"}


class COOArray:
    """Sparse COO data on the array namespace ``xp`` (no Tensor: the dispatcher wraps it)."""

    __slots__ = ("xp", "indices", "values", "shape", "coalesced", "_csr", "_transposed_of")
    __array_priority__ = 2000
    flags = _Flags()

    def __init__(self, xp, indices, values, shape: tuple, coalesced: bool = False):
        self.xp, self.indices, self.values = xp, indices, values
        self.shape, self.coalesced = tuple(int(s) for s in shape), coalesced
        self._csr = None               # a coalesced matrix's CSR and its transpose, built once
        self._transposed_of = None     # the matrix this one is the transpose of (its CSR, transposed)

    # ------------------------------------------------------------ ndarray-like metadata
    ndim = property(lambda self: len(self.shape))
    dtype = property(lambda self: self.values.dtype)
    size = property(lambda self: math.prod(self.shape))   # numel, as Tensor.numel() reads it
    itemsize = property(lambda self: self.values.itemsize)
    nbytes = property(lambda self: self.indices.nbytes + self.values.nbytes)
    strides = property(lambda self: (0,) * len(self.shape))   # PyTorch reports 0 strides
    nnz = property(lambda self: int(self.indices.shape[1]))
    sparse_dim = property(lambda self: int(self.indices.shape[0]))
    dense_dim = property(lambda self: self.values.ndim - 1)

    def _like(self, indices, values, shape=None, coalesced=False) -> "COOArray":
        return COOArray(self.xp, indices, values, self.shape if shape is None else shape, coalesced)

    def copy(self) -> "COOArray":
        return self._like(self.indices.copy(), self.values.copy(), coalesced=self.coalesced)

    def astype(self, dtype, copy: bool = True) -> "COOArray":
        return self._like(self.indices, self.values.astype(dtype, copy=copy), coalesced=self.coalesced)

    def moved(self, xp, fn) -> "COOArray":
        """The same entries on namespace ``xp``, both arrays copied by ``fn`` (a device move)."""
        return COOArray(xp, fn(self.indices), fn(self.values), self.shape, self.coalesced)

    # ------------------------------------------------------------ structure
    def coalesce(self) -> "COOArray":
        """Entries sorted by index with duplicates summed (PyTorch's ``coalesce``)."""
        if self.coalesced:
            return self
        xp, sd = self.xp, self.sparse_dim
        if self.nnz == 0 or sd == 0:
            values = self.values.sum(axis=0, keepdims=True) if sd == 0 and self.nnz else self.values
            return self._like(self.indices[:, :min(self.nnz, 1)], values, coalesced=True)
        flat = xp.ravel_multi_index(tuple(self.indices), self.shape[:sd])
        keys, inverse = xp.unique(flat, return_inverse=True)
        values = xp.zeros((keys.shape[0],) + self.values.shape[1:], self.values.dtype)
        xp.add.at(values, inverse.reshape(-1), self.values)
        indices = xp.stack(xp.unravel_index(keys, self.shape[:sd])).astype(xp.int64)
        return self._like(indices, values, coalesced=True)

    def todense(self):
        out = self.xp.zeros(self.shape, self.values.dtype)
        if self.nnz:
            self.xp.add.at(out, tuple(self.indices), self.values)
        return out

    def transpose(self, axes=None) -> "COOArray":
        axes = tuple(reversed(range(self.ndim))) if axes is None else tuple(axes)
        sd = self.sparse_dim
        if sorted(axes[:sd]) != list(range(sd)):
            raise unsupported("permute", self.xp)   # moving a dense dim into the sparse ones
        values = self.values.transpose((0,) + tuple(a - sd + 1 for a in axes[sd:]))
        out = self._like(self.indices[list(axes[:sd])], values, tuple(self.shape[a] for a in axes))
        if self.ndim == 2 and sd == 2 and axes == (1, 0):
            out._transposed_of = self
        return out

    T = property(lambda self: self.transpose())

    def sum(self, axis=None, keepdims: bool = False, dtype=None):
        """The sum of every element (``Tensor.sum()`` with no dim); per-dim sums are torch.sparse.sum."""
        if axis is not None and tuple(axis) != tuple(range(self.ndim)) or keepdims:
            raise unsupported("sum.dim_IntList", self.xp)
        return self.values.sum(dtype=dtype)

    # ------------------------------------------------------------ arithmetic
    def _check_same(self, other: "COOArray", name: str) -> None:
        if other.shape != self.shape:
            raise RuntimeError(f"{name}: expected sizes of 'self' and 'other' to match, but {list(self.shape)} "
                               f"!= {list(other.shape)}")

    def __add__(self, other):
        if isinstance(other, COOArray):
            self._check_same(other, "add")
            both = self.coalesced and other.coalesced
            out = self._like(self.xp.concatenate((self.indices, other.indices), axis=1),
                             self.xp.concatenate((self.values, other.values.astype(self.values.dtype))))
            return out.coalesce() if both else out   # PyTorch: coalesced + coalesced stays coalesced
        if hasattr(other, "shape") and tuple(other.shape) == self.shape:
            return self.todense() + other      # gradient sums may meet a dense and a sparse gradient
        raise unsupported("add", self.xp)

    def __radd__(self, other):
        if hasattr(other, "shape") and tuple(other.shape) == self.shape:
            return other + self.todense()      # dense + sparse is dense, as PyTorch's
        raise unsupported("add", self.xp)

    def __neg__(self) -> "COOArray":
        return self._like(self.indices, -self.values, coalesced=self.coalesced)

    def __sub__(self, other):
        return self + (-other if isinstance(other, COOArray) else _negated(other, self.xp))

    def __rsub__(self, other):
        return other + (-self)

    def __mul__(self, other):
        if _is_scalar(other):
            return self._like(self.indices, self.values * other, coalesced=self.coalesced)
        raise unsupported("mul", self.xp)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if _is_scalar(other):
            return self._like(self.indices, self.values / other, coalesced=self.coalesced)
        raise unsupported("div", self.xp)

    def __matmul__(self, other):
        """sparse @ dense (2-d sparse; 1-d or 2-d dense) by the backend's sparse matrices (the ops take
        float32 matrices on cpu through ``kernels.gemm.coo_product`` first: PyTorch's order and rounding)."""
        if isinstance(other, COOArray) or self.ndim != 2 or self.dense_dim:
            raise unsupported("mm", self.xp)
        return self._matrix() @ other

    def __rmatmul__(self, other):
        if self.ndim != 2 or self.dense_dim:
            raise unsupported("mm", self.xp)
        return (self._matrix().T @ other.T).T

    def _matrix(self, transposed: bool = False):
        """The backend's CSR matrix of these entries (of their transpose: CSC). A coalesced matrix
        (rows sorted, no duplicate) builds it once around its own values array, which the matrix
        shares (an in-place write into the values is seen); a transpose asks its source. A GCN
        step's four products converted the same adjacency four times (0.55 ms each, 22k entries)."""
        if self._transposed_of is not None:
            return self._transposed_of._matrix(not transposed)
        sp, xp = sparse_module(self.xp), self.xp
        if self._csr is None:
            rows, cols = self.indices
            if not self.coalesced or self.dense_dim:
                m = sp.coo_matrix((self.values, (rows, cols)), shape=self.shape).tocsr()
                return m.T if transposed else m
            counts = xp.bincount(rows, minlength=self.shape[0])
            indptr = xp.concatenate((xp.zeros(1, counts.dtype), xp.cumsum(counts)))
            index = xp.int32 if self.nnz < 2 ** 31 and max(self.shape) < 2 ** 31 else xp.int64
            m = sp.csr_matrix((self.values, cols.astype(index), indptr.astype(index)), shape=self.shape, copy=False)
            if m.data is not self.values and m.data.base is not self.values:   # a copy misses in-place writes
                return m.T if transposed else m
            self._csr = (m, m.T)
        return self._csr[1 if transposed else 0]

    # ------------------------------------------------------------ the array protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__
        out = kwargs.get("out")
        if name == "add" and method == "__call__" and len(inputs) == 2 and inputs[1] is self and out \
                and out[0] is inputs[0] and not isinstance(out[0], COOArray):
            # dense += sparse (an optimizer's step with an embedding's sparse gradient): a scatter-add
            self.xp.add.at(out[0], tuple(self.indices), self.values.astype(out[0].dtype, copy=False))
            return out[0]
        if method == "__call__" and not kwargs and len(inputs) == 2 and name in _BINARY \
                and (inputs[0] is self or name in _REFLECTED):
            a, b = inputs
            return getattr(self, _BINARY[name])(b) if a is self else getattr(self, _REFLECTED[name])(a)
        if method == "__call__" and not kwargs and len(inputs) == 1 and _keeps_zero(ufunc):
            return self._like(self.indices, ufunc(self.values), coalesced=self.coalesced)
        raise unsupported(name, self.xp)

    def __array_function__(self, func, types, args, kwargs):
        raise unsupported(func.__name__, self.xp)

    def __array__(self, dtype=None, copy=None):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __dlpack__(self, *args, **kwargs):
        raise RuntimeError("Sparse tensors have no DLPack form; use Tensor.to_dense() first.")

    def __getitem__(self, key):
        raise unsupported("index", self.xp)

    def __setitem__(self, key, value):
        raise unsupported("copy_", self.xp)

    def __getattr__(self, name: str):
        # an ndarray method a dense forward calls (reshape, take, ...): PyTorch's sparse error
        if name.startswith("_"):
            raise AttributeError(name)
        raise unsupported(name, object.__getattribute__(self, "xp"))


def _is_scalar(x) -> bool:
    return isinstance(x, (int, float, bool, np.generic)) or (hasattr(x, "shape") and x.shape == ())


def _negated(x, xp):
    if hasattr(x, "shape") or _is_scalar(x):
        return -x
    raise unsupported("sub", xp)


def _keeps_zero(ufunc) -> bool:
    """A unary ufunc that maps 0 to 0 acts on the stored values alone (neg, abs, sqrt, sin, ...)."""
    if ufunc.nin != 1 or ufunc.nout != 1:
        return False
    with np.errstate(all="ignore"):
        try:
            return bool(ufunc(np.float64(0.0)) == 0.0)
        except TypeError:
            return False
