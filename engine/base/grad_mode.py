"""Grad modes, usable as context managers and decorators; each restores the previous state.

The flags are thread-local, as PyTorch's are: ``no_grad`` in one thread leaves every other
thread recording, and a new thread starts with grad enabled and inference mode off whatever
the thread that started it was in. ``STATE`` is a ``threading.local`` whose class
attributes are those defaults, so a thread that never changed a flag reads the class
attribute (one C-level lookup, no per-thread setup).

A thread-local read still costs several times a global read, so the dispatcher tests
``GRAD_OFF`` first: the set of threads (by ident) whose grad is disabled now, empty while grad
is on everywhere. Every write of ``STATE.enabled`` (whoever makes it) passes
``_GradState.__setattr__``, which adds or discards the calling thread (set operations are
atomic under the GIL, so no lock and no derived flag that could go stale), except
``no_grad``'s enter and exit from grad on, which do the same three steps inline (the block
of every inference loop); only while some thread has grad off does the hot path ask its own
thread's flag. A thread that ends with grad
off is discarded when its local state goes (its ``_Guard``).
"""
from __future__ import annotations

import functools
import threading

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]

GRAD_OFF: set = set()
_get_ident = threading.get_ident
_local_setattr = threading.local.__setattr__


class _Guard:
    """Made once per thread that disables grad; its thread's state drops it when the thread ends."""

    __slots__ = ("ident",)

    def __init__(self, ident: int):
        self.ident = ident

    def __del__(self):
        if GRAD_OFF is not None:   # None at interpreter shutdown
            GRAD_OFF.discard(self.ident)


class _GradState(threading.local):
    """This thread's grad flags; the class attributes are what a new thread starts from."""

    enabled = True
    inference = False
    _guard = None

    def __setattr__(self, name, value):
        if name == "enabled":
            value = bool(value)
            if value:
                GRAD_OFF.discard(_get_ident())
            else:
                ident = _get_ident()
                GRAD_OFF.add(ident)
                if self._guard is None:
                    _local_setattr(self, "_guard", _Guard(ident))
        _local_setattr(self, name, value)


STATE = _GradState()


def is_grad_enabled() -> bool:
    return STATE.enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _Mode:
    """Shared base: a context manager that also decorates functions (with or without parentheses)."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not isinstance(args[0], bool):
            return cls()(args[0])
        return super().__new__(cls)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args):
                return fn(*args, **kwargs)
        return wrapper

    _args: tuple = ()

    def clone(self):
        return self.__class__(*self._args)


class no_grad(_Mode):
    """Context-manager that disables gradient calculation (also a decorator).

    >>> with tapelab.no_grad():
    ...     y = x * 2          # y.requires_grad is False
    """

    # The hot block of an inference loop: ``_GradState.__setattr__``'s work inlined for the
    # common case (grad on before the block), without its frame
    def __enter__(self):
        state = STATE
        self.prev = prev = state.enabled
        if prev:
            ident = _get_ident()
            GRAD_OFF.add(ident)
            if state._guard is None:
                _local_setattr(state, "_guard", _Guard(ident))
            _local_setattr(state, "enabled", False)

    def __exit__(self, *exc):
        if self.prev:
            GRAD_OFF.discard(_get_ident())
            _local_setattr(STATE, "enabled", True)
        else:
            STATE.enabled = False


class enable_grad(_Mode):
    """Context-manager that enables gradient calculation inside a ``no_grad`` block."""

    def __enter__(self):
        self.prev = STATE.enabled
        STATE.enabled = True

    def __exit__(self, *exc):
        STATE.enabled = self.prev


class set_grad_enabled(_Mode):
    """Sets gradient calculation on or off; takes effect at once, and as a context manager restores."""

    def __init__(self, mode: bool):
        self._args = (mode,)
        self.prev = STATE.enabled
        STATE.enabled = bool(mode)

    def __call__(self, fn):
        STATE.enabled = self.prev
        return super().__call__(fn)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.enabled = self.prev


class inference_mode(_Mode):
    """Like ``no_grad``, and tensors made inside are marked as inference tensors."""

    def __init__(self, mode: bool = True):
        self._args = (mode,)
        self.mode = mode

    def __enter__(self):
        self.prev = (STATE.enabled, STATE.inference)
        if self.mode:
            STATE.enabled, STATE.inference = False, True

    def __exit__(self, *exc):
        STATE.enabled, STATE.inference = self.prev
