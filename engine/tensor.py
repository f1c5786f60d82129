"""Tensor: an array on a device plus what autograd needs to know about it.

Only the core lives here (construction, metadata, conversion, autograd entry points).
The op surface (``add``, ``sum``, ``reshape``, ...) is declared beside each op in
``ops/`` and installed as methods by ``ops.install_methods``, so there is one
definition per op for the function, the method and the operator.
"""
from __future__ import annotations

import functools
import itertools
import weakref

import numpy as np

from .base import dtype as _dtype
from .base.dispatch_state import STATE as _DISPATCH
from .base.dtype import from_np
from .base.device import CPU, device as _device_cls

__all__ = ["Tensor"]

_ndarray = np.ndarray
_new = object.__new__
_weakref = weakref.ref
_uids = itertools.count(1)


class Tensor:
    """A multi-dimensional array with reverse-mode autodiff, mirroring ``torch.Tensor``."""

    __slots__ = ("_data", "requires_grad", "grad_fn", "_out_nr", "_vc", "_device", "grad",
                 "_accum", "_hooks", "_uid_", "_retains", "__weakref__", "__dict__")
    __array_ufunc__ = None  # numpy scalars defer to our reflected operators
    __array_priority__ = 1000
    # view tracking (set in the instance __dict__ by view ops only, so other tensors pay nothing):
    # _base is the root tensor a view aliases; see dispatch.apply_ for in-place ops on views
    _base = None
    _view_nograd = False   # created in no_grad mode: in-place with grad is an error, as in PyTorch
    _view_multi = None     # output of unbind/split/chunk: in-place with grad is an error

    def __new__(cls, *args, **kwargs):
        self = object.__new__(cls)
        self._data = np.zeros(0, np.float32)
        self.requires_grad = False
        self.grad_fn = self.grad = None
        self._out_nr = 0
        self._vc = [0]
        self._device = CPU
        return self

    def __init__(self, *args, **kwargs):
        """``Tensor(data)`` or ``Tensor(*sizes)``: like ``torch.Tensor``, always the default float dtype.

        The memory is made by a dispatched factory; ``self`` (possibly a subclass such as
        ``nn.Parameter``) takes it over."""
        if len(args) == 1 and not isinstance(args[0], int):
            from .creation import tensor
            self._data = tensor(args[0], dtype=_dtype.get_default_dtype())._data
        elif args:
            from .creation import empty
            self._data = empty(*args)._data

    @staticmethod
    def _wrap(data, requires_grad: bool, grad_fn, out_nr: int, vc: list, dev=CPU) -> "Tensor":
        """A Tensor over ``data`` as is. For the dispatcher, and for autograd bookkeeping that
        re-labels an existing value with a grad_fn; every other tensor is born in ``apply``."""
        t = _new(Tensor)
        t._data = data
        t.requires_grad = requires_grad
        t.grad_fn = grad_fn
        t._out_nr = out_nr
        t._vc = vc
        t._device = dev
        t.grad = None
        return t

    # ---------------------------------------------------------------- metadata
    @property
    def shape(self) -> "Size":
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self) -> _dtype.dtype:
        return from_np(self._data.dtype)

    @property
    def device(self) -> _device_cls:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_meta(self) -> bool:
        return self._device.type == "meta"

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    def stride(self, dim: int | None = None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[_wrap_dim(dim, self._data.ndim, "stride")]

    def is_contiguous(self, memory_format=None) -> bool:
        return bool(self._data.flags.c_contiguous)

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    def is_complex(self) -> bool:
        return False

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def _version(self) -> int:
        return self._vc[0]

    @property
    def data(self) -> "Tensor":
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        self._data, self._device = value._data, value._device

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def _uid(self) -> int:
        """A process-unique id (``id()`` can be reused after a tensor dies)."""
        try:
            return self._uid_
        except AttributeError:
            self._uid_ = uid = next(_uids)
            return uid

    # ---------------------------------------------------------------- conversion
    def numpy(self, *, force: bool = False) -> np.ndarray:
        if _DISPATCH.modes:
            _host_read(self, "numpy")
        if self._device is not CPU:
            if not force:
                raise TypeError(f"can't convert {self._device} device type tensor to numpy. "
                                "Use Tensor.cpu() to copy the tensor to host memory first.")
            return self._device.xp.asnumpy(self._data)
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self._data if self._device is CPU else self._device.xp.asnumpy(self._data)
        return arr if dtype is None else arr.astype(dtype)

    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        if _DISPATCH.modes:
            _host_read(self, "item")
        return self._scalar()

    def _scalar(self):
        """The one value as a Python number (no mode is told: the callers tell what they read)."""
        return self._data.reshape(()).item() if self._device is CPU else self._data.item()

    def tolist(self):
        if _DISPATCH.modes:
            _host_read(self, "tolist")
        return self.__array__().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "biu" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                               f"(shape {list(self.shape)}); use .any() or .all()")
        if _DISPATCH.modes:
            _host_read(self, "bool")
        return bool(self._scalar())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        if _DISPATCH.modes:
            _host_read(self, "print")
        from .base.repr import tensor_repr
        return tensor_repr(self)

    def __format__(self, spec: str) -> str:
        if not spec:
            return repr(self)
        if _DISPATCH.modes:
            _host_read(self, "print")
        if self._data.ndim == 0:
            return self._scalar().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self.__array__(), self.requires_grad, str(self._device)))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                               "the deepcopy protocol at the moment.")
        out = type(self).__new__(type(self))
        out._data, out._device = self._data.copy(), self._device
        out.requires_grad = self.requires_grad
        out.grad = None if self.grad is None else self.grad.clone()
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _VIEW_ATTRS})
        memo[id(self)] = out
        return out

    # ---------------------------------------------------------------- autograd
    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if not self.is_leaf and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want "
                               "to use a computed variable in a subgraph that doesn't require "
                               "differentiation use var_no_grad = var.detach().")
        if requires_grad and self._data.dtype.kind != "f":
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients "
                               f"(got {self.dtype})")
        self.requires_grad = requires_grad
        return self

    def detach(self) -> "Tensor":
        """A view sharing memory and version counter, outside the graph (a dispatched op)."""
        dispatch = _dispatcher()
        return dispatch.apply(dispatch.DETACH, self)

    def detach_(self) -> "Tensor":
        self.grad_fn, self.requires_grad = None, False
        return self

    def _accumulator(self):
        """This leaf's AccumulateGrad node; it holds the leaf weakly, so no reference cycle forms."""
        try:
            return self._accum
        except AttributeError:
            from .autograd.graph import AccumulateGrad
            acc = self._accum = AccumulateGrad(self)
            return acc

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf this tensor depends on."""
        from .autograd.engine import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def register_hook(self, hook):
        """``hook(grad) -> Tensor or None`` runs when this tensor's gradient is computed."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn._add_prehook(self._out_nr, hook)
        hooks = getattr(self, "_hooks", None)
        if hooks is None:
            hooks = self._hooks = []
        hooks.append(hook)
        from .autograd.graph import _Handle
        return _Handle(hooks, hook)

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or getattr(self, "_retains", False):
            return
        self._retains = True
        ref = _weakref(self)

        def keep(grad):
            t = ref()
            if t is not None:
                g = grad.detach() if not grad.requires_grad else grad
                t.grad = g.clone() if t.grad is None else t.grad + g
        self.grad_fn._add_retain_hook(self._out_nr, keep)

    @property
    def retains_grad(self) -> bool:
        return getattr(self, "_retains", False)

    # ---------------------------------------------------------------- device / dtype
    def to(self, *args, **kwargs) -> "Tensor":
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``; differentiable."""
        from .ops.convert import to
        return to(self, *args, **kwargs)

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> "Tensor":
        return self.to(device if device is not None else "cuda")

    def get_device(self) -> int:
        """The cuda device index, -1 on cpu and meta (as PyTorch)."""
        return self._device.index if self._device.type == "cuda" else -1

    def data_ptr(self) -> int:
        """The address of the first element (0 for meta: no memory)."""
        d = self._data
        if self._device is CPU:
            return d.__array_interface__["data"][0]
        return int(d.data.ptr)

    def is_pinned(self) -> bool:
        """True for tensors made by ``pin_memory()``."""
        return hasattr(self, "_pinned")

    def pin_memory(self) -> "Tensor":
        """Page-locked host memory for faster copies to a GPU: cupy's pinned pool backs a copy."""
        from . import cuda
        if self._device is not CPU or not cuda.is_available():
            raise RuntimeError("Cannot access accelerator device when none is available." if self._device is CPU
                               else f"cannot pin '{self._device}' memory: only dense CPU tensors can be pinned")
        import cupy
        import numpy as np
        mem = cupy.cuda.alloc_pinned_memory(self._data.nbytes)
        arr = np.frombuffer(mem, self._data.dtype, self._data.size).reshape(self._data.shape)
        np.copyto(arr, self._data)
        from .creation import from_numpy
        out = from_numpy(arr)
        out._pinned = mem            # keeps the pinned block alive with the tensor
        return out

    def type(self, dtype=None):
        """The type name (``tapelab.FloatTensor``), or a cast: to a dtype, or to a legacy type name
        (``'torch.DoubleTensor'``, ``'torch.cuda.FloatTensor'``)."""
        if dtype is None:
            return f"tapelab.{_TYPE_NAMES[self._data.dtype.name]}"
        if isinstance(dtype, str):
            name = dtype.rsplit(".", 1)[-1]
            by_name = {v: k for k, v in _TYPE_NAMES.items()}
            if name not in by_name:
                raise ValueError(f"invalid type: '{dtype}'")
            return self.to("cuda" if ".cuda." in dtype else "cpu", getattr(_dtype, by_name[name]))
        return self.to(dtype)

    def float(self):
        return self.to(_dtype.float32)

    def double(self):
        return self.to(_dtype.float64)

    def half(self):
        return self.to(_dtype.float16)

    def long(self):
        return self.to(_dtype.int64)

    def int(self):
        return self.to(_dtype.int32)

    def short(self):
        return self.to(_dtype.int16)

    def bool(self):
        return self.to(_dtype.bool)

    def byte(self):
        return self.to(_dtype.uint8)

    def char(self):
        return self.to(_dtype.int8)

    def type_as(self, other: "Tensor") -> "Tensor":
        return self.to(other.dtype)

    # ---------------------------------------------------------------- new_* constructors
    def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        from .creation import tensor
        return tensor(data, dtype=dtype or self.dtype, device=device or self._device, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        from .creation import zeros
        return zeros(*size, dtype=dtype or self.dtype, device=device or self._device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        from .creation import ones
        return ones(*size, dtype=dtype or self.dtype, device=device or self._device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        from .creation import full
        return full(size, fill_value, dtype=dtype or self.dtype, device=device or self._device,
                    requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False) -> "Tensor":
        from .creation import empty
        return empty(*size, dtype=dtype or self.dtype, device=device or self._device, requires_grad=requires_grad)


_VIEW_ATTRS = ("_base", "_view_nograd", "_view_multi")  # a deep copy owns its memory: not a view

_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
               "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor"}


class Size(tuple):
    """``tensor.shape``: a tuple that prints like ``torch.Size``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"tapelab.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})" + (f" in {op}" if op else ""))
    return dim % n


@functools.cache
def _dispatcher():
    """The dispatcher module, which builds on this one: imported on first use, then cached (a
    function-level import costs microseconds per call, and ``detach`` runs inside composites)."""
    from . import dispatch
    return dispatch


def _host_read(t: Tensor, what: str) -> None:
    """Tell every active mode that ``t``'s value is about to be copied to the host (any may refuse)."""
    for mode in tuple(_DISPATCH.modes):
        mode.host_read(t, what)


def _rebuild(arr, requires_grad, dev):
    from .creation import tensor
    return tensor(arr, requires_grad=requires_grad, device=dev)

