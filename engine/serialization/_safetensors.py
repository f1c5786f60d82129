"""tapelab's own checkpoint format, for state dicts: a safetensors file plus a JSON tree. No pickle.

File format (version 1). A standard safetensors file whose ``__metadata__`` carries:

- ``format``: ``"tapelab"``; ``tapelab.version``: ``"1"``;
- ``tapelab.tree``: the saved object as JSON. Lists are JSON arrays; every other container
  is a one-key tag, so keys of any supported type and the container types survive:
  ``{"dict": [[key, value], ...]}``, ``{"odict": [...]}`` (OrderedDict), ``{"tuple": [...]}``,
  ``{"tensor": name, "device": "cpu", "grad": false, "param": false}``, ``{"ndarray": name}``,
  ``{"dtype": "float32"}``, ``{"device": "cuda:0"}``. Strings, numbers, booleans and None
  are themselves (NaN and infinities as JSON's ``NaN``/``Infinity`` extension);
- ``tapelab.sha256``: SHA-256 over the other metadata entries and every tensor's name,
  dtype, shape and bytes. safetensors has no checksum, so without it a bit flip in the data
  would load silently.

:func:`write` writes state dicts (string keys, tensor values), each tensor under its key, so
any safetensors reader (``safetensors.torch.load_file``; not PyTorch's ``torch.load``, which reads
only its pickle formats: for a file PyTorch loads, save a dict that holds the state dict, as
``{"model": sd}``, which is written in PyTorch's zip format) sees the state dict; a tensor reachable under two keys is stored once (under the first) and loads as
one object. ``requires_grad`` and ``nn.Parameter`` survive. :func:`read` reads every tree
version 1 describes (earlier tapelab versions wrote nested objects this way too), and plain
safetensors files from other tools as a dict of tensors. Reading parses only JSON and raw
little-endian arrays: nothing in the file is executed. A damaged, truncated or tampered file
raises :class:`CheckpointError` before anything is returned.
"""
from __future__ import annotations

import hashlib
import json
import struct
from collections import OrderedDict

import numpy as np
import safetensors
import safetensors.numpy

from ..base import dtype as _dtype
from ..base.device import device as Device
from ..core.tensor import Tensor
from ._errors import CheckpointError
from ._storage import place
from ..base.dtype import FLOATING_KINDS

FORMAT = "tapelab"
VERSION = "1"
_KEYS = ("tapelab.version", "tapelab.tree", "tapelab.sha256")
# safetensors' dtype names and the dtype each is in tapelab (a name tapelab lacks is refused by name)
_ST_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64",
              "U16": "uint16", "U32": "uint32", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
              "F32": "float32", "F64": "float64", "C64": "complex64", "F8_E4M3": "float8_e4m3fn",
              "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
              "F8_E5M2FNUZ": "float8_e5m2fnuz", "F6_E2M3": "float6_e2m3", "F6_E3M2": "float6_e3m2",
              "F4": "float4_e2m1"}

_NP = {st: _dtype._by_name(name).np for st, name in _ST_DTYPES.items() if name in _dtype._BY_NAME}


def is_state_dict(obj) -> bool:
    """A dict of string keys and dense tensor values: what this format writes (a sparse or quantized tensor has
    no safetensors form, so a dict holding one is pickled, as PyTorch pickles it; so is a user's Tensor subclass,
    whose class and Python attributes only a pickle keeps)."""
    if not isinstance(obj, dict):
        return False
    from ..nn import Buffer, Parameter
    plain = (Tensor, Parameter, Buffer)
    return all(type(k) is str and k != "__metadata__" and type(v) in plain
               and v.layout.name == "strided" and not v.is_quantized for k, v in obj.items())


def looks_like(data: bytes) -> bool:
    """safetensors' header: an 8-byte length, then JSON (a header length can start like a pickle)."""
    return data[8:9] == b"{"


# ---------------------------------------------------------------- write
def write(state_dict: dict) -> bytes:
    from ..nn import Parameter
    arrays: dict[str, np.ndarray] = {}
    names: dict[int, str] = {}
    items = []
    for key, t in state_dict.items():
        name = names.get(id(t))
        if name is None:
            name = names[id(t)] = key
            arr = np.asarray(t)
            arrays[name] = arr if arr.flags.c_contiguous else arr.copy(order="C")  # ascontiguousarray makes 0-d 1-d
        items.append([key, {"tensor": name, "device": str(t.device), "grad": bool(t.requires_grad),
                            "param": isinstance(t, Parameter)}])
    tree = json.dumps({"odict" if isinstance(state_dict, OrderedDict) else "dict": items}, separators=(",", ":"))
    metadata = {"format": FORMAT, "tapelab.version": VERSION, "tapelab.tree": tree}
    metadata["tapelab.sha256"] = digest(metadata, arrays)
    return safetensors.numpy.save(arrays, metadata=metadata)


