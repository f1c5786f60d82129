"""The meta device: tensors with a shape and a dtype but no data, as PyTorch's ``device('meta')``.

Used for shape propagation, capture planning and inspecting a model too big to allocate.

A meta tensor's ``_data`` is a ``MetaArray``: a numpy array of the right shape and dtype with
every stride 0 over a single element, so it costs no memory whatever its shape. Op forwards
run on it unchanged, through ``META_XP`` (numpy with the meta device's conventions), so each
op's shape and dtype rules are its forward's own: no op is declared twice. What would take
time in proportion to the absent data is answered from shapes alone:

- elementwise ufuncs: the broadcast shape, and the dtype numpy gives on 0-d operands;
- ``matmul`` (the ``@`` of every linear layer and convolution): its shape rule;
- reductions, scans and sorts along axes (``sum``, ``max``, ``argmax``, ``cumsum``, ``sort``, ...,
  and ``ufunc.reduce``): run on a small stand-in whose every axis has its own prime length, whose
  result's axes map back to the input's (``_along_axes``);
- creation (``empty``, ``zeros``, ``full``, ``asarray`` of host data): no allocation;
- writes (``out=``, ``copyto``, ``__setitem__``, ``ufunc.at``, ``put_along_axis``): nothing to write;
- ``as_strided``: a view of the requested shape (its strides would read past the one element).

A meta tensor has no memory layout of its own: it reports C-contiguous strides, so ``view``
of a transposed meta tensor succeeds where PyTorch's would raise.

Everything else runs on the zero-stride operands and its result is re-strided: the right
shape and dtype at the cost of one pass over the output. Values seen inside a forward are
constant, so a forward's internal index arithmetic stays in range.

Reading data raises PyTorch's errors: ``item()`` and ``bool()`` a RuntimeError, ``tolist()``,
``cpu()`` and ``numpy()`` NotImplementedError "Cannot copy out of meta tensor; no data!".
An op whose output shape depends on values (nonzero, unique, masked_select, boolean-mask
indexing) raises NotImplementedError: its forward calls one of ``DATA_DEPENDENT``, or indexes
with a boolean mask, and those raise on meta operands. So no op needs declaring as such; a
forward must just not use them for fixed-shape results. Value checks (integer division by
zero, class bounds) ask ``has_data(xp)`` and skip on meta.
"""
from __future__ import annotations

import types

import numpy as np

from .simarray import SimArray, _plain, _plain_tree, _refuse_host, _SimNamespace, map_sequence

__all__ = ["MetaArray", "META_XP", "has_data", "NO_DATA", "DATA_DEPENDENT"]

NO_DATA = "Cannot copy out of meta tensor; no data!"
DATA_DEPENDENT = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
                            "unique_inverse", "unique_all", "compress", "extract"})


def _data_dependent(what: str) -> NotImplementedError:
    return NotImplementedError(f"{what}: attempted to run this operator with Meta tensors, but its output shape "
                               f"depends on the values, which a meta tensor does not have")


def _empty(shape, dtype) -> np.ndarray:
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def _restride(a: np.ndarray) -> np.ndarray:
    """``a``'s shape and dtype (and its first value) over one element."""
    if a.ndim and not any(a.strides):
        return a
    return np.broadcast_to(a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), a.dtype), a.shape)


class MetaArray(SimArray):
    """The data of a meta tensor: shape and dtype only (``_a`` is a zero-stride numpy array)."""

    __slots__ = ()

    @classmethod
    def _wrap(cls, res):
        if isinstance(res, np.ndarray):
            return cls(_restride(res))
        return map_sequence(res, cls._wrap)

    def __array__(self, dtype=None, copy=None):
        raise NotImplementedError(NO_DATA)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _ufunc(ufunc, method, inputs, kwargs)

    def __getitem__(self, key):
        for k in key if isinstance(key, tuple) else (key,):
            if getattr(k, "dtype", None) == np.bool_ and np.ndim(_plain(k)):
                raise _data_dependent("indexing with a boolean mask")
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        _refuse_host((key if isinstance(key, tuple) else (key,)) + (value,), "__setitem__")
        target, shape = self._a[_plain_tree(key)].shape, np.shape(_plain(value))
        while len(shape) > len(target) and shape[0] == 1:     # numpy drops a value's extra leading 1s
            shape = shape[1:]
        _check_fits(shape, target, "value array")

    def get(self):
        raise NotImplementedError(NO_DATA)

    def item(self, *args):
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    __bool__ = __float__ = __int__ = __index__ = item

    def tolist(self):
        raise NotImplementedError(NO_DATA)

    def __getattr__(self, name):
        if name in _ALONG_AXES:
            def method(*args, **kwargs):
                res = _along_axes(lambda a, *x, **k: getattr(a, name)(*x, **k), self._a, args, dict(kwargs))
                return res if res is not None else SimArray.__getattr__(self, name)(*args, **kwargs)
            return method
        return SimArray.__getattr__(self, name)

    def astype(self, dtype, copy=True, **kwargs):
        return MetaArray(_empty(self._a.shape, dtype))

    def copy(self, order="C"):
        return self

    @property
    def strides(self) -> tuple:
        """The strides of a C-contiguous array of this shape (a meta tensor has no layout of its own)."""
        st, acc = [], self._a.itemsize
        for n in reversed(self._a.shape):
            st.append(acc)
            acc *= max(n, 1)
        return tuple(reversed(st))

    @property
    def flags(self):
        return types.SimpleNamespace(c_contiguous=True, f_contiguous=self._a.ndim <= 1, writeable=True)

    @property
    def base(self):
        return None

    @property
    def device(self):
        return None

    @property
    def data(self):
        return types.SimpleNamespace(ptr=0)

    def __dlpack__(self, *args, **kwargs):
        raise BufferError("Cannot pack tensors on meta")

    def __dlpack_device__(self):
        raise BufferError("Cannot pack tensors on meta")

    def __repr__(self):
        return f"MetaArray(shape={self._a.shape}, dtype={self._a.dtype})"


