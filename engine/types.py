"""``torch.types``: the type aliases programs annotate with (``Number``, ``Device``, ``_size``, ``_dtype`` ...),
over tapelab's classes. tapelab has no symbolic sizes, so the ``*LikeType`` aliases are the plain Python
types and ``py_sym_types`` is empty (an ``isinstance`` test against it is False, as for a concrete value).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Union

from .base.device import device as _device
from .base.dtype import dtype as _dtype  # noqa: F401  (``from torch.types import _dtype``)
from .base.layout import layout as _layout  # noqa: F401
from .core.storage import UntypedStorage as Storage
from .core.tensor import Size, Tensor

__all__ = ["Number", "Device", "FileLike", "Storage"]

_int, _float, _bool, _complex, _str, _bytes = int, float, bool, complex, str, bytes
IntLikeType, FloatLikeType, BoolLikeType = int, float, bool
py_sym_types: tuple = ()

Number = Union[int, float, bool]
_Number = Number
Device = Union[_device, str, int, None]
_size = Union[Size, list, tuple]
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
_TensorOrOptionalTensors = Union[Tensor, Sequence[Union[Tensor, None]]]
FileLike = Union[str, os.PathLike, IO[bytes]]
