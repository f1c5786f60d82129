"""Tensor: an array on a device plus what autograd needs to know about it.

Only data and metadata live here: a Tensor knows its array, device, dtype and autograd
fields, and nothing above the core's bottom. Every method that needs a higher layer is
declared by that layer and bound by ``ops.install_methods``: the op surface (``add``,
``sum``, ``reshape``, ...) beside each op in ``ops/``; construction from data, ``new_*``,
pickling and ``pin_memory`` in ``core/creation.py``; hooks in ``core/node.py``; ``detach``
in ``autograd/views.py``; ``backward`` in ``autograd/engine.py``; ``to`` in ``ops/convert.py``.
"""
from __future__ import annotations

import itertools
import numbers
import warnings

import numpy as np

from ..base import dtype as _dtype
from ..base.dispatch_state import STATE as _DISPATCH
from ..base.dtype import from_np
from ..base.coo import COOArray
from ..base.compressed import LAYOUT_NAMES, CompressedArray
from ..base import shared as _shared
from ..base.device import CPU, device as _device_cls
from ..base.layout import sparse_coo, strided
from ..base.repr import tensor_repr
from ..base.dtype import FLOATING_KINDS, INEXACT_KINDS
from ..base.grad_mode import is_grad_enabled

__all__ = ["Tensor", "Size", "sum_to", "unbroadcast"]

_ndarray = np.ndarray
_new = object.__new__
_uids = itertools.count(1)
# the memory of a tensor ``__new__`` made and nothing filled yet: ``Tensor.__init__`` (``Tensor(data)``)
# fills only such a tensor, so a subclass whose ``__new__`` returns a finished tensor keeps its values
_UNMADE = np.zeros(0, np.float32)


