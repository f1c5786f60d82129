"""Plain-data views of tensors, nodes and source lines for the steppers (JSON-ready, no tensors kept)."""
from __future__ import annotations

import math
import re

from ..tape import summarize
from ..core.tensor import Tensor
from ..base.dtype import FLOATING_KINDS

__all__ = ["grad_summary", "is_finite", "full_norm", "source_of", "forward_op_of"]

_WHERE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>[^\n]*)(?:\n\s*(?P<code>.*))?')


def grad_summary(t) -> dict | None:
    """Shape, dtype and the engine's tensor summary (``tape.summarize``: min/max/mean/std/norm
    over finite values, nan/inf counts; no statistics for a tensor without values, on meta)."""
    if not isinstance(t, Tensor):
        return None
    out = {"shape": list(t._data.shape), "dtype": t.dtype.name}
    out.update(summarize(t) or {})
    return out


def is_finite(t) -> bool:
    """True when ``t`` (a Tensor, or anything else) holds no NaN/Inf."""
    if t is None or not hasattr(t, "_data"):
        return True
    d = t._data
    return d.dtype.kind not in FLOATING_KINDS or bool(t._device.xp.isfinite(d).all())


def full_norm(t) -> float:
    """The L2 norm over all values (inf when any value is NaN or Inf), on the backend array."""
    if t is None or not hasattr(t, "_data") or t._data.size == 0:
        return 0.0
    d = t._data
    xp = t._device.xp
    if d.dtype.kind not in FLOATING_KINDS:
        d = d.astype(xp.float64)
    n = float(xp.sqrt((abs(d).astype(xp.float64) ** 2).sum()))
    return n if math.isfinite(n) else math.inf


def source_of(node) -> dict | None:
    """Where the forward op behind ``node`` was called (the innermost frame of the stack anomaly mode
    recorded), else None.

    Returns ``{"file", "line", "function", "code", "text"}``.
    """
    meta = getattr(node, "_metadata", None) or {}
    tb = meta.get("traceback_")
    if not tb:
        return None
    text = "".join(tb).rstrip()
    frames = list(_WHERE.finditer(text))
    m = frames[-1] if frames else None
    if m is None:
        return {"file": None, "line": None, "function": None, "code": None, "text": text}
    return {"file": m["file"], "line": int(m["line"]), "function": m["func"].strip(),
            "code": (m["code"] or "").strip() or None, "text": m[0].strip()}


def forward_op_of(node) -> str | None:
    """The forward op's name: anomaly mode's record, else the recorded primitive's name."""
    meta = getattr(node, "_metadata", None) or {}
    if meta.get("anomaly_op"):
        return meta["anomaly_op"]
    op = getattr(node, "op", None)
    return getattr(op, "name", None)
