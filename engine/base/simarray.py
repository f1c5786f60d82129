"""Arrays that stand in for a device's arrays on the host: the simulated cuda device's, and the
meta device's built on them (``_meta.py``). Below ``device.py``: they know no device.

``_backend.simulated_cuda()`` installs, for the duration of a ``with`` block, a namespace standing in
for cupy on ``device('cuda:0')``. It computes with numpy, but its arrays are ``SimArray``s:
wrappers (not ndarray subclasses) that, like cupy arrays, refuse implicit conversion to
numpy (``np.asarray(sim)`` raises TypeError) and refuse to mix with numpy arrays in any
ufunc or array function. So a forward that builds a numpy array behind ``xp``'s back, a
factory that forgets ``device=``, a composite that mixes devices, or a dispatcher path that
converts a device array with numpy, fails on CPU where it would fail on a GPU.
Moves copy, as real ones do. DLPack exports report a CUDA device, as cupy's do.
"""
from __future__ import annotations

import types

import contextlib

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from . import simcapture as _cap

__all__ = ["SimArray"]


def map_sequence(res, f):
    """``f`` over the items of a tuple or list result, keeping its type (a namedtuple such as
    numpy's ``QRResult`` takes its items as arguments); anything else as it is."""
    if isinstance(res, (tuple, list)):
        items = [f(r) for r in res]
        return type(res)(*items) if hasattr(res, "_fields") else type(res)(items)
    return res


