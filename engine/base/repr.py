"""``repr(tensor)`` in PyTorch's format (precision 4, shared width, sci mode for wide ranges)."""
from __future__ import annotations

import numpy as np

from .dtype import float32, int64, bool as bool_

_NO_SUFFIX = (float32, int64, bool_)


def _float_formatter(arr: np.ndarray):
    finite = arr[np.isfinite(arr)].astype(np.float64)
    if finite.size == 0:
        return lambda v: _special(v)
    absf = np.abs(finite)
    nonzero = absf[absf > 0]
    if np.all(finite == np.round(finite)):
        if absf.max() >= 1e8:
            return _sci
        return lambda v: _special(v) or f"{v:.0f}."
    if nonzero.size and (nonzero.max() / nonzero.min() > 1000 or nonzero.max() >= 1e8 or nonzero.min() < 1e-4):
        return _sci
    return lambda v: _special(v) or f"{v:.4f}"


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return ""


def _sci(v):
    return _special(v) or f"{v:.4e}"


def _body(arr: np.ndarray, indent: int) -> str:
    kind = arr.dtype.kind
    if kind == "f":
        fmt = _float_formatter(arr)
        cells = np.vectorize(fmt, otypes=[object])(arr) if arr.size else arr
    elif kind == "b":
        cells = np.where(arr, "True", "False").astype(object) if arr.size else arr
    else:
        cells = arr.astype(object)
    if arr.size == 0:
        return "[]"
    width = max(len(str(c)) for c in np.ravel(cells))
    summarize = arr.size > 1000
    return np.array2string(cells, separator=", ", prefix=" " * indent,
                           formatter={"all": lambda c: str(c).rjust(width)},
                           threshold=1000 if summarize else arr.size + 1, edgeitems=3,
                           max_line_width=80)


def _grad_extras(t) -> list:
    if t.grad_fn is not None:
        return [f"grad_fn=<{t.grad_fn.name()}>"]
    return ["requires_grad=True"] if t.requires_grad else []


def tensor_repr(t) -> str:
    if t.device.type == "meta":      # no values: PyTorch's placeholder
        extras = ["device='meta'", f"size={tuple(t.shape)}"] + \
            ([f"dtype={t.dtype!r}"] if t.dtype is not float32 else []) + _grad_extras(t)
        return "tensor(..., " + ", ".join(extras) + ")"
    arr = t.detach().__array__()
    prefix = "tensor("
    if arr.ndim == 0:
        body = _body(arr.reshape(1), len(prefix))[1:-1].strip()
    else:
        body = _body(arr, len(prefix))
    extras = []
    if arr.size == 0 and arr.shape != (0,):
        extras.append(f"size={tuple(arr.shape)}")
    if t.dtype not in _NO_SUFFIX:
        extras.append(f"dtype={t.dtype!r}")
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    extras += _grad_extras(t)
    return prefix + body + "".join(", " + e for e in extras) + ")"
