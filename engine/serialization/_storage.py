"""Storages (the flat typed buffers PyTorch's checkpoints keep tensor data in) and the tensors
rebuilt over them, with PyTorch's names for both.

A checkpoint stores each storage once and each tensor as a (storage, offset, size, stride) view
of one, so tensors that shared memory when they were saved share it again when loaded. Storages
are read on the CPU; ``map_location`` then picks each one's device. Tensors placed on cuda are
copied there one by one (they no longer share memory with each other).
"""
from __future__ import annotations

import numpy as np

from ..base import dtype as _dtype
from ..base.device import cuda_available, device as Device
from ..core.storage import TypedStorage
from ..core.tensor import Tensor
from ._errors import CheckpointError

# PyTorch's legacy storage classes (torch.FloatStorage ...) by dtype name: a checkpoint names its
# storages' element types with them. PyTorch's UntypedStorage holds bytes.
STORAGE_NAMES = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
                 "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
                 "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
                 "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage"}
# a quantized tensor's integer codes are in a storage named for its quantized dtype
QUANTIZED_STORAGE_NAMES = {"qint8": "QInt8Storage", "quint8": "QUInt8Storage", "qint32": "QInt32Storage"}
_DTYPE_NAMES = ({v: k for k, v in STORAGE_NAMES.items()} | {"UntypedStorage": "uint8"}
                | {"QInt8Storage": "int8", "QUInt8Storage": "uint8", "QInt32Storage": "int32"})


def dtype_named(name: str, what: str) -> _dtype.dtype:
    """tapelab's dtype called ``name``, or an error saying the checkpoint needs one tapelab lacks."""
    dt = getattr(_dtype, name, None)
    if not isinstance(dt, _dtype.dtype):
        raise RuntimeError(f"{what} holds {name} data, and tapelab has no {name} dtype "
                           f"(tapelab's dtypes: {', '.join(d.name for d in _dtype.ALL)})")
    return dt


