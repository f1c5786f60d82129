"""``tapelab.save`` / ``tapelab.load`` (``torch.save`` / ``torch.load``) and PyTorch's checkpoint security model.

Formats ``save`` writes:

- a state dict (a dict of string keys and tensors): tapelab's safetensors format, no pickle
  (see ``_safetensors``); any safetensors reader sees the state dict;
- anything else (modules, optimizer state, checkpoints mixing tensors and numbers): PyTorch's
  zip archive (see ``_zipformat``), with tensors pickled under PyTorch's names so ``torch.load``
  reads them.

Formats ``load`` reads, without PyTorch installed: tapelab's safetensors files (and plain ones
from other tools), PyTorch's zip archives, and PyTorch's legacy (pre-1.6) stream format.
Pickled checkpoints load as PyTorch 2.6+ loads them: ``weights_only=True`` (the default)
unpickles with an allow-list and refuses anything else before running it (see
``_weights_only``); ``weights_only=False`` is full unpickling, for files you trust, with
PyTorch's names (``torch.nn.modules.linear.Linear``, ``torch._utils._rebuild_tensor_v2``) read as
tapelab's.
"""
from __future__ import annotations

import io
import os
import pickle
import pickletools
import warnings
import zipfile
from collections.abc import Callable
from typing import Any, BinaryIO, TypeAlias

from . import _legacy, _safetensors, _zipformat
from ..base.device import device
from ..core import storage as _storages
from ._atomic import atomic_write
from ._errors import CheckpointError
from ._pickler import TorchPickler, pickler_class
from ._names import FullUnpickler, TorchNames, register_quantized_constructor  # noqa: F401 (tapelab.ao's hook)
from ._storage import check_map_location
from ._zipformat import PyTorchFileReader
from ._weights_only import (WeightsOnlyUnpickler, add_safe_globals, allowed_global, clear_safe_globals,
                            failure_message, get_safe_globals, safe_globals)

__all__ = ["save", "load", "CheckpointError", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals", "get_unsafe_globals_in_checkpoint", "DEFAULT_PROTOCOL", "PyTorchFileReader",
           "location_tag", "normalize_storage_type"]

DEFAULT_PROTOCOL = 2  # PyTorch's: protocol-2 pickles load in every PyTorch version
# the type of ``load``'s ``map_location``, as PyTorch names it (pyro's param store annotates with it)
MAP_LOCATION: TypeAlias = Callable[[Any, str], Any] | device | str | dict[str, str] | None