def digest(metadata: dict[str, str], arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every metadata entry but the digest itself, then each tensor in name order."""
    h = hashlib.sha256(json.dumps(sorted((k, v) for k, v in metadata.items() if k != "tapelab.sha256")).encode())
    for name in sorted(arrays):
        arr = arrays[name]
        h.update(f"\0{name}:{arr.dtype.str}:{arr.shape}\0".encode())
        h.update(arr.reshape(-1).view(np.uint8))
    return h.hexdigest()


# ---------------------------------------------------------------- read
def read(where: str, data: bytes, map_location):
    metadata = _header_metadata(where, data)
    try:
        arrays = _arrays(data)
    except (safetensors.SafetensorError, ValueError, TypeError, KeyError) as e:
        raise CheckpointError(where, f"corrupt or truncated checkpoint ({e})") from None
    if not _ours(metadata):
        return {name: _tensor(arr, "cpu", map_location, False, False) for name, arr in arrays.items()}
    if metadata.get("tapelab.version") != VERSION:
        raise CheckpointError(where, f"unsupported tapelab format version {metadata.get('tapelab.version')!r} "
                                     f"(this tapelab reads version {VERSION!r}) or a damaged header")
    if metadata.get("tapelab.sha256") != digest(metadata, arrays):
        raise CheckpointError(where, "checksum mismatch: the file was modified or damaged after it was "
                                     "saved (SHA-256 of its contents differs from the one recorded)")
    try:
        return _decode(json.loads(metadata["tapelab.tree"]), arrays, {}, map_location)
    except (ValueError, KeyError, TypeError, IndexError, StopIteration, RecursionError) as e:
        raise CheckpointError(where, f"malformed object tree ({type(e).__name__}: {e})") from None


def _arrays(data: bytes) -> dict[str, np.ndarray]:
    """``safetensors.numpy.load`` with tapelab's dtypes: numpy has no BF16, ml_dtypes' bfloat16 reads it."""
    return {name: np.frombuffer(view["data"], dtype=_NP[view["dtype"]]).reshape(view["shape"])
            for name, view in safetensors.deserialize(data)}


def _ours(metadata: dict) -> bool:
    """Any one of our keys marks the file as ours, so a damaged key cannot pass it off as foreign."""
    return metadata.get("format") == FORMAT or any(k in metadata for k in _KEYS)


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
    except RecursionError:
        raise CheckpointError(where, "not a tapelab checkpoint: the header nests too deeply") from None
    except (ValueError, AttributeError, UnicodeDecodeError) as e:
        raise CheckpointError(where, f"not a tapelab checkpoint: unreadable header ({e})") from None
    _check_dtypes(where, header)
    return metadata


def _check_dtypes(where: str, header: dict) -> None:
    """Refuse, by name, a tensor whose safetensors dtype tapelab has no dtype for (BF16, F8_*, U16...)."""
    for name, entry in header.items():
        if name == "__metadata__" or not isinstance(entry, dict) or not isinstance(entry.get("dtype"), str):
            continue   # safetensors' own parser reports a malformed entry
        st = entry["dtype"]
        ours = _ST_DTYPES.get(st)
        if ours is None:
            continue
        if not isinstance(getattr(_dtype, ours, None), _dtype.dtype):
            raise CheckpointError(where, f"tensor {name!r} has safetensors dtype {st} ({ours}), and tapelab has "
                                         f"no {ours} dtype (tapelab's dtypes: "
                                         f"{', '.join(d.name for d in _dtype.ALL)})")


def _decode(node, arrays: dict, made: dict, map_location):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, made, map_location) for v in node]
    if not isinstance(node, dict) or not node:
        raise ValueError(f"malformed tree node {node!r}")
    kind = next(iter(node))  # a tag is the first key of its JSON object
    value = node[kind]
    if kind == "dict" or kind == "odict":
        items = ((_decode(k, arrays, made, map_location), _decode(v, arrays, made, map_location)) for k, v in value)
        return OrderedDict(items) if kind == "odict" else dict(items)
    if kind == "tuple":
        return tuple(_decode(v, arrays, made, map_location) for v in value)
    if kind == "tensor":
        t = made.get(value)
        if t is None:
            dev, grad, param = node["device"], node["grad"], node["param"]
            if type(value) is not str or type(dev) is not str or type(grad) is not bool or type(param) is not bool:
                raise ValueError(f"tensor node {node!r}: expected a name, a device string and two booleans")
            _device(dev)
            arr = arrays[value]
            if grad and arr.dtype.kind not in FLOATING_KINDS:
                raise ValueError(f"tensor {value!r} of dtype {arr.dtype} is marked requires_grad; only "
                                 "floating point tensors can require gradients")
            t = made[value] = _tensor(arr, dev, map_location, grad, param)
        return t
    if kind == "ndarray":
        return arrays[value]
    if kind == "dtype":
        return _dtype._by_name(value)
    if kind == "device":
        return _device(value)
    raise ValueError(f"unknown node kind {kind!r}")


def _device(name):
    """``Device(name)``; a device string the file made up is a malformed tree (ValueError)."""
    if type(name) is not str:
        raise ValueError(f"device {name!r} is not a string")
    try:
        return Device(name)
    except (RuntimeError, ValueError, TypeError) as e:
        raise ValueError(f"bad device {name!r}: {e}") from None


def _tensor(arr: np.ndarray, saved_device: str, map_location, requires_grad: bool, param: bool) -> Tensor:
    from ..core.creation import from_numpy
    storage = place(arr, saved_device, map_location)
    t = from_numpy(arr)
    if storage.location != "cpu":
        t = t.to(storage.location)
    if param:
        from ..nn import Parameter
        return Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_() if requires_grad else t
