"""``save`` / ``load`` without pickle: one safetensors file holding tensors plus a JSON tree.

File format (version 1). A standard safetensors file whose ``__metadata__`` carries:

- ``format``: ``"tapelab"``; ``tapelab.version``: ``"1"``;
- ``tapelab.tree``: the saved object as JSON. Lists are JSON arrays; every other container
  is a one-key tag, so keys of any supported type and the container types survive:
  ``{"dict": [[key, value], ...]}``, ``{"odict": [...]}`` (OrderedDict), ``{"tuple": [...]}``,
  ``{"tensor": name, "device": "cpu", "grad": false, "param": false}``, ``{"ndarray": name}``,
  ``{"dtype": "float32"}``, ``{"device": "cuda:0"}``. Strings, numbers, booleans and None
  are themselves (NaN and infinities as JSON's ``NaN``/``Infinity`` extension);
- ``tapelab.sha256``: SHA-256 over the other metadata entries and every tensor's name,
  dtype, shape and bytes.
  safetensors has no checksum, so without it a bit flip in the data would load silently.

A tensor object reachable twice is stored once and loads as one object; ``requires_grad``
and ``nn.Parameter`` survive, as with ``torch.save`` (state dicts hold detached tensors). Loading parses
only JSON and raw little-endian arrays: nothing in the file is ever executed. A damaged,
truncated or foreign file (including PyTorch's pickle/zip checkpoints) raises
:class:`CheckpointError` before anything is returned. A plain safetensors file written by
another tool loads as a dict of tensors (it carries no checksum to verify).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from collections import OrderedDict
from typing import Any, BinaryIO

import numpy as np
import safetensors
import safetensors.numpy

from . import _dtype
from .device import device as Device
from .tensor import Tensor

__all__ = ["save", "load", "CheckpointError"]

FORMAT = "tapelab"
VERSION = "1"
_KEYS = ("tapelab.version", "tapelab.tree", "tapelab.sha256")
_CONVERT = ("convert it once where PyTorch is installed: "
            "`import torch, safetensors.torch; safetensors.torch.save_file("
            "torch.load(PATH, weights_only=True), 'model.safetensors')` "
            "(for a state dict of tensors), then `tapelab.load('model.safetensors')`")


class CheckpointError(RuntimeError):
    """A file that tapelab.load refuses: corrupt, truncated, tampered with, or not ours."""

    def __init__(self, where: str, what: str):
        super().__init__(f"tapelab.load({where}): {what}")
        self.file, self.reason = where, what


# ---------------------------------------------------------------- save
def save(obj: Any, f: str | os.PathLike | BinaryIO) -> None:
    """Write ``obj`` (tensors, and dicts/lists/tuples of tensors and plain values) to ``f``.

    A path is written to a temporary file first and renamed, so an interrupted save never
    leaves a half-written checkpoint behind.
    """
    arrays: dict[str, np.ndarray] = {}
    tree = json.dumps(_encode(obj, arrays, {}, "obj"), separators=(",", ":"))
    metadata = {"format": FORMAT, "tapelab.version": VERSION, "tapelab.tree": tree}
    metadata["tapelab.sha256"] = _digest(metadata, arrays)
    data = safetensors.numpy.save(arrays, metadata=metadata)
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            with open(tmp, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    else:
        f.write(data)


def _encode(x, arrays: dict, seen: dict, path: str):
    if x is None or isinstance(x, (bool, str)):
        return x
    if type(x) in (int, float):
        return x
    if isinstance(x, Tensor):
        return _encode_tensor(x, arrays, seen)
    if isinstance(x, np.ndarray):
        return {"ndarray": _store(x, arrays, seen)}
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return x.item()
    if type(x) is list:
        return [_encode(v, arrays, seen, f"{path}[{i}]") for i, v in enumerate(x)]
    if type(x) is tuple or (isinstance(x, tuple) and type(x).__name__ == "Size"):
        return {"tuple": [_encode(v, arrays, seen, f"{path}[{i}]") for i, v in enumerate(x)]}
    if isinstance(x, dict):
        items = [[_encode(k, arrays, seen, f"{path} key {k!r}"), _encode(v, arrays, seen, f"{path}[{k!r}]")]
                 for k, v in x.items()]
        return {"odict" if isinstance(x, OrderedDict) else "dict": items}
    if isinstance(x, _dtype.dtype):
        return {"dtype": x.name}
    if isinstance(x, Device):
        return {"device": str(x)}
    raise TypeError(f"tapelab.save: cannot save {type(x).__name__} at {path}; a checkpoint holds "
                    "tensors, numpy arrays, numbers, strings, booleans, None, dtypes, devices, and "
                    "lists/tuples/dicts of them (tapelab never pickles)")


def _encode_tensor(t: Tensor, arrays: dict, seen: dict) -> dict:
    from . import nn
    return {"tensor": _store(t.__array__(), arrays, seen, id(t)), "device": str(t.device),
            "grad": bool(t.requires_grad), "param": isinstance(t, getattr(nn, "Parameter", ()))}


def _store(arr: np.ndarray, arrays: dict, seen: dict, key: int | None = None) -> str:
    key = id(arr) if key is None else key
    name = seen.get(key)
    if name is None:
        name = seen[key] = str(len(arrays))
        arrays[name] = arr if arr.flags.c_contiguous else arr.copy(order="C")  # ascontiguousarray makes 0-d 1-d
    return name


def _digest(metadata: dict[str, str], arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every metadata entry but the digest itself, then each tensor in name order."""
    h = hashlib.sha256(json.dumps(sorted((k, v) for k, v in metadata.items() if k != "tapelab.sha256")).encode())
    for name in sorted(arrays):
        arr = arrays[name]
        h.update(f"\0{name}:{arr.dtype.str}:{arr.shape}\0".encode())
        h.update(arr.reshape(-1).view(np.uint8))
    return h.hexdigest()


