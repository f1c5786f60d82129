"""``torch.nn.parallel.scatter_gather``: split a batch over devices and join the outputs back.

``scatter`` cuts every tensor found in its input (through tuples, lists, dicts and namedtuples) into
one chunk per target device along ``dim`` (``Tensor.chunk``'s sizes), each moved to its device, and
repeats everything else per device; ``gather`` concatenates per-device outputs of the same structure
along ``dim`` on one device. Libraries import them for DataParallel models (captum's layer
attributions); tapelab's DataParallel runs one device, so these only move and cut.
"""
from __future__ import annotations

from typing import Any

from ...base.device import device as _device
from ...core.tensor import Tensor

__all__ = ["scatter", "scatter_kwargs", "gather", "is_namedtuple"]


def is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def _target(d) -> _device:
    """A device id (an int is a CUDA index, -1 the cpu, as PyTorch reads them) as a device."""
    if isinstance(d, int):
        return _device("cpu") if d == -1 else _device("cuda", d)
    return _device(d)


def scatter(inputs: Any, target_gpus: list, dim: int = 0) -> list:
    """One copy of ``inputs`` per device in ``target_gpus``, each tensor cut into its chunk for that device."""
    devices = [_target(d) for d in target_gpus]

    def split(obj):
        if isinstance(obj, Tensor):
            return [chunk.to(dev) for chunk, dev in zip(obj.chunk(len(devices), dim), devices)]
        if is_namedtuple(obj):
            return [type(obj)(*parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, tuple) and obj:
            return list(zip(*map(split, obj)))
        if isinstance(obj, list) and obj:
            return [list(parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, dict) and obj:
            return [type(obj)(parts) for parts in zip(*map(split, obj.items()))]
        return [obj for _ in devices]
    return split(inputs)


def scatter_kwargs(inputs: tuple, kwargs: dict | None, target_gpus: list, dim: int = 0) -> tuple[tuple, tuple]:
    """``scatter`` of the positional and keyword arguments, the shorter list padded with ``()`` / ``{}``."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(scattered_inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs: Any, target_device, dim: int = 0) -> Any:
    """The per-device ``outputs`` (a list of equal structures) joined along ``dim`` on ``target_device``."""
    from ...ops.movement import cat
    dev = _target(target_device)

    def join(outs):
        out = outs[0]
        if isinstance(out, Tensor):
            return cat([o.to(dev) for o in outs], dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, join([d[k] for d in outs])) for k in out)
        if is_namedtuple(out):
            return type(out)._make(map(join, zip(*outs)))
        return type(out)(map(join, zip(*outs)))
    return join(outputs)
