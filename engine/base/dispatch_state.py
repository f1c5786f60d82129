"""The dispatcher's process-wide state, kept below ``tensor.py`` so a Tensor can read it.

``tensor.py`` asks the active modes about host reads (``item()``, ``print``) and must not
import the dispatcher, which builds on Tensor; so the mode stack lives here, in a module
that imports nothing, and ``dispatch.py`` re-exports it as ``dispatch.STATE``.
"""
from __future__ import annotations

import itertools

__all__ = ["STATE"]


class _DispatchState:
    """What the dispatcher reads on every op, in one object (an attribute test each).

    slow: someone is watching (a mode, anomaly detection or an ``op`` subscriber); the
        eager path tests only this flag.
    modes: the active ``dispatch.Mode`` stack, innermost last.
    module_path: the ``nn.Module`` scope names, kept while someone is watching.
    anomaly: anomaly detection is on (``autograd.set_detect_anomaly``).
    """

    __slots__ = ("slow", "modes", "module_path", "anomaly", "_seq")

    def __init__(self):
        self.slow = False
        self.modes: list = []
        self.module_path: list = []
        self.anomaly = False
        self._seq = itertools.count()


STATE = _DispatchState()
