"""Storages: the memory block a tensor's elements live in, with PyTorch's names
(``Tensor.untyped_storage()``, ``Tensor.storage()``, ``UntypedStorage``, ``TypedStorage``).

A tensor's block is the array that owns its memory (the root of numpy's ``base`` chain, or the
cupy allocation); views of one tensor report the same block, which is what programs and
libraries (safetensors finding shared weights, code checking that two tensors alias) ask.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..base import dtype as _dtype, shared
from ..base.device import CPU, device as Device
from .tensor import Tensor

__all__ = ["UntypedStorage", "TypedStorage"]


def _root(arr):
    """The array that owns ``arr``'s memory (numpy), or ``arr`` itself (cupy: its allocation)."""
    while isinstance(arr, np.ndarray) and isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


class UntypedStorage:
    """Bytes: ``UntypedStorage(nbytes)`` is a zeroed block on the cpu; a tensor's is its block."""

    __slots__ = ("_array", "_device")

    def __init__(self, nbytes: int = 0, *, device=None):
        dev = Device(device) if device is not None else CPU
        xp = dev.xp
        self._array, self._device = xp.zeros(int(nbytes), np.uint8), dev

    @classmethod
    def _of(cls, root, dev) -> "UntypedStorage":
        self = object.__new__(cls)
        self._array, self._device = root, dev
        return self

    @classmethod
    def from_file(cls, filename, shared: bool = False, nbytes: int = 0) -> "UntypedStorage":
        """The file's bytes, memory-mapped: written back with ``shared``, else private copy-on-write
        pages, as PyTorch's (safetensors loads every checkpoint through this)."""
        size = int(nbytes) or os.path.getsize(filename)
        if size > os.path.getsize(filename):
            raise RuntimeError(f"unable to mmap {size} bytes from file <{os.fspath(filename)}>: the file has "
                               f"{os.path.getsize(filename)} bytes")
        if size == 0:
            return cls(0)
        return cls._of(np.memmap(filename, dtype=np.uint8, mode="r+" if shared else "c", shape=(size,)), CPU)

    def untyped(self) -> "UntypedStorage":
        return self

    def __getitem__(self, index):
        """A byte (an int), or a slice of the block as a storage over the same memory."""
        if isinstance(index, slice):
            if index.step not in (None, 1):
                raise RuntimeError("slices with steps other than 1 are not supported on storages")
            return UntypedStorage._of(self._array.reshape(-1).view(np.uint8)[index], self._device)
        return int(self._host_bytes()[index])

    def __array__(self, dtype=None, copy=None):
        """The block's bytes (no copy on the cpu), so ``tapelab.asarray(storage, dtype=uint8)`` reads it."""
        arr = self._host_bytes()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    def data_ptr(self) -> int:
        if self._device.type == "meta":
            return 0
        if isinstance(self._array, np.ndarray):
            return int(self._array.__array_interface__["data"][0])
        return int(self._array.data.mem.ptr if hasattr(self._array.data, "mem") else self._array.data.ptr)

    def __sizeof__(self) -> int:
        """The object and its bytes, as PyTorch's: ``sys.getsizeof(t.untyped_storage())`` is how
        torchinfo and memory reports size a tensor's data."""
        return object.__sizeof__(self) + self.nbytes()

    def nbytes(self) -> int:
        if isinstance(self._array, np.ndarray) or self._device.type == "meta":
            return int(self._array.nbytes)
        mem = getattr(self._array.data, "mem", None)
        return int(mem.size) if mem is not None else int(self._array.nbytes)

    size = nbytes
    __len__ = nbytes

    def element_size(self) -> int:
        return 1

    def is_shared(self) -> bool:
        return isinstance(self._array, np.ndarray) and shared.is_shared(self._array)

    def _host_bytes(self) -> np.ndarray:
        """The block's bytes as a flat host uint8 array (a copy from a GPU)."""
        arr = self._array if isinstance(self._array, np.ndarray) else self._array.get()
        return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)

    def tolist(self) -> list:
        return self._host_bytes().tolist()

    def __repr__(self) -> str:
        return f"UntypedStorage(nbytes={self.nbytes()}, device={self._device})"