class SimArray(NDArrayOperatorsMixin):
    """An array on the simulated cuda device (holds a numpy array in ``_a``)."""

    __slots__ = ("_a",)

    def __init__(self, a: np.ndarray):
        self._a = a

    # cupy refuses implicit host conversion
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
                        "construct a NumPy array explicitly. (simulated cuda device)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        _refuse_host(inputs + (out if isinstance(out, tuple) else ()), ufunc.__name__)
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        fn, args = getattr(ufunc, method), _plain_tree(inputs)
        kwargs = {k: _plain_tree(v) if k != "out" else v for k, v in kwargs.items()}
        if _cap._ACTIVE:
            res = _captured(fn, ufunc.__name__, args, kwargs)
        else:
            res = fn(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return self._wrap(res)

    def __array_function__(self, func, types_, args, kwargs):
        _refuse_host(args, func.__name__)
        _refuse_host(tuple(kwargs.values()), func.__name__)
        args, kwargs = _plain_tree(args), {k: _plain_tree(v) for k, v in kwargs.items()}
        if _cap._ACTIVE:
            return self._wrap(_captured(func, func.__name__, args, kwargs))
        return self._wrap(func(*args, **kwargs))

    def __getattr__(self, name):
        if name.startswith("__"):  # no __array_interface__ / __array_struct__: numpy must not read us
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if callable(attr):
            def method(*args, **kwargs):
                _refuse_host(args, name)
                args, kwargs = _plain_tree(args), {k: _plain_tree(v) for k, v in kwargs.items()}
                if _cap._ACTIVE:
                    if name in ("item", "tolist", "tobytes"):
                        _cap.host_read(f"ndarray.{name}()")
                    return self._wrap(_captured(attr, name, args, kwargs, owner=self._a))
                return self._wrap(attr(*args, **kwargs))
            return method
        return self._wrap(attr)

    def get(self) -> np.ndarray:
        """Like ``cupy.ndarray.get``: a host copy."""
        _cap.host_read("ndarray.get()")
        return self._a.copy()

    @property
    def device(self):
        return types.SimpleNamespace(id=0)

    @property
    def flags(self):
        """cupy's ``Flags``: c_contiguous, f_contiguous and owndata; no ``writeable`` (an H200 run
        found code reading it)."""
        f = self._a.flags
        return types.SimpleNamespace(c_contiguous=f.c_contiguous, f_contiguous=f.f_contiguous, owndata=f.owndata)

    @property
    def data(self):
        """Like ``cupy.ndarray.data``: a memory pointer (``.ptr``), not a buffer."""
        return types.SimpleNamespace(ptr=self._a.__array_interface__["data"][0])

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0: what a cupy array reports

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __getitem__(self, key):
        _refuse_host(key if isinstance(key, tuple) else (key,), "__getitem__")
        if _cap._ACTIVE:     # a gather (fancy index) is a kernel; a slice is a view
            return self._wrap(_captured(self._a.__getitem__, "__getitem__", (_plain_tree(key),), {}, owner=self._a))
        return self._wrap(self._a[_plain_tree(key)])

    def __setitem__(self, key, value):
        _refuse_host((key if isinstance(key, tuple) else (key,)) + (value,), "__setitem__")
        if _cap._ACTIVE:
            _captured(self._a.__setitem__, "__setitem__", (_plain_tree(key), _plain(value)), {}, owner=self._a)
            return
        self._a[_plain_tree(key)] = _plain(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self._wrap(x) for x in self._a)

    def __bool__(self):
        _cap.host_read("bool()")
        return bool(self._a)

    def __float__(self):
        _cap.host_read("float()")
        return float(self._a)

    def __int__(self):
        _cap.host_read("int()")
        return int(self._a)

    def __index__(self):
        _cap.host_read("__index__()")
        return self._a.__index__()

    def __repr__(self):
        return f"SimArray({self._a!r})"

    @classmethod
    def _wrap(cls, res):
        """numpy results (also inside tuples and lists) as arrays of this class; a numpy scalar (an
        op on 0-d arrays, a full reduction) is a 0-d array, as cupy's results are."""
        if isinstance(res, np.ndarray):
            return cls(res)
        if isinstance(res, np.generic):
            return cls(np.asarray(res))
        return map_sequence(res, cls._wrap)


def _captured(fn, name, args, kwargs, owner=None, module="numpy"):
    """Run one call during a simulated stream capture: refused as cupy would, else recorded.
    ``owner``: the array ``fn`` is a method of."""
    _cap.check(name, args if owner is None else (owner,) + tuple(args), module)
    _cap.before(args, kwargs, owner)
    return _cap.note(fn, name, args, kwargs, fn(*args, **kwargs), owner)


def _refuse_host(args, what):
    for a in args:
        if isinstance(a, np.ndarray):
            raise TypeError(f"Unsupported type {type(a)} in {what} on the simulated cuda device: a numpy "
                            "array met a device array (cupy refuses this: build it with xp, or use a shim "
                            "from tapelab._backend)")
        if isinstance(a, (list, tuple)):
            _refuse_host(a, what)


def _plain(a):
    return a._a if isinstance(a, SimArray) else a


def _plain_tree(a):
    if isinstance(a, SimArray):
        return a._a
    if isinstance(a, (list, tuple)):
        return type(a)(_plain_tree(x) for x in a)
    if isinstance(a, slice):
        return slice(_plain(a.start), _plain(a.stop), _plain(a.step))
    return a


class _SimDevice:
    def __init__(self, index=0):
        self.id = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


_CUPY_AT = {"add", "maximum", "minimum"}   # the ufuncs whose .at cupy 14 implements


class _SimUfunc:
    """A numpy ufunc that, like cupy's, takes device arrays and refuses host ones."""

    def __init__(self, uf, array=SimArray):
        self._uf, self._array = uf, array
        self.__name__ = uf.__name__

    def __call__(self, *args, **kwargs):
        return _sim_call(self._uf, self.__name__, args, kwargs, self._array)

    def __getattr__(self, name):  # at, reduce, outer
        if name == "accumulate" or (name == "at" and self.__name__ not in _CUPY_AT):
            raise NotImplementedError(f"`cupy_{self.__name__}.{name}` is not supported yet (as in cupy 14; "
                                      f"simulated cuda device)")
        meth = getattr(self._uf, name)
        if name == "at":
            def at(a, indices, b=None):
                _refuse_host((a, indices, b), "at")
                args = (_plain(a), _plain_tree(indices)) + (() if b is None else (_plain(b),))
                if _cap._ACTIVE:
                    _captured(meth, "at", args, {})
                    return
                meth(*args)
            return at
        return lambda *args, **kwargs: _sim_call(meth, f"{self.__name__}.{name}", args, kwargs, self._array)


def _sim_call(fn, name, args, kwargs, array=SimArray, module="numpy"):
    out = kwargs.get("out")
    _refuse_host(args, name)
    _refuse_host(tuple(kwargs.values()), name)
    args, kwargs = _plain_tree(args), {k: _plain_tree(v) for k, v in kwargs.items()}
    if _cap._ACTIVE:
        res = _captured(fn, name, args, kwargs, module=module)
    else:
        res = fn(*args, **kwargs)
    if out is not None and not isinstance(out, tuple):
        return out
    return array._wrap(res)


def launch_kernel(fn, name: str, *arrays) -> None:
    """Run ``fn`` on the host arrays behind simulated device arrays, as one device kernel that
    writes its first argument (a stream capture records it: ``simcapture``)."""
    _sim_call(fn, name, arrays, {})


# cupy functions whose first parameter is a typed ndarray: a scalar or host value there is a TypeError
_ARRAY_FIRST = frozenset({"broadcast_to"})


class _SimNamespace(types.ModuleType):
    """numpy with cupy's conventions: device results are SimArrays; ``asarray`` of host data copies.

    Named ``numpy`` so that code choosing scipy.special vs cupyx.scipy.special by name gets scipy.
    """

    def __init__(self, mod=np, name="numpy", array=SimArray):
        super().__init__(name)
        self._mod, self._array = mod, array
        if mod is np:
            self.ndarray = array
            if array is SimArray:
                self.cuda = types.SimpleNamespace(
                    Device=_SimDevice, is_available=lambda: True, Stream=_cap.SimStream,
                    get_current_stream=_cap.get_current_stream, using_allocator=_using_allocator,
                    runtime=types.SimpleNamespace(is_hip=False))

    def __getattr__(self, name):
        attr = getattr(self._mod, name)
        if isinstance(attr, types.ModuleType):
            return _SimNamespace(attr, attr.__name__, self._array)
        if isinstance(attr, np.ufunc):
            return _SimUfunc(attr, self._array)
        if callable(attr) and not isinstance(attr, type):
            module = self._mod.__name__
            if name == "diagonal":      # cupy's diagonal is a writeable view; numpy's is read-only
                def diagonal(*args, **kwargs):
                    res = _sim_call(attr, name, args, kwargs, self._array, module)
                    res._a.flags.writeable = res._a.base is None or res._a.base.flags.writeable
                    return res
                return diagonal
            if name in _ARRAY_FIRST:
                def typed(*args, **kwargs):
                    if args and not isinstance(args[0], self._array):
                        raise TypeError(f"Argument 'array' has incorrect type (expected cupy._core.core._ndarray_base, "
                                        f"got {type(args[0]).__name__}) in {name} (simulated cuda device)")
                    return _sim_call(attr, name, args, kwargs, self._array, module)
                return typed
            return lambda *args, **kwargs: _sim_call(attr, name, args, kwargs, self._array, module)
        return attr

    def asarray(self, a, dtype=None):
        if isinstance(a, SimArray):
            if dtype is None:
                return a
            if _cap._ACTIVE:
                return SimArray(_captured(a._a.astype, "astype", (dtype,), {"copy": False}, owner=a._a))
            return SimArray(a._a.astype(dtype, copy=False))
        if _cap._ACTIVE:     # host -> device: a copy of the value the host holds now
            return SimArray(_captured(np.array, "array", (a,), {"dtype": dtype, "copy": True}))
        return SimArray(np.array(a, dtype=dtype, copy=True))   # host -> device: a copy

    def array(self, a, dtype=None, copy=True):
        if _cap._ACTIVE:
            return SimArray(_captured(np.array, "array", (_plain_tree(a),), {"dtype": dtype, "copy": True}))
        return SimArray(np.array(_plain_tree(a), dtype=dtype, copy=True))

    def asnumpy(self, a):
        _cap.host_read("asnumpy()")
        return np.array(_plain(a), copy=True)

    def get_default_memory_pool(self):
        """cupy's pool, as capture uses it: numpy allocates, so ``malloc`` hands out a token."""
        return _SimPool()

    def from_dlpack(self, ext):
        return SimArray(np.from_dlpack(_DLHost(ext)))


class _SimPool:
    def malloc(self, size: int):
        return types.SimpleNamespace(mem=types.SimpleNamespace(size=0))


@contextlib.contextmanager
def _using_allocator(alloc=None):
    yield


class _DLHost:
    """Presents a (simulated) device array's DLPack capsule to numpy, which only reads cpu ones."""

    def __init__(self, ext):
        self.ext = ext

    def __dlpack__(self, *args, **kwargs):
        return self.ext.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return (1, 0)