# ---------------------------------------------------------------- load
def load(f: str | os.PathLike | BinaryIO, map_location=None, *, weights_only: bool = True,
         mmap: bool | None = None) -> Any:
    """Read what :func:`save` wrote. Never executes code from the file, so ``weights_only`` and
    ``mmap`` are accepted for PyTorch compatibility and change nothing.

    ``map_location``: a device (or its name) for every tensor, or a dict mapping saved device
    names to new ones (``{"cuda:0": "cpu"}``); by default tensors return to their saved device.
    """
    if map_location is not None and not isinstance(map_location, (str, Device, dict)):
        raise TypeError(f"tapelab.load: map_location must be a device, a device name or a dict of device "
                        f"names, got {type(map_location).__name__}")
    where, data = _read(f)
    if not data:
        raise CheckpointError(where, "the file is empty")
    if data[8:9] != b"{":  # not a safetensors header; a header length can start like a pickle
        _refuse_pickle(where, data)
    metadata = _header_metadata(where, data)
    try:
        arrays = safetensors.numpy.load(data)
    except (safetensors.SafetensorError, ValueError, TypeError) as e:
        raise CheckpointError(where, f"corrupt or truncated checkpoint ({e})") from None
    if not _ours(metadata):
        return _foreign(arrays, map_location, where)
    if metadata.get("tapelab.version") != VERSION:
        raise CheckpointError(where, f"unsupported tapelab format version {metadata.get('tapelab.version')!r} "
                                     f"(this tapelab reads version {VERSION!r}) or a damaged header")
    if metadata.get("tapelab.sha256") != _digest(metadata, arrays):
        raise CheckpointError(where, "checksum mismatch: the file was modified or damaged after it was "
                                     "saved (SHA-256 of its contents differs from the one recorded)")
    try:
        return _decode(json.loads(metadata["tapelab.tree"]), arrays, {}, map_location, where)
    except (ValueError, KeyError, TypeError, IndexError, StopIteration, RecursionError) as e:
        raise CheckpointError(where, f"malformed object tree ({type(e).__name__}: {e})") from None


