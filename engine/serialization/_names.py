"""PyTorch's pickled names and the tapelab objects they stand for.

PyTorch's checkpoints name what rebuilds their objects: ``torch._utils._rebuild_tensor_v2``,
``torch.FloatStorage``, ``torch.float16``, ``torch.Size``, and in whole-model files the module
classes (``torch.nn.modules.linear.Linear``). :func:`weights_only_table` is the part a weights-only load
accepts (PyTorch's default allow-list, as tapelab objects); :func:`tapelab_equivalent` resolves any
other ``torch.*`` name, for full unpickling only; :class:`FullUnpickler` is that unpickling.
"""
from __future__ import annotations

import functools
import importlib
import pickle
from collections import Counter, OrderedDict
from _codecs import encode

from ..base import dtype as _dtype
from ..base.device import device
from ..base.layout import sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from ..core.tensor import Size, Tensor
from ..ops.sparse import sparse_compressed_tensor, sparse_coo_tensor
from . import _storage as S


def _get_layout(name: str):
    """``torch.serialization._get_layout``: the layout a pickle names by string (``"torch.sparse_coo"``)."""
    layouts = {f"torch.{lay.name}": lay for lay in (strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc)}
    if name not in layouts:
        raise pickle.UnpicklingError(f"tapelab has no layout {name} (it has {', '.join(layouts)})")
    return layouts[name]


def _rebuild_sparse_tensor(layout, data) -> Tensor:
    """``torch._utils._rebuild_sparse_tensor``: COO from ``(indices, values, size[, is_coalesced])``, a
    compressed layout from ``(compressed_indices, plain_indices, values, size)``."""
    if layout in (sparse_csr, sparse_csc, sparse_bsr, sparse_bsc):
        compressed, plain, values, size = data
        return sparse_compressed_tensor(compressed, plain, values, size, layout=layout, check_invariants=False)
    if layout is not sparse_coo:
        raise pickle.UnpicklingError(f"tapelab rebuilds sparse COO and compressed tensors, not {layout}")
    indices, values, size, *coalesced = data
    return sparse_coo_tensor(indices, values, size, check_invariants=False,   # as PyTorch's: no implicit-check warning
                             is_coalesced=bool(coalesced and coalesced[0]))


_QUANTIZED: list = []   # the constructor tapelab.ao registers (register_quantized_constructor)


def register_quantized_constructor(make) -> None:
    """How ``_rebuild_qtensor`` turns integer codes and PyTorch's quantizer parameters (``(torch.per_tensor_affine,
    scale, zero_point)`` or ``(torch.per_channel_affine, scales, zero_points, axis)``) into a quantized tensor:
    ``make(codes, params)``, registered by tapelab.ao, a layer above this package."""
    _QUANTIZED[:] = [make]


def _rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params, requires_grad, backward_hooks):
    """``torch._utils._rebuild_qtensor``: the codes (a QInt8/QUInt8/QInt32 storage) read through the quantizer."""
    if not _QUANTIZED:
        raise pickle.UnpicklingError("this checkpoint holds quantized tensors, and tapelab.ao is not imported")
    return _QUANTIZED[0](S.rebuild_tensor(storage, storage_offset, size, stride), tuple(quantizer_params))


_REBUILD = {"_rebuild_tensor": S.rebuild_tensor, "_rebuild_tensor_v2": S.rebuild_tensor_v2,
            "_rebuild_tensor_v3": S.rebuild_tensor_v3, "_rebuild_parameter": S.rebuild_parameter,
            "_rebuild_parameter_with_state": S.rebuild_parameter_with_state,
            "_rebuild_device_tensor_from_cpu_tensor": S.rebuild_device_tensor_from_cpu_tensor,
            "_rebuild_sparse_tensor": _rebuild_sparse_tensor, "_rebuild_qtensor": _rebuild_qtensor}

# Allowed by PyTorch's weights-only load, but naming something tapelab does not have.
_MISSING_FEATURES = {"torch._utils._rebuild_nested_tensor": "nested tensors",
                     "torch._utils._rebuild_wrapper_subclass": "tensor subclasses",
                     "torch._utils._rebuild_meta_tensor_no_storage": "meta tensors in checkpoints",
                     "torch._utils._rebuild_device_tensor_from_numpy": "tensors pickled through numpy"}
