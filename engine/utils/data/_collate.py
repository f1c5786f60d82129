"""Collation: turning a list of samples into one batch (``default_collate``), and
``default_convert`` for loaders without automatic batching.

``collate`` recurses through mappings, namedtuples and sequences and hands leaves to
``collate_fn_map`` (by exact type first, then by ``isinstance`` in insertion order), so
callers can extend ``default_collate_fn_map`` as in PyTorch.
"""
from __future__ import annotations

import collections.abc
import copy
import re
from typing import Any, Callable

import numpy as np

from ...base import dtype as _dtype
from ...core.creation import as_tensor, tensor
from ...ops.movement import stack
from ...core.tensor import Tensor

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map"]

_NP_STR_OBJ = re.compile(r"[SaUO]")
_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def collate(batch, *, collate_fn_map: dict[type | tuple, Callable] | None = None):
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for kind, fn in collate_fn_map.items():
            if isinstance(elem, kind):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map)
                                       for k in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns  # a list, as PyTorch (backwards compatibility)
        return _rebuild_sequence(elem, columns)
    raise TypeError(_ERR.format(elem_type))


def _rebuild_mapping(elem, values: dict):
    """The batch keeps the sample's mapping type where it can be rebuilt."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(values)
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def _rebuild_sequence(elem, values: list):
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, v in enumerate(values):
                clone[i] = v
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def _collate_tensor(batch, *, collate_fn_map=None):
    return stack(batch, 0)


def _collate_ndarray(batch, *, collate_fn_map=None):
    if _NP_STR_OBJ.search(batch[0].dtype.str) is not None:
        raise TypeError(_ERR.format(batch[0].dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def _collate_np_scalar(batch, *, collate_fn_map=None):
    return as_tensor(np.asarray(batch))


def _collate_float(batch, *, collate_fn_map=None):
    return tensor(batch, dtype=_dtype.float64)


def _collate_int(batch, *, collate_fn_map=None):
    return tensor(batch)


def _collate_str(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map: dict[type | tuple, Callable] = {
    Tensor: _collate_tensor,
    np.ndarray: _collate_ndarray,
    np.generic: _collate_np_scalar,
    float: _collate_float,
    int: _collate_int,
    (str, bytes): _collate_str,
}


def default_collate(batch: list) -> Any:
    """Stack tensors (and numpy arrays) along a new first dim; numbers become a tensor
    (floats in float64, as PyTorch); strings stay a list; containers are collated per field."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data: Any) -> Any:
    """numpy arrays (also inside containers) become tensors; everything else is unchanged."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray) and _NP_STR_OBJ.search(data.dtype.str) is not None:
            return data
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: default_convert(data[k]) for k in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data