def _check_fits(src_shape, dst_shape, what: str = "output operand") -> None:
    """numpy's rule for a write: the source broadcasts to the destination's shape, never widening it."""
    if np.broadcast_shapes(tuple(src_shape), tuple(dst_shape)) != tuple(dst_shape):
        raise ValueError(f"non-broadcastable {what} with shape {tuple(dst_shape)} doesn't match the broadcast "
                         f"shape {np.broadcast_shapes(tuple(src_shape), tuple(dst_shape))}")


_PRIMES = (2, 3, 5, 7, 11, 13)
_ALONG_AXES = frozenset({"sum", "mean", "prod", "max", "min", "amax", "amin", "any", "all", "argmax", "argmin",
                         "std", "var", "cumsum", "cumprod", "nansum", "nanmean", "nanmax", "nanmin", "sort",
                         "argsort", "count_nonzero", "median", "ptp"})


def _along_axes(fn, a: np.ndarray, args, kwargs):
    """``fn(a, *args, **kwargs)`` for a reduction, scan or sort, from a small stand-in of ``a``:
    each axis longer than 1 gets a distinct prime length, so each axis of the result (an axis of
    ``a``, or a kept length 1) maps back to its length in ``a``. None where that cannot apply."""
    if a.ndim > len(_PRIMES) or any(isinstance(v, SimArray) for v in (*args, *kwargs.values())):
        return None
    out = kwargs.pop("out", None)
    small = fn(np.zeros(tuple(p if n > 1 else n for n, p in zip(a.shape, _PRIMES)), a.dtype), *args, **kwargs)
    if not isinstance(small, np.ndarray):
        return small        # a scalar, as numpy's full reductions give (a forward may branch on it)
    back = {p: n for n, p in zip(a.shape, _PRIMES) if n > 1}
    res = MetaArray(_empty(tuple(back.get(m, m) for m in small.shape), small.dtype))
    if out is None:
        return res
    _check_fits(res.shape, out.shape)
    return out


def _tiny(a):
    """A 0-d stand-in of ``a``'s dtype (Python numbers stay themselves: they are weakly typed)."""
    return np.zeros((), _plain(a).dtype) if isinstance(a, (SimArray, np.ndarray)) else a


def _matmul(a, b, dtype=None):
    sa, sb = np.shape(_plain(a)), np.shape(_plain(b))
    if not sa or not sb:
        raise ValueError("matmul: Input operand 0 does not have enough dimensions")
    a2, b2 = (sa if len(sa) > 1 else (1,) + sa), (sb if len(sb) > 1 else sb + (1,))
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                         f"signature (n?,k),(k,m?)->(n?,m?) (size {b2[-2]} is different from {a2[-1]})")
    shape = np.broadcast_shapes(a2[:-2], b2[:-2]) + a2[-2:-1] * (len(sa) > 1) + b2[-1:] * (len(sb) > 1)
    dt = dtype or np.matmul(np.zeros((1, 1), _plain(a).dtype), np.zeros((1, 1), _plain(b).dtype)).dtype
    return MetaArray(_empty(shape, dt))