class Tensor:
    """A multi-dimensional array with reverse-mode autodiff, mirroring ``torch.Tensor``."""

    __slots__ = ("_data", "requires_grad", "grad_fn", "_out_nr", "_vc", "_device", "_grad",
                 "_accum", "_uid_", "_retains", "__weakref__", "__dict__")
    # numpy arrays and scalars defer to our reflected operators (the priority); a numpy ufunc of a
    # tensor (``np.log(t)``) computes on its array and hands the result back as a tensor
    # (``__array_wrap__``, declared in creation.py), as PyTorch's
    __array_priority__ = 1000
    # view tracking (set in the instance __dict__ by view ops only, so other tensors pay nothing):
    # _base is the root tensor a view aliases; see dispatch.apply_ for in-place ops on views
    _base = None
    _view_nograd = False   # created in no_grad mode: in-place with grad is an error, as in PyTorch
    _grad_nowhere = False  # such a view requiring grad only through its base: a leaf whose gradient goes nowhere
    _view_multi = None     # output of unbind/split/chunk: in-place with grad is an error

    def __new__(cls, *args, **kwargs):
        self = object.__new__(cls)
        self._data = _UNMADE
        self.requires_grad = False
        self.grad_fn = self._grad = None
        self._out_nr = 0
        self._vc = [0]
        self._device = CPU
        return self

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
        t._grad = None
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
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    # the devices, layouts and representations tapelab has none of: False, as PyTorch reports
    # them for a dense cpu tensor
    is_xpu = is_mps = is_mkldnn = is_quantized = is_nested = \
        is_vulkan = is_ipu = is_xla = is_maia = is_mtia = property(lambda self: False)

    @property
    def is_sparse(self) -> bool:
        """A sparse COO tensor: its data is a ``COOArray`` (``base/coo.py``) instead of an ndarray."""
        return type(self._data) is COOArray

    @property
    def is_sparse_csr(self) -> bool:
        """A sparse CSR tensor (PyTorch's is False for CSC, BSR and BSC)."""
        return type(self._data) is CompressedArray and self._data.layout.name == "sparse_csr"

    @property
    def layout(self):
        data = self._data
        if type(data) is CompressedArray:
            return data.layout
        return sparse_coo if type(data) is COOArray else strided

    def _coo(self, what: str) -> COOArray:
        if type(self._data) is not COOArray:
            got = LAYOUT_NAMES[self._data.layout] if type(self._data) is CompressedArray else "Strided"
            raise RuntimeError(f"{what} expected sparse coordinate tensor layout but got {got}")
        return self._data

    def is_coalesced(self) -> bool:
        return self._coo("is_coalesced").coalesced

    def _nnz(self) -> int:
        if type(self._data) is CompressedArray:
            return self._data.nnz
        return self._coo("_nnz").nnz

    def sparse_dim(self) -> int:
        return self._data.sparse_dim if type(self._data) in (COOArray, CompressedArray) else 0

    def dense_dim(self) -> int:
        return self._data.dense_dim if type(self._data) in (COOArray, CompressedArray) else self._data.ndim

    def is_conj(self) -> bool:
        return False

    def is_neg(self) -> bool:
        return False

    def is_inference(self) -> bool:
        return False

    def is_shared(self) -> bool:
        return type(self._data) is np.ndarray and _shared.is_shared(self._data)

    def share_memory_(self) -> "Tensor":
        """Moves a cpu tensor's data into memory that processes forked afterwards share, so their
        in-place writes (hogwild optimizer steps) reach this process; other devices are left as is."""
        if type(self._data) is np.ndarray and not _shared.is_shared(self._data):
            self._data = _shared.shared_copy(self._data)
        return self

    def is_signed(self) -> bool:
        return self._data.dtype.kind in "ifV"

    def is_same_size(self, other: "Tensor") -> bool:
        return self._data.shape == other._data.shape

    def is_nonzero(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous" if self._data.size
                               else "Boolean value of Tensor with no values is ambiguous")
        return bool(self)

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
        if type(self._data) is CompressedArray:
            raise RuntimeError("Sparse CSR tensors do not have strides")
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[_wrap_dim(dim, self._data.ndim, "stride")]

    def is_contiguous(self, memory_format=None) -> bool:
        if type(self._data) is CompressedArray:
            raise RuntimeError("Sparse CSR tensors do not have is_contiguous")
        return bool(self._data.flags.c_contiguous)

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind in FLOATING_KINDS

    def is_complex(self) -> bool:
        return self._data.dtype.kind == "c"

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def _is_view(self) -> bool:
        """Whether this tensor aliases another one's memory (torchviz draws a view's base beside it)."""
        return self._base is not None

    @property
    def output_nr(self) -> int:
        """Which output of its ``grad_fn`` this tensor is (0 for a leaf), as ``next_functions`` numbers it."""
        return self._out_nr

    @property
    def _version(self) -> int:
        return self._vc[0]

    @property
    def data(self) -> "Tensor":
        """A detached alias with its own version counter, as PyTorch's: writes through it are not seen by
        autograd's version check (torchdiffeq's Runge-Kutta steps write each stage through ``.data``)."""
        d = self.detach()
        d._vc = [0]
        return d

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
        if _DISPATCH.slow and _DISPATCH.modes:
            _host_read(self, "numpy")
        if self._device is not CPU:
            if not force:
                raise TypeError(f"can't convert {self._device} device type tensor to numpy. "
                                "Use Tensor.cpu() to copy the tensor to host memory first.")
            return self._device.xp.asnumpy(self._data)
        if type(self._data) in (COOArray, CompressedArray):
            self._data.__array__()      # PyTorch's TypeError naming the layout
        if self.requires_grad and not force and is_grad_enabled():
            # PyTorch refuses only while grad mode is on: under no_grad a parameter's values are read
            # directly (botorch's as_ndarray hands scipy the parameters this way)
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if type(self._data) in (COOArray, CompressedArray):
            self._data.__array__()      # PyTorch's TypeError naming the layout
        arr = self._data if self._device is CPU else self._device.xp.asnumpy(self._data)
        if dtype is not None:
            return arr.astype(dtype, copy=bool(copy))
        # NumPy 2 asks copy=True for np.array(t): the result must not share the tensor's memory (PyTorch's
        # __array__ takes no copy=, so NumPy copies there), while np.asarray(t) shares it in both
        return arr.copy() if copy and arr is self._data else arr

    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        if _DISPATCH.slow and _DISPATCH.modes:
            _host_read(self, "item")
        return self._scalar()

    def _scalar(self):
        """The one value as a Python number (no mode is told: the callers tell what they read)."""
        return self._data.reshape(()).item() if self._device is CPU else self._data.item()

    def tolist(self):
        if _DISPATCH.slow and _DISPATCH.modes:
            _host_read(self, "tolist")
        return self.__array__().tolist()

    def _python_number(self):
        """The one value for ``int()``/``float()``/``complex()``; any other size is PyTorch's ValueError
        (``item()``'s is a RuntimeError)."""
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __float__(self) -> float:
        if self.requires_grad:
            _warn_scalar_of_grad()
        return float(self._python_number())

    def __int__(self) -> int:
        return int(self._python_number())

    def __long__(self) -> int:
        """Python 2's name for ``__int__``, which PyTorch's Tensor keeps."""
        return self.__int__()

    def __complex__(self) -> complex:
        if self.requires_grad:
            _warn_scalar_of_grad()
        return complex(self._python_number())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "biu" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                               f"(shape {list(self.shape)}); use .any() or .all()")
        if _DISPATCH.slow and _DISPATCH.modes:
            _host_read(self, "bool")
        return bool(self._scalar())

    def __contains__(self, element) -> bool:
        """``element in t``: whether any entry equals ``element`` (a number or a tensor, compared with
        broadcasting), as PyTorch's; iterating rows instead made ``pad_id in ids[:, [-1, 0]]`` ambiguous."""
        if not isinstance(element, (Tensor, numbers.Number)):
            raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                               f"{type(element)}.")
        return bool((element == self).any().item())

    def __nonzero__(self) -> bool:
        """Python 2's name for ``__bool__``, which PyTorch's Tensor keeps."""
        return self.__bool__()

    def __reversed__(self):
        """``reversed(t)``: ``t`` flipped along dim 0 (a 0-d tensor is itself), as PyTorch's."""
        return self if self._data.ndim == 0 else self.flip(0)

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
        suffixes = []
        if _DISPATCH.slow and _DISPATCH.modes:
            _host_read(self, "print")
            for mode in tuple(_DISPATCH.modes):
                suffixes += mode.repr_suffixes(self)
        cls = type(self)   # a subclass prints its name unless its own __repr__ frames ours (Buffer)
        if cls is Tensor:
            return tensor_repr(self, "tensor(", suffixes)
        param = getattr(cls, "_parameter_class", None)
        if param is not None or getattr(self, "_is_param", False):
            # PyTorch's rule for parameters: Parameter itself prints tensor(...), a subclass of it or a
            # program's tensor made a parameter Parameter(Name(...))
            if param is not None and cls is param():
                return tensor_repr(self, "tensor(", suffixes)
            return f"Parameter({tensor_repr(self, f'{cls.__name__}(', suffixes)})"
        plain = cls.__repr__ is not Tensor.__repr__
        return tensor_repr(self, "tensor(" if plain else f"{cls.__name__}(", suffixes)

    def __format__(self, spec: str) -> str:
        """As PyTorch: a 0-d tensor formats its value (``f"{t}"`` is ``3.0``, ``f"{t:.2f}"``
        ``3.00``); any other tensor formats as its repr (a non-empty spec is a TypeError)."""
        if self._data.ndim == 0 and self._device.type != "meta" and type(self) is Tensor:
            if _DISPATCH.slow and _DISPATCH.modes:
                _host_read(self, "print")
            return self._scalar().__format__(spec)
        return object.__format__(self, spec)

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
                               "because of a torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        cls = type(self)
        try:
            out = cls.__new__(cls)
        except TypeError:   # a subclass whose __new__ takes arguments (MONAI's MetaTensor): PyTorch's route
            out = self.new_empty([])
            if type(out) is not cls:
                raise RuntimeError("The default implementation of __deepcopy__() for non-wrapper subclasses only "
                                   "works for subclass types that implement new_empty() and for which that "
                                   "function returns another instance of the same subclass. You should either "
                                   "properly implement new_empty() for your subclass or override __deepcopy__() "
                                   "if it is intended behavior for new_empty() to return an instance of a "
                                   "different type.") from None
        out._data, out._device = self._data.copy(), self._device
        out.requires_grad = self.requires_grad
        out.grad = None if self.grad is None else self.grad.clone()
        memo[id(self)] = out
        state = {k: v for k, v in self.__dict__.items() if k not in _VIEW_ATTRS}
        if state and cls is not Tensor and not hasattr(cls, "_parameter_class"):
            # a subclass's attributes are deep-copied, as PyTorch's (MONAI's CacheDataset deep-copies a
            # cached MetaTensor so random transforms never write into the cache's metadata)
            import copy
            state = copy.deepcopy(state, memo)
        out.__dict__.update(state)
        return out

    # ---------------------------------------------------------------- autograd
    @property
    def grad(self) -> "Tensor | None":
        """The accumulated gradient. Assigning checks it as PyTorch does: same size, dtype and
        device as this tensor, or None (an optimizer would otherwise broadcast a wrong one)."""
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        if value is not None:
            _check_grad(self, value)
        self._grad = value

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if not self.is_leaf and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want "
                               "to use a computed variable in a subgraph that doesn't require "
                               "differentiation use var_no_grad = var.detach().")
        if requires_grad and self._data.dtype.kind not in INEXACT_KINDS:
            raise RuntimeError(f"only Tensors of floating point and complex dtype can require gradients "
                               f"(got {self.dtype})")
        self.requires_grad = requires_grad
        return self

    @property
    def retains_grad(self) -> bool:
        return getattr(self, "_retains", False)

    # ---------------------------------------------------------------- device / dtype
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

    def type(self, dtype=None):
        """The legacy type name, spelled as PyTorch spells it (``'torch.FloatTensor'``,
        ``'torch.cuda.FloatTensor'``: programs compare these strings), or a cast: to a dtype, a
        legacy type (``tapelab.DoubleTensor``), ``Tensor`` itself (the default type: PyTorch-GAN's
        ``Tensor = torch.cuda.FloatTensor if cuda else torch.Tensor``) or a legacy type name."""
        if dtype is None:
            return f"torch.{'cuda.' if self._device.type == 'cuda' else ''}{_TYPE_NAMES[self._data.dtype.name]}"
        if dtype is Tensor:
            return self.to("cpu", _dtype.get_default_dtype())
        if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), _dtype.dtype):
            return self.to("cuda" if getattr(dtype, "is_cuda", False) else "cpu", dtype.dtype)
        if isinstance(dtype, type):
            raise ValueError(f"invalid type: '{dtype.__name__}'")
        if not isinstance(dtype, (str, _dtype.dtype)):
            raise TypeError("dtype must be a type, str, or dtype object")
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

    def cfloat(self):
        return self.to(_dtype.complex64)

    def cdouble(self):
        return self.to(_dtype.complex128)

    def bfloat16(self):
        return self.to(_dtype.bfloat16)

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

