"""Pickling with PyTorch's names, so that ``torch.load`` reads tapelab's files.

Tensors are written as PyTorch writes them: ``torch._utils._rebuild_tensor_v2`` over a storage
that the pickle names by a persistent id (``("storage", torch.FloatStorage, key, location,
numel)``) and the zip archive holds as ``data/<key>``; Parameters through
``torch._utils._rebuild_parameter``; dtypes, devices and sizes as ``torch.float32``,
``torch.device``, ``torch.Size``. Everything else (modules, optimizers, user classes) pickles
under its own name, as ``torch.save`` pickles it.

Tensors whose arrays view one numpy buffer share one storage, so views, tied weights and
slices of one tensor keep sharing memory when loaded, as in PyTorch.
"""
from __future__ import annotations

import io
import pickle
from collections import OrderedDict

import numpy as np

from ..base import dtype as _dtype
from ..base.device import device
from ..base.layout import layout
from ..core.creation import tensor_state
from ..core.tensor import Size, Tensor
from ._storage import QUANTIZED_STORAGE_NAMES, STORAGE_NAMES

_COMPRESSED = ("sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")     # torch.save writes their index arrays


class TorchName:
    """A PyTorch global written by name (``torch._utils._rebuild_tensor_v2``) without importing torch."""

    __slots__ = ("module", "name")
    _made: dict = {}

    def __new__(cls, module: str, name: str):
        key = (module, name)
        if key not in cls._made:
            made = cls._made[key] = object.__new__(cls)
            made.module, made.name = key
        return cls._made[key]

    def __call__(self, *args):
        # pickle's reduce requires a callable; this one is only ever written, by name
        raise TypeError(f"{self.module}.{self.name} is a name written into checkpoints, not a function")


class _StorageRef:
    """One storage being written: its key, device, 1-d host array in memory order, and PyTorch's storage class
    (from the array's dtype, or ``QInt8Storage`` and its kin for a quantized tensor's codes)."""

    __slots__ = ("key", "location", "array", "type_name")

    def __init__(self, key: str, location: str, array: np.ndarray, type_name: str):
        self.key, self.location, self.array, self.type_name = key, location, array, type_name