def _ufunc(uf, method: str, inputs, kwargs):
    """A ufunc on meta operands, from shapes and dtypes alone where the data would cost time."""
    _refuse_host(inputs, uf.__name__)
    out = kwargs.pop("out", None)
    out = (out,) if out is not None and not isinstance(out, tuple) else out
    if method == "at":
        return None
    if method in ("reduce", "accumulate") and len(inputs) == 1 and isinstance(inputs[0], MetaArray):
        res = _along_axes(getattr(uf, method), inputs[0]._a, (), dict(kwargs, **({"out": out} if out else {})))
        if res is not None:
            return res
    if method == "__call__" and uf is np.matmul:
        res = _matmul(*inputs, dtype=kwargs.get("dtype"))
    elif method == "__call__" and uf.signature is None:
        shape = np.broadcast_shapes(*(np.shape(_plain(a)) for a in inputs),
                                    *((np.shape(_plain(kwargs["where"])),) if "where" in kwargs else ()))
        small = uf(*(_tiny(a) for a in inputs), **{k: _tiny(v) for k, v in kwargs.items()})
        res = tuple(MetaArray(_empty(shape, np.asarray(r).dtype)) for r in small) if uf.nout > 1 \
            else MetaArray(_empty(shape, np.asarray(small).dtype))
    else:
        res = MetaArray._wrap(getattr(uf, method)(*_plain_tree(inputs), **_plain_tree(kwargs)))
    if out is None:
        return res
    for o, r in zip(out, res if isinstance(res, tuple) else (res,)):
        if o is not None:
            _check_fits(r.shape, o.shape)
    return out[0] if len(out) == 1 else out


class _MetaUfunc:
    """A numpy ufunc on the meta device: ``xp.add(a, b, out=c)`` and ``xp.add.at(...)``."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__

    def __call__(self, *args, **kwargs):
        return _ufunc(self._uf, "__call__", args, kwargs)

    def __getattr__(self, name):
        return lambda *args, **kwargs: _ufunc(self._uf, name, args, kwargs)


class _StrideTricks:
    def __getattr__(self, name):
        return getattr(_SimNamespace(np.lib.stride_tricks, "numpy.lib.stride_tricks", MetaArray), name)

    @staticmethod
    def as_strided(x, shape=None, strides=None, **kwargs):
        return MetaArray(_empty(shape if shape is not None else x.shape, x.dtype))


class _MetaNamespace(_SimNamespace):
    """numpy with the meta device's conventions (see the module docstring)."""

    def __init__(self):
        super().__init__(np, "numpy", MetaArray)
        self.lib = types.SimpleNamespace(stride_tricks=_StrideTricks())

    def __getattr__(self, name):
        if name in DATA_DEPENDENT:
            raise _data_dependent(name)
        attr = getattr(np, name)
        if isinstance(attr, np.ufunc):
            return _MetaUfunc(attr)
        generic = super().__getattr__(name)
        if name in _ALONG_AXES:
            def along(a, *args, **kwargs):
                res = _along_axes(attr, a._a, args, dict(kwargs)) if isinstance(a, MetaArray) else None
                return res if res is not None else generic(a, *args, **kwargs)
            return along
        return generic

    def empty(self, shape, dtype=float, **kwargs):
        return MetaArray(_empty(np.atleast_1d(shape) if np.ndim(shape) else (shape,), dtype))

    zeros = ones = empty

    def full(self, shape, fill_value, dtype=None, **kwargs):
        return self.empty(shape, dtype if dtype is not None else np.asarray(fill_value).dtype)

    def empty_like(self, a, dtype=None, **kwargs):
        return MetaArray(_empty(a.shape, dtype or a.dtype))

    zeros_like = ones_like = empty_like

    def full_like(self, a, fill_value, dtype=None, **kwargs):
        return self.empty_like(a, dtype)

    def asarray(self, a, dtype=None, **kwargs):
        if isinstance(a, MetaArray):
            return a if dtype is None else a.astype(dtype)
        a = np.asarray(a, dtype=dtype)              # host data: only its shape and dtype are kept
        return MetaArray(_empty(a.shape, a.dtype))

    def array(self, a, dtype=None, copy=True, **kwargs):
        return self.asarray(_plain_tree(a) if not isinstance(a, MetaArray) else a, dtype)

    def ascontiguousarray(self, a, dtype=None):
        return self.asarray(a, dtype)

    def matmul(self, a, b, **kwargs):
        return _ufunc(np.matmul, "__call__", (a, b), kwargs)

    def copyto(self, dst, src, **kwargs):
        _check_fits(np.shape(_plain(src)), dst.shape, "source")

    def put_along_axis(self, arr, indices, values, axis):
        return None

    def asnumpy(self, a):
        raise NotImplementedError(NO_DATA)

    def from_dlpack(self, ext):
        raise BufferError("Cannot pack tensors on meta")


META_XP = _MetaNamespace()


def has_data(xp) -> bool:
    """False for the meta device's namespace: value checks in forwards skip there."""
    return xp is not META_XP
