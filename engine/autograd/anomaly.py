"""Anomaly detection: name the forward op and source line behind a bad gradient.

While enabled (a declared flag of the dispatcher's state, set through
``dispatch.set_anomaly``: not a mode, nothing probes for it), the dispatcher calls
``check_forward`` after every compute op (on its slow path only): it records the op and the
user's stack on the node the op created (PyTorch's ``traceback_``), and warns once per op that
turns finite inputs into NaN (tapelab's addition: Inf is left alone, as masking makes it on
purpose). The backward engine calls ``check_backward`` after each node and raises PyTorch's
error for a NaN gradient (an Inf one passes, as in PyTorch); for that error and any other a
node's backward raises, ``annotate`` first warns PyTorch's "Error detected in ..." with the
forward call's stack.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import traceback
import warnings

from ..core.dispatch import set_anomaly
from ..core.tensor import Tensor
from ..base.dtype import FLOATING_KINDS

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
           "AnomalyWarning"]

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _Depth(threading.local):
    value = 0


class _AnomalyState:
    """On/off and ``check_nan`` are process-wide, as PyTorch's ``AnomalyMode`` is;
    ``backward_depth`` (>0 while a node's backward runs in this thread: its ops are not
    forward anomalies) is per thread, so one thread's backward pass never hides another
    thread's forward anomaly."""
    __slots__ = ("enabled", "check_nan", "_depth")

    def __init__(self):
        self.enabled = False
        self.check_nan = True
        self._depth = _Depth()

    @property
    def backward_depth(self) -> int:
        return self._depth.value

    @backward_depth.setter
    def backward_depth(self, value: int) -> None:
        self._depth.value = value


STATE = _AnomalyState()


class AnomalyWarning(RuntimeWarning):
    """An op produced NaN from finite inputs (only while anomaly detection is on)."""


def is_anomaly_enabled() -> bool:
    return STATE.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return STATE.check_nan


def _set(enabled: bool, check_nan: bool) -> None:
    STATE.enabled, STATE.check_nan = bool(enabled), bool(check_nan)
    set_anomaly(check_forward if STATE.enabled else None)


class detect_anomaly:
    """Context manager (and decorator) enabling anomaly detection inside its scope.

    >>> with tapelab.autograd.detect_anomaly():
    ...     (x.sqrt() * 0).sum().backward()   # RuntimeError naming SqrtBackward0 and the sqrt line
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self.prev = (STATE.enabled, STATE.check_nan)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and "
                      "should only be enabled for debugging.", stacklevel=2)
        _set(True, self.check_nan)

    def __exit__(self, *exc):
        _set(*self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off; takes effect at once, and as a context manager restores."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (STATE.enabled, STATE.check_nan)
        _set(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _set(*self.prev)


def user_frame():
    """The innermost frame outside the tapelab package (the user's line), or None."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return f


def _stack(f) -> list[str]:
    """The user's stack down to frame ``f``, outermost first, as ``traceback.format_stack`` lines."""
    if f is None:
        return ['  File "<unknown>", line 0, in <unknown>\n']
    return [line for line, (filename, *_) in zip(traceback.format_stack(f), traceback.extract_stack(f))
            if not filename.startswith(_PKG)]


def _finite(t) -> bool:
    data = t._data
    return data.dtype.kind not in FLOATING_KINDS or bool(t._device.xp.isfinite(data).all())


def _has_nan(t) -> bool:
    data = t._data
    return data.dtype.kind in FLOATING_KINDS and bool(t._device.xp.isnan(data).any())


def _stats(t) -> str:
    if not hasattr(t, "_data"):
        return repr(t)
    d = t._data
    head = f"{t.dtype.name}{list(d.shape)}"
    if d.size == 0 or d.dtype.kind not in FLOATING_KINDS:
        return head
    xp = t._device.xp
    fin = d[xp.isfinite(d)]
    bad = int(d.size - fin.size)
    rng = f"min={float(fin.min()):.4g} max={float(fin.max()):.4g}" if fin.size else "no finite values"
    return f"{head} {rng}" + (f" ({bad} non-finite)" if bad else "")


def record(node, op_name: str, frame=None) -> None:
    """Store on ``node`` the forward op's name and the user's stack (PyTorch's ``traceback_``)."""
    meta = node.metadata
    meta["traceback_"] = _stack(frame or user_frame())
    meta["anomaly_op"] = op_name


def check_forward(op, args, res) -> None:
    """Record where ``res`` was made on its node; warn if ``op`` made NaN from finite inputs."""
    frame = user_frame()
    if res.grad_fn is not None:
        record(res.grad_fn, op.name, frame)
    if not STATE.check_nan or STATE.backward_depth or not _has_nan(res):
        return
    tensors = [a for a in args if isinstance(a, Tensor)]
    if all(_finite(t) for t in tensors):
        inputs = "; ".join(f"input {i}: {_stats(a)}" for i, a in enumerate(args))
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "<unknown>"
        warnings.warn_explicit(
            f"Anomaly: {op.name} produced NaN from finite inputs at {where} ({inputs}); "
            f"output {_stats(res)}", AnomalyWarning,
            frame.f_code.co_filename if frame else "<unknown>", frame.f_lineno if frame else 0)


def check_backward(node, grads) -> None:
    """PyTorch's "returned nan values" error for the first gradient of ``node`` holding a NaN."""
    if not STATE.check_nan:
        return
    for i, g in enumerate(grads):
        if g is not None and _has_nan(g):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def annotate(exc: BaseException, node) -> None:
    """PyTorch's warning for an error raised in ``node``'s backward: where its forward op was called."""
    if getattr(exc, "_tapelab_anomaly", False):
        return
    exc._tapelab_anomaly = True
    tb = (node._metadata or {}).get("traceback_")
    if tb:
        text = "Traceback of forward call that caused the error:\n" + "".join(tb)
    else:
        text = ("No forward pass information available. Enable detect anomaly during forward pass for more "
                "information.")
    warnings.warn_explicit(f"Error detected in {node.name()}. {text}", UserWarning, *_location())


def _location() -> tuple[str, int]:
    """The user's line (the ``backward()`` call) a warning raised inside the engine is attributed to."""
    f = user_frame()
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("<unknown>", 0)