def _ours(metadata: dict) -> bool:
    """Any one of our keys marks the file as ours, so a damaged key cannot pass it off as foreign."""
    return metadata.get("format") == FORMAT or any(k in metadata for k in _KEYS)


def _foreign(arrays: dict[str, np.ndarray], map_location, where: str) -> dict[str, Tensor]:
    """A safetensors file from another tool: its tensors by name (no checksum to verify)."""
    try:
        return {name: _tensor(arr, "cpu", map_location, False, False, where) for name, arr in arrays.items()}
    except TypeError as e:
        raise CheckpointError(where, f"unsupported tensor in safetensors file ({e})") from None


def _read(f) -> tuple[str, bytes]:
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        with open(path, "rb") as fh:
            return repr(path), fh.read()
    return repr(getattr(f, "name", f)), f.read()


def _refuse_pickle(where: str, data: bytes) -> None:
    if data[:4] == b"PK\x03\x04":
        raise CheckpointError(where, "this looks like a PyTorch zip checkpoint (torch.save); tapelab "
                                     "does not unpickle, because unpickling can run arbitrary code. To use "
                                     "it, " + _CONVERT)
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise CheckpointError(where, "this looks like a pickle (a legacy PyTorch checkpoint); tapelab does "
                                     "not unpickle, because unpickling can run arbitrary code. To use it, "
                                     + _CONVERT)


def _header_metadata(where: str, data: bytes) -> dict[str, str]:
    """safetensors' header: an 8-byte little-endian length, then that much JSON."""
    if len(data) < 8:
        raise CheckpointError(where, f"truncated: {len(data)} bytes is too short for a checkpoint")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise CheckpointError(where, f"truncated or not a tapelab checkpoint: the header claims {n} bytes "
                                     f"but the file holds {len(data) - 8} after it")
    try:
        header = json.loads(data[8:8 + n])
        metadata = header.get("__metadata__") or {}
        if not isinstance(metadata, dict):
            raise ValueError("__metadata__ is not an object")
        return metadata
    except (ValueError, AttributeError, UnicodeDecodeError) as e:
        raise CheckpointError(where, f"not a tapelab checkpoint: unreadable header ({e})") from None


def _decode(node, arrays: dict, made: dict, map_location, where: str):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, made, map_location, where) for v in node]
    kind = next(iter(node))  # a tag is the first key of its JSON object
    value = node[kind]
    if kind == "dict" or kind == "odict":
        items = ((_decode(k, arrays, made, map_location, where), _decode(v, arrays, made, map_location, where))
                 for k, v in value)
        return OrderedDict(items) if kind == "odict" else dict(items)
    if kind == "tuple":
        return tuple(_decode(v, arrays, made, map_location, where) for v in value)
    if kind == "tensor":
        t = made.get(value)
        if t is None:
            t = made[value] = _tensor(arrays[value], node["device"], map_location, node["grad"], node["param"], where)
        return t
    if kind == "ndarray":
        return arrays[value]
    if kind == "dtype":
        return _dtype._by_name(value)
    if kind == "device":
        return Device(value)
    raise ValueError(f"unknown node kind {kind!r}")


def _tensor(arr: np.ndarray, saved_device: str, map_location, requires_grad: bool, param: bool,
            where: str) -> Tensor:
    from .creation import from_numpy
    t = from_numpy(arr)
    dev = _target_device(saved_device, map_location)
    if dev.type != "cpu":
        from .device import cuda_available
        if not cuda_available():
            raise CheckpointError(where, f"a tensor was saved on {saved_device}, but CUDA is not available "
                                         "here; pass map_location='cpu' to load it on the CPU")
        t = t.to(dev)
    if param:
        from .nn import Parameter
        return Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_() if requires_grad else t


def _target_device(saved: str, map_location) -> Device:
    if map_location is None:
        return Device(saved)
    if isinstance(map_location, dict):
        return Device(map_location.get(saved, saved))
    return Device(map_location)
