"""Devices and their array namespaces: numpy for cpu, cupy for cuda.

Op forwards receive ``xp`` and never import numpy or cupy themselves; everything a
backend does differently lives on its ``Device`` object.
"""
from __future__ import annotations

import numpy as np

__all__ = ["device", "cuda_available"]


class device:
    """``tapelab.device('cpu')`` / ``device('cuda:0')``; interned, so compare with ``is``."""

    __slots__ = ("type", "index", "_xp", "_name")
    _interned: dict = {}

    def __new__(cls, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"device(): expected a string like 'cpu' or 'cuda:0', got {type(spec).__name__}")
        kind, _, idx = spec.partition(":")
        if idx:
            index = int(idx)
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {spec}")
        if kind == "cuda" and index is None:
            index = 0
        if kind == "cpu":
            index = None
        key = (kind, index)
        dev = cls._interned.get(key)
        if dev is None:
            dev = object.__new__(cls)
            dev.type, dev.index, dev._xp = kind, index, (np if kind == "cpu" else None)
            dev._name = kind if index is None else f"{kind}:{index}"
            cls._interned[key] = dev
        return dev

    @property
    def xp(self):
        """The array namespace of this device (numpy or cupy)."""
        xp = self._xp
        if xp is None:
            xp = self._xp = _load_cupy(self)
        return xp

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self._name

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))


def cuda_available() -> bool:
    try:
        import cupy
        return bool(cupy.cuda.is_available())
    except ImportError:
        return False


def _load_cupy(dev: device):
    try:
        import cupy
    except ImportError:
        raise RuntimeError(f"{dev} needs cupy: pip install 'tapelab[gpu]'") from None
    if not cupy.cuda.is_available():
        raise RuntimeError(f"{dev} is not available: no CUDA device or driver was found "
                           "(tapelab.cuda.is_available() is False)")
    return cupy


CPU = device("cpu")


def of_array(arr) -> device:
    """The device an array lives on."""
    if isinstance(arr, np.ndarray) or np.isscalar(arr):
        return CPU
    return device("cuda", int(arr.device.id))