class TorchPickler(pickle._Pickler):
    """Python's pickler with PyTorch's reductions for tapelab's tensors, dtypes, devices and sizes.

    Python's own pure-Python pickler, because only it lets a subclass write a global by name
    (``dispatch``) for a module, ``torch``, that need not be importable here.
    """

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, protocol: int, legacy: bool = False):
        from ..nn import Buffer, Parameter  # nn is imported after this package
        super().__init__(file, protocol)
        self._parameter, self._plain = Parameter, (Tensor, Buffer)
        self.legacy = legacy  # the legacy format's ids end with view metadata (always None here)
        self.storages: dict[str, _StorageRef] = {}
        self._by_buffer: dict[tuple, _StorageRef] = {}

    def _save_torch_name(self, obj: TorchName) -> None:
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
        self.memoize(obj)

    def _save_dtype(self, obj: _dtype.dtype) -> None:
        self.save(TorchName("torch", obj.name))   # through the memo: a second float64 is a memo reference

    dispatch[TorchName] = _save_torch_name
    dispatch[_dtype.dtype] = dispatch[type(_dtype.qint8)] = _save_dtype
    dispatch[_dtype.qscheme] = _save_dtype

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            pid = ("storage", TorchName("torch", obj.type_name), obj.key, obj.location, int(obj.array.size))
            return (*pid, None) if self.legacy else pid
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            if obj.is_sparse:       # as PyTorch: the layout, then indices and values as ordinary tensors
                return TorchName("torch._utils", "_rebuild_sparse_tensor"), (
                    obj.layout, (obj._indices(), obj._values(), obj.shape, obj.is_coalesced()))
            if obj.layout.name in _COMPRESSED:    # the compressed and plain indices, values, size
                row = obj.layout.name in ("sparse_csr", "sparse_bsr")
                idx = (obj.crow_indices(), obj.col_indices()) if row else (obj.ccol_indices(), obj.row_indices())
                return TorchName("torch._utils", "_rebuild_sparse_tensor"), (
                    obj.layout, (*idx, obj.values().detach(), obj.shape))
            if obj.is_quantized:
                return self._reduce_quantized(obj)
            if type(obj) is self._parameter:
                return TorchName("torch._utils", "_rebuild_parameter"), (obj.detach(), obj.requires_grad, OrderedDict())
            storage, offset, stride = self._storage_of(obj)
            args = (storage, offset, tuple(obj.shape), stride, obj.requires_grad, OrderedDict())
            if type(obj) not in self._plain:
                # a subclass (fastai's TensorImage), as PyTorch's Tensor.__reduce_ex__ writes it: the
                # tensor, its class (by import path) and its Python attributes
                return TorchName("torch._tensor", "_rebuild_from_type_v2"), (
                    TorchName("torch._utils", "_rebuild_tensor_v2"), type(obj), args, tensor_state(obj))
            return TorchName("torch._utils", "_rebuild_tensor_v2"), args
        if type(obj) is Size:
            return TorchName("torch", "Size"), (list(obj),)
        if type(obj) is device:
            return TorchName("torch", "device"), (str(obj),)
        if type(obj) is layout:
            return TorchName("torch.serialization", "_get_layout"), (f"torch.{obj.name}",)
        below = getattr(super(), "reducer_override", None)   # a pickle_module's pickler (cloudpickle's)
        return below(obj) if below is not None else NotImplemented

    def _reduce_quantized(self, q: Tensor) -> tuple:
        """As PyTorch's ``Tensor.__reduce_ex__``: the integer codes in a storage named for the quantized dtype,
        then the quantizer (a per-channel tensor's scheme is written as ``per_channel_affine`` whatever it is, as
        PyTorch writes it)."""
        codes = q.int_repr()
        storage, offset, stride = self._storage_of(codes, QUANTIZED_STORAGE_NAMES[q.dtype.name])
        if q.qscheme() is _dtype.per_tensor_affine:
            quantizer = (_dtype.per_tensor_affine, q.q_scale(), q.q_zero_point())
        else:
            quantizer = (_dtype.per_channel_affine, q.q_per_channel_scales(), q.q_per_channel_zero_points(),
                         q.q_per_channel_axis())
        return TorchName("torch._utils", "_rebuild_qtensor"), (
            storage, offset, tuple(q.shape), stride, quantizer, q.requires_grad, OrderedDict())

    def _storage_of(self, t: Tensor, type_name: str | None = None) -> tuple[_StorageRef, int, tuple]:
        """The storage ``t``'s array views, and the view's element offset and strides in it.

        An array viewing (with non-negative, whole-element strides) a contiguous buffer of its own
        dtype shares that buffer's storage; any other array is copied into a storage of its own.
        """
        arr = np.asarray(t)
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        item = arr.itemsize
        offset = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        end = offset + sum((n - 1) * s for n, s in zip(arr.shape, arr.strides)) + item
        shares = (arr.size > 0 and root.dtype == arr.dtype and (root.flags.c_contiguous or root.flags.f_contiguous)
                  and offset >= 0 and end <= root.nbytes and offset % item == 0
                  and all(s >= 0 and s % item == 0 for s in arr.strides))
        if not shares:
            root, offset = arr.copy(order="C"), 0
        key = (id(root), str(t.device))
        ref = self._by_buffer.get(key)
        if ref is None:
            ref = self._by_buffer[key] = _StorageRef(str(len(self.storages)), str(t.device), root.ravel(order="K"),
                                                     type_name or STORAGE_NAMES[_dtype.from_np(root.dtype).name])
            self.storages[ref.key] = ref
        return ref, offset // item, tuple(s // item for s in arr.strides) if shares else _c_strides(arr.shape)


def _c_strides(shape: tuple) -> tuple:
    strides, n = [], 1
    for size in reversed(shape):
        strides.append(n)
        n *= max(size, 1)
    return tuple(reversed(strides))


_WITH_MODULE: dict = {}


def pickler_class(pickle_module) -> type:
    """The pickler ``torch.save(..., pickle_module=m)`` uses: ``TorchPickler`` for ``pickle``; for a module
    whose ``Pickler`` extends Python's (cloudpickle, which fastai's ``Learner.export`` passes), a class
    over both, so PyTorch's reductions come first and that pickler's own (functions and classes by
    value, its ``dispatch_table``) after them."""
    if pickle_module is pickle:
        return TorchPickler
    base = pickle_module.Pickler   # AttributeError for a module without one, as PyTorch's save
    if base is pickle.Pickler or base is pickle._Pickler:
        return TorchPickler
    if not (isinstance(base, type) and issubclass(base, (pickle.Pickler, pickle._Pickler))):
        raise TypeError(f"tapelab.save: pickle_module {getattr(pickle_module, '__name__', pickle_module)!r}: its "
                        f"Pickler {base!r} does not extend Python's pickle.Pickler")
    cls = _WITH_MODULE.get(base)
    if cls is None:
        def __init__(self, file, protocol):
            base.__init__(self, io.BytesIO(), protocol)   # the module's own attributes (cloudpickle's globals_ref)
            TorchPickler.__init__(self, file, protocol)

        def _get_memo(self):
            return self.__dict__["_tapelab_memo"]

        def _set_memo(self, value):
            self.__dict__["_tapelab_memo"] = value

        # the pure-Python pickler's memo is a dict (the C pickler's is a proxy, which the Python code cannot use)
        cls = _WITH_MODULE[base] = type(f"TorchPickler_{base.__name__}", (TorchPickler, base),
                                        {"__init__": __init__, "memo": property(_get_memo, _set_memo),
                                         "__module__": __name__})
    return cls
