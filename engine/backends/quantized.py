"""``torch.backends.quantized``: the quantized engine switch. tapelab's quantized kernels compute as PyTorch's
x86/fbgemm ones on any setting; the engine is kept so scripts read back what they set."""
from __future__ import annotations

import sys
import types

__all__ = ["engine", "supported_engines"]

_SUPPORTED = ["qnnpack", "onednn", "x86", "fbgemm"]


class _QuantizedEngine(types.ModuleType):
    """The module, with ``engine`` a checked attribute as PyTorch's ``QuantizedEngine``."""

    _engine = "x86"

    @property
    def engine(self) -> str:
        return self._engine

    @engine.setter
    def engine(self, value: str) -> None:
        if value not in _SUPPORTED:
            raise RuntimeError(f"{value} is not a valid value for quantized engine")
        self._engine = value

    @property
    def supported_engines(self) -> list[str]:
        return list(_SUPPORTED)


sys.modules[__name__].__class__ = _QuantizedEngine
