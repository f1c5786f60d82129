"""PyTorch's legacy checkpoint format (``torch.save`` before 1.6, or with
``_use_new_zipfile_serialization=False``): pickles one after another in one stream.

1. the magic number, the protocol version (1001) and a dict describing the writer's system;
2. the object, whose storages are persistent ids ``("storage", torch.FloatStorage, key,
   location, numel, view_metadata)`` and whose module classes are ``("module", class, source
   file, source)`` (the source only lets PyTorch warn when a class changed);
3. the sorted list of storage keys; then per key an int64 element count and the raw
   little-endian elements.

The storages' bytes come after the object that uses them, so the object's pickle is read twice:
first by a skimming unpickler that only collects the persistent ids (every global it meets is a
stand-in that does nothing), then, with every storage loaded, by the real one.
"""
from __future__ import annotations

import io
import pickle
import struct

import numpy as np

from ..base.device import device as Device
from ._errors import CheckpointError
from ._pickler import TorchPickler
from ._storage import Storage, StorageType, checked_storage_id, is_storage_name, place
from ._weights_only import WeightsOnlyUnpickler

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
_SYS_INFO = {"protocol_version": PROTOCOL_VERSION, "little_endian": True,
             "type_sizes": {"short": 2, "int": 4, "long": 8}}


def save(obj, f, protocol: int) -> None:
    """Write ``obj`` in the legacy format (``torch.save(..., _use_new_zipfile_serialization=False)``)."""
    for header in (MAGIC_NUMBER, PROTOCOL_VERSION, _SYS_INFO):
        pickle.dump(header, f, protocol=protocol)
    pickler = TorchPickler(f, protocol, legacy=True)
    pickler.dump(obj)
    keys = sorted(pickler.storages)
    pickle.dump(keys, f, protocol=protocol)
    for key in keys:
        array = pickler.storages[key].array
        f.write(struct.pack("<q", array.size))
        f.write(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())


def looks_legacy(data: bytes) -> bool:
    """Every legacy checkpoint starts with a pickle of the magic number (read here with no globals allowed)."""
    try:
        return WeightsOnlyUnpickler(io.BytesIO(data), _no_storage).load() == MAGIC_NUMBER
    except Exception:  # anything else is not a legacy checkpoint, whatever it is
        return False


def load(where: str, data: bytes, map_location, make_unpickler):
    f = io.BytesIO(data)
    magic, protocol, _sys_info = (_plain(where, f) for _ in range(3))
    if magic != MAGIC_NUMBER or protocol != PROTOCOL_VERSION:
        raise CheckpointError(where, f"invalid magic number or protocol version ({magic!r}, {protocol!r})")
    start = f.tell()
    skim = _Skim(f)
    try:
        skim.load()
    except Exception as e:
        raise CheckpointError(where, f"corrupt pickle ({type(e).__name__}: {e})") from None
    keys = _plain(where, f)
    roots = _read_storages(where, f, keys, skim.types, map_location)
    f.seek(start)

    def load_storage(pid):
        if pid[0] == "module":  # ("module", class, source file, source): full loads only reach here
            return pid[1]
        storage_type, key, location, numel, view = checked_storage_id(where, pid, 6)
        storage = roots[key]
        if view is None:
            return storage
        _view_key, offset, size = view
        return storage[offset:offset + size]

    try:
        return make_unpickler(f, load_storage).load()
    except (TypeError, IndexError, KeyError, ValueError, EOFError, OverflowError, struct.error) as e:
        # a damaged object pickle: an allowed rebuild function called with the wrong arguments, a
        # memo index out of range, a cut-short opcode
        raise CheckpointError(where, f"corrupt pickle ({type(e).__name__}: {e})") from None


def _plain(where: str, f):
    """One of the format's plain pickles (numbers, a dict, a list of keys): no globals allowed."""
    try:
        return WeightsOnlyUnpickler(f, _no_storage).load()
    except Exception as e:       # whatever a damaged header pickle makes the unpickler raise
        raise CheckpointError(where, f"corrupt or truncated legacy checkpoint ({type(e).__name__}: {e})") from None


def _is_device(location: str) -> bool:
    try:
        Device(location)
    except Exception:    # (RuntimeError for a malformed device string, as PyTorch's)
        return False
    return True


def _no_storage(pid):
    raise pickle.UnpicklingError("unexpected persistent id in a header record")


def _read_storages(where: str, f, keys, types: dict, map_location) -> dict[str, Storage]:
    if not isinstance(keys, list) or set(keys) != set(types):
        raise CheckpointError(where, "the storage keys do not match the storages the object uses")
    out = {}
    for key in keys:
        name, location = types[key]
        if not is_storage_name(name):
            raise CheckpointError(where, f"storage {key} has the unknown storage type {name!r}")
        if not isinstance(location, str) or not _is_device(location):
            raise CheckpointError(where, f"storage {key} has the bad device {location!r}")
        dtype = np.dtype(StorageType(name).dtype.np).newbyteorder("<")
        head = f.read(8)
        (numel,) = struct.unpack("<q", head) if len(head) == 8 else (-1,)
        left = len(f.getbuffer()) - f.tell()
        if numel < 0 or numel * dtype.itemsize > left:
            raise CheckpointError(where, f"truncated: storage {key} is cut short")
        raw = f.read(numel * dtype.itemsize)
        array = np.frombuffer(bytearray(raw), dtype).astype(dtype.newbyteorder("="), copy=False)
        out[key] = place(array, location, map_location)
    return out


class _Inert:
    """What every global is while skimming: accepts any construction and any state, does nothing."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, item):
        pass

    def extend(self, items):
        pass

    def add(self, item):
        pass


class _Skim(pickle.Unpickler):
    """Walks the object's pickle collecting ``key -> (storage class name, location)``; runs nothing."""

    def __init__(self, file):
        super().__init__(file, encoding="utf-8")
        self.types: dict[str, tuple[str, str]] = {}
        self._stand_ins: dict[tuple, type] = {}

    def find_class(self, module: str, name: str):
        key = (module, name)
        if key not in self._stand_ins:
            self._stand_ins[key] = type(name, (_Inert,), {"global_name": name})
        return self._stand_ins[key]

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage" and isinstance(pid[1], type):
            location = pid[3].decode("ascii") if isinstance(pid[3], bytes) else pid[3]
            self.types[pid[2]] = (pid[1].global_name, location)
        if isinstance(pid, tuple) and len(pid) == 4 and pid[0] == "module":
            return pid[1]
        return _Inert()
