"""Grad modes, usable as context managers and decorators; each restores the previous state.

The flags are thread-local, as PyTorch's are: ``no_grad`` in one thread leaves every other
thread recording, and a new thread starts with grad enabled and inference mode off whatever
the thread that started it was in.

Grad's flag is ``GRAD_OFF`` itself: the set of threads (by ident) whose grad is disabled now,
empty while grad is on everywhere, so the dispatcher's hot test is ``not GRAD_OFF`` (a global
read) and only while some thread has grad off does it ask whether its own ident is in the set.
``STATE.enabled`` reads and writes that set for the calling thread (set operations are atomic
under the GIL: no lock, and no second copy of the flag that could go stale); ``no_grad``'s enter
and exit, the block of every inference loop, add and discard their ident inline. A thread that
turns grad off by assignment (``set_grad_enabled(False)``, ``STATE.enabled = False``) gets a
``_Guard`` in its thread-local storage that takes its ident out of the set when the thread
ends, so a later thread given the same ident starts with grad on; ``no_grad`` needs none, as
its exit always runs (in whichever thread closes a suspended generator, with the ident it
stored).
"""
from __future__ import annotations

import threading

from .contextlib import context_decorator

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]

GRAD_OFF: set = set()
_GUARDED: set = set()          # threads whose _Guard exists
_get_ident = threading.get_ident
_object_new = object.__new__


class _Guard:
    """Made once per thread that disables grad by assignment; drops its ident when the thread ends."""

    __slots__ = ("ident",)

    def __init__(self, ident: int):
        self.ident = ident

    def __del__(self, off=GRAD_OFF, guarded=_GUARDED):   # bound now: globals are None at interpreter shutdown
        off.discard(self.ident)
        guarded.discard(self.ident)


class _Local(threading.local):
    """This thread's inference flag and guard; the class attributes are a new thread's."""

    inference = False
    guard = None


_LOCAL = _Local()


class _GradState:
    """The calling thread's grad flags as attributes (``STATE.enabled``, ``STATE.inference``)."""

    __slots__ = ()

    @property
    def enabled(self) -> bool:
        return not GRAD_OFF or _get_ident() not in GRAD_OFF

    @enabled.setter
    def enabled(self, value) -> None:
        ident = _get_ident()
        if value:
            GRAD_OFF.discard(ident)
            return
        GRAD_OFF.add(ident)
        if ident not in _GUARDED:
            _GUARDED.add(ident)
            _LOCAL.guard = _Guard(ident)

    @property
    def inference(self) -> bool:
        return _LOCAL.inference

    @inference.setter
    def inference(self, value) -> None:
        _LOCAL.inference = bool(value)


STATE = _GradState()


def is_grad_enabled() -> bool:
    return not GRAD_OFF or _get_ident() not in GRAD_OFF


def is_inference_mode_enabled() -> bool:
    return _LOCAL.inference


class _Mode:
    """Shared base: a context manager that also decorates functions (with or without parentheses)."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not isinstance(args[0], bool):
            return cls()(args[0])
        return super().__new__(cls)

    def __call__(self, fn):
        return context_decorator(self.clone, fn)   # a generator function's every step inside the mode

    _args: tuple = ()

    def clone(self):
        return self.__class__(*self._args)


class no_grad(_Mode):
    """Context-manager that disables gradient calculation (also a decorator).

    >>> with tapelab.no_grad():
    ...     y = x * 2          # y.requires_grad is False
    """

    # The hot block of an inference loop: one ident read, one set operation each way, no
    # ``__init__`` and no ``_Mode.__new__`` argument checks
    def __new__(cls, orig_func=None):
        if orig_func is None:
            return _object_new(cls)
        return cls()(orig_func)

    def __enter__(self):
        self.ident = ident = _get_ident()
        self.prev = prev = ident not in GRAD_OFF
        if prev:
            GRAD_OFF.add(ident)

    def __exit__(self, exc_type, exc, tb):
        if self.prev:
            GRAD_OFF.discard(self.ident)


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
    """Like ``no_grad`` and sets ``is_inference_mode_enabled()``. Tensors made inside are not marked
    (``is_inference()`` is False), so PyTorch's refusals of them outside the block are not raised."""

    def __init__(self, mode: bool = True):
        self._args = (mode,)
        self.mode = mode

    def __enter__(self):
        self.prev = (STATE.enabled, STATE.inference)
        if self.mode:
            STATE.enabled, STATE.inference = False, True

    def __exit__(self, *exc):
        STATE.enabled, STATE.inference = self.prev
