"""The dispatcher's state, kept below ``tensor.py`` so a Tensor can read it.

``tensor.py`` asks the active modes about host reads (``item()``, ``print``) and must not
import the dispatcher, which builds on Tensor; so the mode stack lives here, in a module
that imports nothing, and ``dispatch.py`` re-exports it as ``dispatch.STATE``.

Threads: as in PyTorch, dispatch state is per thread. A mode entered in one thread (a
tracer, a capture) sees only that thread's ops; module scope names are the thread's own;
a new thread starts with no mode and no scope. ``STATE.modes``, ``STATE.module_path`` and
``STATE.capturing`` read the calling thread's values (``LOCAL``). The eager path's one flag,
``STATE.slow``, stays a plain attribute of a process-wide object, since a thread-local read
costs several times more: it is a summary, true while *any* thread has a mode entered, anomaly
detection is on or an ``op`` subscriber exists, and the slow path then asks the calling
thread's own state. Anomaly detection is process-wide, as PyTorch's ``detect_anomaly`` is.
"""
from __future__ import annotations

import itertools
import threading

__all__ = ["STATE", "LOCAL"]


class _ThreadState(threading.local):
    """One thread's dispatch state; ``__init__`` runs once per thread, at its first use.

    modes: the active ``dispatch.Mode`` stack, innermost last.
    module_path: the ``nn.Module`` scope names, kept while someone is watching.
    capturing: the Graph this thread is capturing (``tapelab.graphs``), here so that layers
        below graphs (``nn.functional``) can ask ``is_current_stream_capturing``.
    watching: while ``modes`` is not empty, the token that counts this thread in
        ``STATE.watching`` (``dispatch.push_mode``); dropped with the thread's state, so a
        thread that ends with a mode still entered stops counting.
    function_modes: the entered ``overrides.TorchFunctionMode`` stack, innermost last.
    function_token: while ``function_modes`` is not empty, the token that keeps
        ``STATE.functions`` installed (``core/overrides.py``), dropped with the thread's state.
    functions_off, subclasses_off: ``DisableTorchFunction`` / ``DisableTorchFunctionSubclass``
        depth (the protocol is off entirely / for Tensor subclasses only).
    """

    watching = None
    function_token = None
    functions_off = 0
    subclasses_off = 0

    def __init__(self):
        self.modes: list = []
        self.module_path: list = []
        self.capturing: list = []
        self.function_modes: list = []


LOCAL = _ThreadState()


class _DispatchState:
    """What the dispatcher reads on every op, in one object (an attribute test each).

    slow: someone is watching, in some thread (a mode, anomaly detection or an ``op``
        subscriber); the eager path tests only this flag.
    anomaly: None, or the check ``check(op, args, result)`` anomaly detection runs after each
        compute op (``autograd.set_detect_anomaly`` installs it through ``dispatch.set_anomaly``).
    watching: how many threads have a mode entered (``dispatch.push_mode`` keeps it).
    functions: None, or the ``__torch_function__`` protocol's hook ``hook(op, args, params)``
        (``core/overrides.py`` installs it through ``dispatch.set_functions`` while a
        ``TorchFunctionMode`` is entered or a Tensor subclass takes part): the slow path asks it
        first, and it returns ``dispatch.PASS`` when no mode or subclass claims the op.
    modes, module_path, capturing: the calling thread's (``LOCAL``; see ``_ThreadState``).
    """

    __slots__ = ("slow", "anomaly", "functions", "watching", "_seq")

    def __init__(self):
        self.slow = False
        self.anomaly = None
        self.functions = None
        self.watching = 0
        self._seq = itertools.count()

    @property
    def modes(self) -> list:
        return LOCAL.modes

    @property
    def module_path(self) -> list:
        return LOCAL.module_path

    @property
    def capturing(self) -> list:
        return LOCAL.capturing


STATE = _DispatchState()
