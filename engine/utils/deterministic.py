"""``torch.utils.deterministic``: the module attribute ``fill_uninitialized_memory`` (True by default)
says whether ``empty`` and its kin fill their memory with NaN or an integer dtype's maximum while
``use_deterministic_algorithms(True)`` is on. ultralytics' ``init_seeds(deterministic=True)`` sets it.
A module attribute that validates and is read by the factories is a property of the module's class,
as PyTorch's module does it."""
from __future__ import annotations

import sys
import types

from ..base import runtime as _runtime


class _Deterministic(types.ModuleType):
    @property
    def fill_uninitialized_memory(self) -> bool:
        """Whether uninitialised memory is filled with a known value under deterministic algorithms."""
        return _runtime._STATE["fill_uninitialized"]

    @fill_uninitialized_memory.setter
    def fill_uninitialized_memory(self, mode: bool) -> None:
        _runtime.set_fill_uninitialized(mode)


sys.modules[__name__].__class__ = _Deterministic