_VIEW_ATTRS = ("_base", "_view_nograd", "_view_multi", "_grad_nowhere")  # a deep copy owns its memory: not a view

_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
               "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor", "bfloat16": "BFloat16Tensor",
               "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor"}


_scalar_warned = [False]


def _warn_scalar_of_grad() -> None:
    """PyTorch's warning, once per process (``float(loss)`` in a logging line is common), and only while
    grad mode is on (LBFGS's ``float(closure())`` runs under no_grad and says nothing)."""
    if not _scalar_warned[0] and is_grad_enabled():
        _scalar_warned[0] = True
        warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
                      "Consider using tensor.detach() first.", UserWarning, stacklevel=3)


class Size(tuple):
    """``tensor.shape``: a tuple that prints like ``torch.Size`` (as ``torch.Size`` under ``install_aliases``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{_dtype.package_name()}.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    # slices, concatenations and repeats stay Sizes, as PyTorch's (linear_operator: ``shape[-2:].numel()``)
    def __getitem__(self, index):
        item = tuple.__getitem__(self, index)
        return Size(item) if type(index) is slice else item

    def __add__(self, other):
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        return Size(tuple.__add__(other, self)) if isinstance(other, tuple) else NotImplemented

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})" + (f" in {op}" if op else ""))
    return dim % n


def _host_read(t: Tensor, what: str) -> None:
    """Tell every active mode that ``t``'s value is about to be copied to the host (any may refuse)."""
    for mode in tuple(_DISPATCH.modes):
        mode.host_read(t, what)