_TORCH_DTYPES = ("bfloat16", "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf", "uint16",
                 "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                 "float8_e8m0fnu", "qint8", "quint8", "qint32")


@functools.cache
def weights_only_table() -> dict[str, object]:
    """``"module.name" -> object`` for every global a weights-only load accepts by default (built on
    first use: it needs tapelab.nn, which is imported after this package)."""
    from ..nn import Parameter
    table = {"collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
             "builtins.set": set, "builtins.bytearray": bytearray, "builtins.complex": complex,
             "_codecs.encode": encode, "torch.Size": Size, "torch.Tensor": Tensor, "torch.device": device,
             "torch.nn.parameter.Parameter": Parameter, "torch._tensor._rebuild_from_type_v2": S.rebuild_from_type_v2,
             "torch.serialization._get_layout": _get_layout}
    table.update({f"torch._utils.{name}": fn for name, fn in _REBUILD.items()})
    table.update({f"torch.{name}": S.StorageType(name) for name in (*S.STORAGE_NAMES.values(), "UntypedStorage",
                                                                    *S.QUANTIZED_STORAGE_NAMES.values())})
    table.update({f"torch.{name}": scheme for name, scheme in _dtype._QSCHEMES.items()})
    table.update({f"torch.{name}": getattr(_dtype, name) for name in dir(_dtype)
                  if isinstance(getattr(_dtype, name), _dtype.dtype)})
    return table


def missing_feature(full_path: str) -> str | None:
    """Why tapelab cannot rebuild ``full_path`` when PyTorch's weights-only load would, else None."""
    module, _, name = full_path.rpartition(".")
    if full_path in _MISSING_FEATURES:
        return _MISSING_FEATURES[full_path]
    if module == "torch" and name in _TORCH_DTYPES:
        return f"dtype {name}"
    if module == "torch" and name.endswith("Storage"):
        return f"storage type {name}"
    return None


def tapelab_equivalent(module: str, name: str):
    """The tapelab object for the PyTorch global ``module.name`` (a full, trusted load).

    Tried in order: the weights-only table; ``tapelab.<path>`` at the same path; then the same
    name in each enclosing package up to the top-level one, since PyTorch's file layout differs
    (``torch.nn.modules.linear.Linear`` is ``tapelab.nn.Linear``, ``torch.optim.adam.Adam`` is
    ``tapelab.optim.Adam``). Raises ``pickle.UnpicklingError`` naming what was looked for.
    """
    full = f"{module}.{name}"
    table = weights_only_table()
    if full in table:
        return table[full]
    if module.endswith(("torch", ".cuda")) and S.is_storage_name(name):  # torch.cuda.FloatStorage in old files
        return S.StorageType(name)
    parts = ["tapelab", *module.split(".")[1:]]
    tried = []
    for end in range(len(parts), 1 if len(parts) > 1 else 0, -1):
        path = ".".join(parts[:end])
        tried.append(f"{path}.{name}")
        try:
            found = getattr(importlib.import_module(path), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    why = missing_feature(full)
    raise pickle.UnpicklingError(f"{full} has no tapelab equivalent" + (f" (tapelab has no {why})" if why else "")
                                 + f": looked for {', '.join(tried)}")


class TorchNames:
    """Mixed into an unpickler class: PyTorch's names read as tapelab's, storages from ``load_storage``."""

    def __init__(self, file, load_storage, **pickle_load_args):
        super().__init__(file, **pickle_load_args)
        self.load_storage = load_storage

    def find_class(self, module: str, name: str):
        if module == "torch" or module.startswith("torch."):
            return tapelab_equivalent(module, name)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self.load_storage(pid)


class FullUnpickler(TorchNames, pickle.Unpickler):
    """``weights_only=False``: plain unpickling, with PyTorch's names read as tapelab's.

    Runs whatever the file's pickle asks for, as PyTorch's full load does: only for trusted files.
    """
