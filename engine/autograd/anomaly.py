"""Anomaly detection: name the forward op and source line behind a bad gradient.

While enabled (a declared flag of the dispatcher's state, set through
``dispatch.set_anomaly``: not a mode, nothing probes for it), the dispatcher calls
``check_forward`` after every compute op (on its slow path only): it records the op and the user's source line on the node the op created, and
warns once per op that turns finite inputs into NaN/Inf. The backward engine calls
``check_backward`` after each node and raises PyTorch's error, extended with where the
node came from.
"""
from __future__ import annotations

import functools
import linecache
import os
import sys
import threading
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
    """An op produced NaN or Inf from finite inputs (only while anomaly detection is on)."""


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


def _where(f) -> str:
    if f is None:
        return "<unknown>"
    code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f'File "{f.f_code.co_filename}", line {f.f_lineno}, in {f.f_code.co_name}' + (
        f"\n    {code}" if code else "")


def _finite(t) -> bool:
    data = t._data
    return data.dtype.kind not in FLOATING_KINDS or bool(t._device.xp.isfinite(data).all())


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
    """Store on ``node`` the forward op's name and the user's source line (PyTorch's ``traceback_``)."""
    meta = node.metadata
    meta["traceback_"] = [_where(frame or user_frame()) + "\n"]
    meta["anomaly_op"] = op_name


def check_forward(op, args, res) -> None:
    """Record where ``res`` was made on its node; warn if ``op`` made NaN/Inf from finite inputs."""
    frame = user_frame()
    if res.grad_fn is not None:
        record(res.grad_fn, op.name, frame)
    if not STATE.check_nan or STATE.backward_depth or _finite(res):
        return
    tensors = [a for a in args if isinstance(a, Tensor)]
    if all(_finite(t) for t in tensors):
        inputs = "; ".join(f"input {i}: {_stats(a)}" for i, a in enumerate(args))
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "<unknown>"
        warnings.warn_explicit(
            f"Anomaly: {op.name} produced non-finite values from finite inputs at {where} ({inputs}); "
            f"output {_stats(res)}", AnomalyWarning,
            frame.f_code.co_filename if frame else "<unknown>", frame.f_lineno if frame else 0)


def _forward_note(node) -> str:
    meta = node._metadata or {}
    tb = meta.get("traceback_")
    if not tb:
        return (f"No forward trace recorded for {node.name()}: anomaly detection was off when the "
                "graph was built.")
    return (f"The forward op {meta.get('anomaly_op', '?')} that created {node.name()} was called at:\n"
            + "".join(tb).rstrip())


def check_backward(node, grads) -> None:
    """PyTorch's "returned nan values" error for the first non-finite gradient of ``node``."""
    if not STATE.check_nan:
        return
    for i, g in enumerate(grads):
        if g is not None and not _finite(g):
            kind = "nan" if bool(g._device.xp.isnan(g._data).any()) else "inf"
            raise RuntimeError(f"Function '{node.name()}' returned {kind} values in its {i}th output.\n"
                               + _forward_note(node))


def annotate(exc: BaseException, node) -> None:
    """Add to an error raised in ``node``'s backward where its forward op was called."""
    if getattr(exc, "_tapelab_anomaly", False):
        return
    exc._tapelab_anomaly = True
    if f"Function '{node.name()}' returned" not in str(exc):
        exc.add_note(f"Error detected in {node.name()}. " + _forward_note(node))
