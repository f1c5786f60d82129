"""``torch._utils``: the helpers PyTorch keeps there that libraries import directly. fastai's
``fp16_utils`` (and apex-style master-weight code) packs a model's parameters or gradients into one
flat buffer with ``_flatten_dense_tensors`` and views it back with ``_unflatten_dense_tensors``.

Both are thin functions over public ops (``cat``, ``view``, ``narrow``); neither declares an op.
"""
from __future__ import annotations

import sys

from .base.device import cuda_available
from .core.tensor import Tensor
from .nn.parameter import _rebuild_parameter
from .ops.movement import cat
from .serialization._storage import rebuild_tensor_v2 as _rebuild_tensor_v2

__all__ = ["_flatten_dense_tensors", "_unflatten_dense_tensors", "_rebuild_parameter", "_rebuild_tensor_v2",
           "_element_size", "_get_available_device_type", "_get_device_module", "_take_tensors"]


def _element_size(dtype) -> int:
    """Bytes per element of ``dtype`` (lazy loaders size a storage's record with it)."""
    return dtype.itemsize


def _flatten_dense_tensors(tensors) -> Tensor:
    """The tensors' elements, each in its logical (row-major) order, one after another in one new
    1-D tensor (a single tensor comes back as a flat view of it, as PyTorch's)."""
    tensors = list(tensors)
    if len(tensors) == 1:
        return tensors[0].contiguous().view(-1)
    return cat([t.contiguous().view(-1) for t in tensors])


def _unflatten_dense_tensors(flat: Tensor, tensors) -> tuple:
    """Views of ``flat`` shaped as ``tensors``, in order (the inverse of ``_flatten_dense_tensors``)."""
    outputs, offset = [], 0
    for t in tensors:
        n = t.numel()
        outputs.append(flat.narrow(0, offset, n).view(t.shape))
        offset += n
    return tuple(outputs)


def _take_tensors(tensors, size_limit: int):
    """Chunks of ``tensors`` for bucketed collectives (mmengine's and DDP-style all-reduce): per tensor
    type (``t.type()``), in order, each chunk closed before it would pass ``size_limit`` bytes (a sparse
    tensor counts its indices and values)."""
    buckets: dict = {}
    for t in tensors:
        kind = t.type()
        if t.is_sparse:
            indices, values = t._indices(), t._values()
            size = indices.numel() * indices.element_size() + values.numel() * values.element_size()
        else:
            size = t.numel() * t.element_size()
        bucket = buckets.setdefault(kind, [[], 0])
        if bucket[1] + size > size_limit and bucket[1] > 0:
            yield bucket[0]
            bucket = buckets[kind] = [[], 0]
        bucket[0].append(t)
        bucket[1] += size
    for chunk, _ in buckets.values():
        if chunk:
            yield chunk


def _get_available_device_type() -> str | None:
    """The accelerator's device type: ``"cuda"`` where cupy finds a device, else None (tapelab has no
    mps or xpu backend; tensordict picks its default device with this)."""
    return "cuda" if cuda_available() else None


def _get_device_module(device_type: str):
    """``torch.<device_type>`` (``torch.cuda``), PyTorch's refusal for a type with no module."""
    module = getattr(sys.modules[__name__.rpartition(".")[0]], device_type, None)
    if module is None:
        raise RuntimeError(f"Device '{device_type}' does not have a corresponding module registered as "
                           f"'torch.{device_type}'.")
    return module