class StorageType:
    """What ``torch.FloatStorage`` (or another storage class) stands for in a checkpoint: a dtype."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    @property
    def dtype(self) -> _dtype.dtype:
        return dtype_named(_DTYPE_NAMES[self.name], f"torch.{self.name}")

    def __repr__(self) -> str:
        return f"StorageType(torch.{self.name})"


def is_storage_name(name: str) -> bool:
    return name in _DTYPE_NAMES


class Storage:
    """A loaded storage: a 1-d host array and the device (``location``) its tensors go to.

    A ``map_location`` callable receives one, as PyTorch's receives a storage deserialized on the
    CPU: returning it keeps it there, ``storage.cuda(i)`` or ``storage.to(device)`` moves it.
    """

    __slots__ = ("array", "location")

    def __init__(self, array: np.ndarray, location: str = "cpu"):
        self.array, self.location = array, location

    @property
    def dtype(self) -> _dtype.dtype:
        return _dtype.from_np(self.array.dtype)

    @property
    def device(self) -> Device:
        return Device(self.location)

    def size(self) -> int:
        return int(self.array.size)

    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def to(self, device) -> "Storage":
        return Storage(self.array, str(Device(device)))

    def cpu(self) -> "Storage":
        return self.to("cpu")

    def cuda(self, device=None) -> "Storage":
        return self.to(f"cuda:{device}" if isinstance(device, int) else device or "cuda")

    def __getitem__(self, key: slice) -> "Storage":
        return Storage(self.array[key], self.location)

    def __len__(self) -> int:
        return int(self.array.size)

    def __repr__(self) -> str:
        return f"Storage(dtype={self.dtype}, size={self.array.size}, location={self.location!r})"


def checked_storage_id(where: str, pid: tuple, length: int) -> tuple:
    """``(storage_type, key, location, numel, ...)`` from a persistent id ``("storage", ...)`` of ``length``."""
    if not (len(pid) == length and isinstance(pid[1], StorageType) and isinstance(pid[2], (str, bytes))
            and isinstance(pid[3], (str, bytes)) and type(pid[4]) is int and pid[4] >= 0):
        raise CheckpointError(where, f"invalid storage reference {pid!r}")
    key, location = (p.decode("ascii") if isinstance(p, bytes) else p for p in pid[2:4])
    return (pid[1], key, location, *pid[4:])


def check_map_location(map_location) -> None:
    if map_location is not None and not isinstance(map_location, (str, Device, dict)) and not callable(map_location):
        raise TypeError(f"tapelab.load: map_location must be a device, a device name, a dict of device names "
                        f"or a callable (storage, location) -> storage, got {type(map_location).__name__}")


def place(array: np.ndarray, location: str, map_location) -> Storage:
    """``array`` as a Storage on the device ``map_location`` chooses for one saved at ``location``."""
    if map_location is None:
        target = location
    elif isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif isinstance(map_location, (str, Device)):
        target = str(map_location)
    else:
        moved = map_location(Storage(array), location)
        if moved is not None and not isinstance(moved, Storage):
            raise TypeError(f"map_location returned {type(moved).__name__}; it must return the storage it was "
                            "given (or one from its .cpu()/.cuda()/.to()) or None")
        target = location if moved is None else moved.location
    dev = Device(str(target))
    if dev.type == "cuda" and not cuda_available():
        raise RuntimeError("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
                           "False. If you are running on a CPU-only machine, please use torch.load with "
                           "map_location=torch.device('cpu') to map your storages to the CPU.")
    return Storage(array, str(dev))


# ---------------------------------------------------------------- PyTorch's rebuild functions
def rebuild_tensor(storage: Storage, storage_offset: int, size, stride, dtype: _dtype.dtype | None = None) -> Tensor:
    """The tensor viewing ``storage`` from ``storage_offset`` with ``size`` and ``stride`` (in elements).

    Bounds are checked before the view is made: a view past the storage's end would read memory
    the checkpoint does not own.
    """
    from ..core.creation import from_numpy
    array = storage.array if dtype is None else storage.array.view(dtype.np)
    size, stride = tuple(size), tuple(stride)
    if not (len(size) == len(stride) and all(type(n) is int and n >= 0 for n in (storage_offset, *size, *stride))):
        raise CheckpointError("a tensor record", f"invalid tensor in checkpoint: offset {storage_offset}, "
                                                 f"size {size}, stride {stride}")
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else storage_offset - 1
    if last >= array.size:
        raise CheckpointError("a tensor record", f"invalid tensor in checkpoint: size {list(size)}, stride "
                                                 f"{list(stride)} and offset {storage_offset} reach element "
                                                 f"{last}, past the end of its storage of {array.size} elements")
    view = np.lib.stride_tricks.as_strided(array[storage_offset:], size, [s * array.itemsize for s in stride])
    t = from_numpy(view)
    return t if storage.location == "cpu" else t.to(storage.location)


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    """``torch._utils._rebuild_tensor_v2``: also over a ``TypedStorage`` (a lazy loader's: Lightning's
    builds the meta tensor of each record first, then the tensor over the record's bytes)."""
    if isinstance(storage, TypedStorage):
        if storage.device.type == "meta":
            from ..core.creation import empty_strided
            return empty_strided(tuple(size), tuple(stride), dtype=storage.dtype,
                                 device="meta").requires_grad_(requires_grad)
        storage = Storage(storage.untyped()._host_bytes().view(storage.dtype.np), str(storage.device))
    return rebuild_tensor(storage, storage_offset, size, stride).requires_grad_(requires_grad)


def rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    """For dtypes PyTorch stores as bytes (UntypedStorage) paired with the dtype."""
    return rebuild_tensor(storage, storage_offset, size, stride, dtype).requires_grad_(requires_grad)


def rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks):
    from ..nn import Parameter
    return Parameter(data, requires_grad)


def rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return set_obj_state(rebuild_parameter(data, requires_grad, backward_hooks), state)


def rebuild_from_type_v2(func, new_type, args, state):
    """A tensor with Python attributes (``state``), made ``new_type`` when that is a Tensor subclass
    (``as_subclass``, as PyTorch's); a class with its own ``__setstate__`` takes the state itself."""
    ret = func(*args)
    if type(ret) is not new_type:
        if not (isinstance(new_type, type) and issubclass(new_type, Tensor)):
            raise RuntimeError(f"invalid checkpoint: {new_type!r} is not a Tensor subclass")
        ret = ret.as_subclass(new_type)
    setstate = getattr(new_type, "__setstate__", None)
    if setstate is not None and setstate is not getattr(Tensor, "__setstate__", None) \
            and setstate is not getattr(object, "__setstate__", None):
        ret.__setstate__(state)
        return ret
    return set_obj_state(ret, state)


def rebuild_device_tensor_from_cpu_tensor(data: Tensor, dtype, device, requires_grad: bool) -> Tensor:
    return data.to(device=device, dtype=dtype).requires_grad_(requires_grad)


def set_obj_state(obj, state):
    """Python attributes saved with a tensor: a dict, or (dict, slots) as ``object.__reduce_ex__`` makes.

    Only the object's own attributes: a name its class defines (``_data``, ``requires_grad``,
    methods) is refused, so a checkpoint cannot swap a tensor's internals.
    """
    dict_state, slots_state = state if isinstance(state, tuple) else (state, None)
    for k, v in {**(dict_state or {}), **(slots_state or {})}.items():
        if type(k) is not str or hasattr(type(obj), k):
            raise RuntimeError(f"invalid state in checkpoint: {type(obj).__name__} attribute {k!r} is not "
                               "an attribute a checkpoint may set")
        setattr(obj, k, v)
    return obj