class TypedStorage:
    """A block seen as elements of one dtype (``Tensor.storage()``; deprecated in PyTorch).

    ``TypedStorage(wrap_storage=untyped, dtype=d)`` views a block; ``TypedStorage(n, dtype=d,
    device=dev)`` is a new zeroed one of ``n`` elements (none by default). Attributes may be set on
    it, as on PyTorch's (Lightning's lazy loader tags meta storages with their archive record)."""

    __slots__ = ("_untyped_storage", "dtype", "__dict__")

    def __init__(self, *args, device=None, dtype=None, wrap_storage: UntypedStorage | None = None,
                 _internal: bool = False):
        dtype = _dtype.float32 if dtype is None else dtype
        if wrap_storage is not None:
            if args or device is not None:
                raise RuntimeError("TypedStorage.__init__ received wrap_storage with positional arguments or a "
                                   "device; it takes only wrap_storage and dtype then")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(f"expected a UntypedStorage for argument 'wrap_storage', got "
                                f"{type(wrap_storage).__name__}")
            self._untyped_storage, self.dtype = wrap_storage, dtype
            return
        if len(args) > 1 or (args and type(args[0]) is not int):
            raise TypeError(f"TypedStorage(*args) takes at most one int (the number of elements), got {args!r}")
        size = args[0] if args else 0
        self._untyped_storage = UntypedStorage(size * dtype.itemsize, device=device)
        self.dtype = dtype

    @property
    def device(self) -> Device:
        return self._untyped_storage.device

    def untyped(self) -> UntypedStorage:
        return self._untyped_storage

    def data_ptr(self) -> int:
        return self._untyped_storage.data_ptr()

    def nbytes(self) -> int:
        return self._untyped_storage.nbytes()

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + self.nbytes()

    def element_size(self) -> int:
        return self.dtype.itemsize

    def size(self) -> int:
        return self.nbytes() // self.element_size()

    __len__ = size

    def tolist(self) -> list:
        return self._untyped_storage._host_bytes().view(self.dtype.np).tolist()

    def __repr__(self) -> str:
        return f"TypedStorage(dtype={self.dtype}, size={self.size()}, device={self.device})"


def untyped_storage(self: Tensor) -> UntypedStorage:
    """The memory block this tensor's elements live in (shared by its views)."""
    return UntypedStorage._of(_root(self._data), self._device)


def storage(self: Tensor) -> TypedStorage:
    """``untyped_storage()`` seen in this tensor's dtype (PyTorch deprecates it, with this warning)."""
    warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only "
                  "storage class. This should only matter to you if you are using storages directly.  To access "
                  "UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()", UserWarning,
                  stacklevel=2)
    return _typed_storage(self)


def _typed_storage(self: Tensor) -> TypedStorage:
    """``storage()`` without the deprecation warning (PyTorch's own readers call this)."""
    return TypedStorage(wrap_storage=untyped_storage(self), dtype=_dtype.from_np(self._data.dtype))


def storage_offset(self: Tensor) -> int:
    """Elements between the start of this tensor's memory block and its first element."""
    return (self.data_ptr() - untyped_storage(self).data_ptr()) // self._data.itemsize


OPERATORS = {"untyped_storage": untyped_storage, "storage": storage, "_typed_storage": _typed_storage,
             "storage_offset": storage_offset}


# ---------------------------------------------------------------- the legacy storage classes
class _LegacyStorage(TypedStorage):
    """``torch.FloatStorage`` and its kin: a TypedStorage of the class's dtype (``FloatStorage()`` is an
    empty one; checkpoints name a storage's type by these classes and loaders read ``cls().dtype``)."""

    _dtype_name = ""

    def __init__(self, *args, device=None, wrap_storage: UntypedStorage | None = None, _internal: bool = False):
        super().__init__(*args, device=device, dtype=getattr(_dtype, self._dtype_name), wrap_storage=wrap_storage)


LEGACY_STORAGES = {f"{prefix}Storage": type(f"{prefix}Storage", (_LegacyStorage,),
                                            {"_dtype_name": name, "__module__": "tapelab", "__slots__": ()})
                   for prefix, name in [("Double", "float64"), ("Float", "float32"), ("Half", "float16"),
                                        ("BFloat16", "bfloat16"), ("Long", "int64"), ("Int", "int32"),
                                        ("Short", "int16"), ("Char", "int8"), ("Byte", "uint8"), ("Bool", "bool"),
                                        ("ComplexFloat", "complex64"), ("ComplexDouble", "complex128")]}