def _check_grad(t: Tensor, grad) -> None:
    if not isinstance(grad, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(grad).__name__}")
    if grad._data.shape != t._data.shape:
        raise RuntimeError(f"attempting to assign a gradient of size '{list(grad._data.shape)}' to a tensor of size "
                           f"'{list(t._data.shape)}'. Please ensure that the gradient and the tensor are the same size")
    if grad._data.dtype != t._data.dtype:
        raise RuntimeError(f"attempting to assign a gradient with dtype '{grad.dtype}' to a tensor with dtype "
                           f"'{t.dtype}'. The gradient must match the tensor's dtype")
    if grad._device is not t._device:
        raise RuntimeError(f"attempting to assign a gradient located on device '{grad.device}' to a tensor located "
                           f"on device '{t.device}'. Please ensure that the gradient and the tensor are on the same "
                           f"device")


# ---------------------------------------------------------------- gradient shapes
def unbroadcast(g: Tensor, x) -> Tensor | None:
    """Sum ``g`` back to the shape of input ``x`` (None when ``x`` is a Python number)."""
    if not isinstance(x, Tensor):
        return None
    shape = x._data.shape
    return g if g._data.shape == shape else sum_to(g, shape)   # the common case without a call


def sum_to(g: Tensor, shape: tuple) -> Tensor:
    """Sum a broadcast gradient ``g`` down to ``shape`` (vjps and custom Functions use it)."""
    gshape = g._data.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1)
    if axes:
        g = g.sum(axes, keepdim=True)
    return g.reshape(shape) if g._data.shape != shape else g