# ---------------------------------------------------------------- save
def save(obj: Any, f: str | os.PathLike | BinaryIO, pickle_module: Any = pickle,
         pickle_protocol: int = DEFAULT_PROTOCOL, _use_new_zipfile_serialization: bool = True,
         _disable_byteorder_record: bool = False) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file) as PyTorch's zip archive, byte for byte as
    ``torch.save`` writes it (its legacy format with ``_use_new_zipfile_serialization=False``), so
    ``torch.load`` reads every file; a state dict written to a name ending in ``.safetensors`` is a
    safetensors file instead (no pickle: any safetensors reader takes it).

    A path is written atomically and durably (see ``_atomic``): a unique temporary file beside
    it, fsync, rename over it, fsync of the directory. An interrupted save never leaves a
    half-written checkpoint; a symlink is written through to its target; an existing file keeps
    its permission bits; temporary files of killed saves are removed by the next save there.

    Example::

        >>> tapelab.save(model.state_dict(), "model.safetensors")
        >>> tapelab.save({"model": model.state_dict(), "epoch": 3}, "ckpt.pt")   # torch.load reads it
    """
    _save(obj, f, pickle_module, pickle_protocol, _use_new_zipfile_serialization, _disable_byteorder_record)


def _save(obj: Any, f, pickle_module: Any = pickle, pickle_protocol: int = DEFAULT_PROTOCOL,
          _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False,
          extra: dict[str, bytes] | None = None) -> None:
    """``save``, with ``extra`` records in the zip archive (``torch.jit.save``'s ``_extra_files``)."""
    pickler = pickler_class(pickle_module)   # pickle, or one extending it (cloudpickle: fastai's Learner.export)
    if pickler is not TorchPickler and not _use_new_zipfile_serialization:
        raise ValueError("tapelab.save writes the legacy format with Python's pickle module only")

    def write(out: BinaryIO, archive: str = "archive") -> None:
        if not _use_new_zipfile_serialization:
            _legacy.save(obj, out, pickle_protocol)
        elif str(getattr(f, "name", f)).endswith(".safetensors") and _safetensors.is_state_dict(obj):
            out.write(_safetensors.write(obj))
        else:
            _zipformat.save(obj, out, pickle_protocol, byteorder_record=not _disable_byteorder_record,
                            archive=archive, pickler=pickler, extra=extra)

    if not isinstance(f, (str, os.PathLike)):
        write(f)
        return
    path = os.fspath(f)
    # PyTorch's archive folder: the file's name without its last suffix ("ckpt.pth.tar" -> "ckpt.pth")
    archive = os.path.splitext(os.path.basename(path))[0] or "archive"
    atomic_write(path, lambda out: write(out, archive))


# ---------------------------------------------------------------- load
def load(f: str | os.PathLike | BinaryIO, map_location=None, pickle_module: Any = None, *,
         weights_only: bool | None = None, mmap: bool | None = None, **pickle_load_args) -> Any:
    """Read a checkpoint that ``tapelab.save`` or ``torch.save`` wrote.

    Args:
        f: a path or a binary file.
        map_location: where tensors go: a device or its name for all of them, a dict mapping saved
            locations to new ones (``{"cuda:0": "cpu"}``), or a callable ``(storage, location)``
            returning the storage (kept on the CPU), ``storage.cuda(i)``, or None (the default);
            by default tensors return to the device they were saved from.
        weights_only: True (the default, or when None): unpickle with the allow-list only. False:
            full unpickling, which runs any code the file carries; only for files you trust.
            ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`` / ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` override it
            as in PyTorch. safetensors files never run code whatever it is.
        mmap: accepted for PyTorch compatibility; tapelab reads the file into memory.
        pickle_load_args: passed to the unpickler (``encoding=``) when ``weights_only=False``.

    Raises:
        pickle.UnpicklingError: a weights-only load met something outside the allow-list.
        CheckpointError: the file is damaged, truncated, or not a checkpoint.

    Example::

        >>> sd = tapelab.load("resnet18.pth")                           # a PyTorch state dict
        >>> model = tapelab.load("model.pt", weights_only=False)        # a whole model, trusted file
    """
    weights_only = _weights_only_setting(weights_only, pickle_module)
    if pickle_load_args and weights_only:
        warnings.warn("pickle_load_args only works if `weights_only=False`.", stacklevel=2)
    check_map_location(map_location)
    where, data = _read(f)
    if not data:
        raise CheckpointError(where, "the file is empty")
    if _safetensors.looks_like(data):
        return _safetensors.read(where, data, map_location)
    if data[:4] == b"PK\x03\x04":
        reader = _zipformat.load
    elif _legacy.looks_legacy(data):
        reader = _legacy.load
    else:
        raise CheckpointError(where, "not a checkpoint: neither tapelab's safetensors format, PyTorch's zip "
                                     "archive nor PyTorch's legacy format (a truncated or damaged file?)")
    if not weights_only:
        base = FullUnpickler if pickle_module in (None, pickle) else \
            type("Unpickler", (TorchNames, pickle_module.Unpickler), {})
        pickle_load_args.setdefault("encoding", "utf-8")
        return reader(where, data, map_location,
                      lambda file, load_storage: base(file, load_storage, **pickle_load_args))
    try:
        return reader(where, data, map_location, WeightsOnlyUnpickler)
    except pickle.UnpicklingError as e:
        raise pickle.UnpicklingError(failure_message(str(e))) from None


def _weights_only_setting(weights_only: bool | None, pickle_module) -> bool:
    """PyTorch's rule: default True; the environment can force either way; a pickle_module means full."""
    not_set = weights_only is None
    if not_set:
        weights_only = pickle_module is None
    force_on = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in ("1", "y", "yes", "true")
    force_off = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in ("1", "y", "yes", "true")
    if force_on and force_off:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` "
                           "should be set, but both were set.")
    if force_on:
        weights_only = True
    elif force_off and not_set:
        warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the"
                      "`weights_only` argument was not explicitly passed to `torch.load`, forcing weights_only=False.",
                      UserWarning, stacklevel=3)
        weights_only = False
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    return weights_only


def _read(f) -> tuple[str, bytes]:
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        with open(path, "rb") as fh:
            return repr(path), fh.read()
    return repr(getattr(f, "name", f)), f.read()


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike | BinaryIO) -> list[str]:
    """The globals a PyTorch zip checkpoint names that a weights-only load would refuse (read, not run)."""
    _, data = _read(f)
    zf = zipfile.ZipFile(io.BytesIO(data)) if data[:4] == b"PK\x03\x04" else None
    pkl = [n for n in zf.namelist() if n.endswith("/data.pkl")] if zf else []
    if not pkl:
        raise ValueError("Expected input to be a checkpoint returned by torch.save")
    unsafe = set()
    for op, arg, _pos in pickletools.genops(zf.read(pkl[0])):
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            try:
                allowed_global(module, name)
            except pickle.UnpicklingError:
                unsafe.add(f"{module}.{name}")
    return sorted(unsafe)


# ---------------------------------------------------------------- the names custom checkpoint writers use
# litgpt's incremental saver pickles storages itself and names them as ``torch.save`` does.
def location_tag(storage) -> str:
    """The location ``save`` records for ``storage`` (``'cpu'``, ``'meta'``): its device's name."""
    return str(storage.device)


def normalize_storage_type(storage_type: type) -> type:
    """The public storage class of that name (``UntypedStorage``, ``TypedStorage``)."""
    return getattr(_storages, storage_type.__name__)
