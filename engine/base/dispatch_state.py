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
    anomaly: None, or the check ``check(op, args, result)`` anomaly detection runs after each
        compute op (``autograd.set_detect_anomaly`` installs it through ``dispatch.set_anomaly``).
    capturing: the Graph being captured (``tapelab.graphs``; at most one), here so that layers
        below graphs (``nn.functional``) can ask ``is_current_stream_capturing`` without importing it.
    """

    __slots__ = ("slow", "modes", "module_path", "anomaly", "capturing", "_seq")

    def __init__(self):
        self.slow = False
        self.modes: list = []
        self.module_path: list = []
        self.anomaly = None
        self.capturing: list = []
        self._seq = itertools.count()


STATE = _DispatchState()
