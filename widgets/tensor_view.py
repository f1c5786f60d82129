"""TensorView: shape, dtype, device, statistics, a histogram and, for 2-D tensors, a heatmap.

``tensor_summary`` computes what is shown from the backend array directly (it dispatches no op,
so showing a tensor never records itself); ``tensor_html`` is the static HTML form used by the
kernel's rich display of tensors.
"""
from __future__ import annotations

import html

import numpy as np

from tapelab.tape import summarize

__all__ = ["tensor_summary", "tensor_html", "summary_html"]


def tensor_summary(t, name: str = "", bins: int = 30, heat: int = 64) -> dict:
    """A JSON-serialisable summary of a tensor: never the whole tensor (heatmaps are downsampled
    to at most ``heat`` x ``heat`` cells by block means)."""
    grad = getattr(t, "grad", None)
    if t.device.type == "meta":                           # shape and dtype only: no values to draw
        return {"name": name, "shape": list(t.shape), "dtype": t.dtype.name, "device": "meta",
                "requires_grad": bool(t.requires_grad), "stats": None, "grad": None, "hist": None, "heatmap": None}
    a = t.numpy(force=True)
    out = {"name": name, "shape": list(a.shape), "dtype": t.dtype.name if hasattr(t.dtype, "name") else str(t.dtype),
           "device": str(t.device), "requires_grad": bool(getattr(t, "requires_grad", False)),
           "stats": summarize(t), "grad": summarize(grad) if grad is not None else None,
           "hist": None, "heatmap": None}
    if a.size and a.dtype.kind in "biuf":
        f = a.astype(np.float64).ravel()
        f = f[np.isfinite(f)]
        if f.size:
            counts, edges = np.histogram(f, bins=bins)
            out["hist"] = {"edges": edges.tolist(), "counts": counts.tolist()}
    if a.ndim == 2 and a.size and a.dtype.kind in "biuf":
        m = a.astype(np.float64)
        r, c = m.shape
        sr, sc = -(-r // heat), -(-c // heat)
        pr, pc = -(-r // sr) * sr, -(-c // sc) * sc
        padded = np.full((pr, pc), np.nan)
        padded[:r, :c] = m
        with np.errstate(all="ignore"):
            blocks = np.nanmean(padded.reshape(pr // sr, sr, pc // sc, sc), axis=(1, 3))
        finite = blocks[np.isfinite(blocks)]
        out["heatmap"] = {"rows": int(blocks.shape[0]), "cols": int(blocks.shape[1]),
                          "values": [float(v) if np.isfinite(v) else None for v in blocks.ravel()],
                          "min": float(finite.min()) if finite.size else 0.0,
                          "max": float(finite.max()) if finite.size else 0.0}
    return out


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.4g}"


def tensor_html(t, name: str = "") -> str:
    """Static HTML: a table of the summary plus an inline SVG histogram; every string escaped."""
    return summary_html(tensor_summary(t, name=name))


def summary_html(s: dict) -> str:
    """``tensor_html`` of a ``tensor_summary`` (a saved TensorView shows it)."""
    esc = html.escape
    name = s.get("name", "")
    st = s["stats"] or {}
    rows = [("shape", "(" + ", ".join(map(str, s["shape"])) + ")"), ("dtype", s["dtype"]), ("device", s["device"]),
            ("requires_grad", str(s["requires_grad"]))]
    if st:
        rows.append(("value", " · ".join(f"{k} {_fmt(st.get(k))}" for k in ("min", "max", "mean", "std"))
                     + (f" · nan {st['nan']} · inf {st['inf']}" if st.get("nan") or st.get("inf") else "")))
    if s["grad"]:
        g = s["grad"]
        rows.append(("grad", " · ".join(f"{k} {_fmt(g.get(k))}" for k in ("min", "max", "mean", "norm"))))
    table = "".join(f"<tr><td style='color:#6b7280;padding-right:8px'>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows)
    hist = ""
    if s["hist"]:
        counts = s["hist"]["counts"]
        top = max(counts) or 1
        w = 180 / len(counts)
        bars = "".join(f"<rect x='{i * w:.1f}' y='{60 - 60 * c / top:.1f}' width='{max(w - 1, 1):.1f}' "
                       f"height='{60 * c / top:.1f}' fill='#60a5fa'/>" for i, c in enumerate(counts))
        hist = f"<svg width='180' height='60' class='tapelab-hist'>{bars}</svg>"
    title = f"<b>{esc(name)}</b> " if name else ""
    return (f"<div class='tapelab-tensor' style='display:flex;gap:12px;align-items:flex-start;font-size:12px'>"
            f"<div>{title}<table>{table}</table></div>{hist}</div>")
