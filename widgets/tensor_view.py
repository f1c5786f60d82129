"""TensorView: shape, dtype, device, statistics, a histogram and, for 2-D tensors, a heatmap;
a batch of images (N, C, H, W) or one image (C, H, W), C in 1 or 3, is drawn as a grid of pictures.

``tensor_summary`` computes what is shown from the backend array directly (it dispatches no op,
so showing a tensor never records itself); ``tensor_html`` is the static HTML form used by the
kernel's rich display of tensors.
"""
from __future__ import annotations

import base64
import html
import math
import struct

import numpy as np

from tapelab.tape import summarize

__all__ = ["tensor_summary", "tensor_html", "summary_html", "image_grid"]

GRID_PIXELS = 128   # the longer side of the image grid sent to the view, at most


def image_grid(a: np.ndarray, nrow: int = 8, padding: int = 1, size: int = GRID_PIXELS) -> dict | None:
    """Tile an (N, C, H, W) or (C, H, W) array with C in 1 or 3 as torchvision's ``make_grid`` does, each
    image scaled to [0, 255] by its own min and max, downsampled to at most ``size`` pixels a side.

    Returns ``{"rows", "cols", "count", "pixels"}`` (pixels: rows * cols RGB triples) or None."""
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[1] not in (1, 3) or not a.size or a.dtype.kind not in "biuf" or min(a.shape[2:]) < 2:
        return None
    n, _, h, w = a.shape
    f = np.nan_to_num(a.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    lo = f.min(axis=(1, 2, 3), keepdims=True)
    span = f.max(axis=(1, 2, 3), keepdims=True) - lo
    f = (f - lo) / np.where(span > 0, span, 1.0)
    if f.shape[1] == 1:
        f = np.repeat(f, 3, axis=1)
    cols_n = min(nrow, n)
    rows_n = math.ceil(n / cols_n)
    canvas = np.zeros((rows_n * (h + padding) + padding, cols_n * (w + padding) + padding, 3))
    for k in range(n):
        r, c = divmod(k, cols_n)
        y, x = padding + r * (h + padding), padding + c * (w + padding)
        canvas[y:y + h, x:x + w] = f[k].transpose(1, 2, 0)
    step = max(1, math.ceil(max(canvas.shape[:2]) / size))   # nearest-neighbour: pixels stay crisp
    small = (canvas[::step, ::step] * 255).round().astype(np.uint8)
    return {"rows": int(small.shape[0]), "cols": int(small.shape[1]), "count": int(n),
            "pixels": small.ravel().tolist()}


def _bmp_data_url(grid: dict) -> str:
    """The grid as a data: URL of a 24-bit BMP (rows bottom-up, BGR, padded to 4 bytes): no image library."""
    h, w = grid["rows"], grid["cols"]
    rgb = np.asarray(grid["pixels"], dtype=np.uint8).reshape(h, w, 3)
    row = w * 3
    pad = (-row) % 4
    body = np.zeros((h, row + pad), np.uint8)
    body[:, :row] = rgb[::-1, :, ::-1].reshape(h, row)
    data = body.tobytes()
    header = b"BM" + struct.pack("<IHHI", 54 + len(data), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    return "data:image/bmp;base64," + base64.b64encode(header + info + data).decode()


def tensor_summary(t, name: str = "", bins: int = 30, heat: int = 64) -> dict:
    """A JSON-serialisable summary of a tensor: never the whole tensor (heatmaps are downsampled
    to at most ``heat`` x ``heat`` cells by block means)."""
    grad = getattr(t, "grad", None)
    if t.device.type == "meta":                           # shape and dtype only: no values to draw
        return {"name": name, "shape": list(t.shape), "dtype": t.dtype.name, "device": "meta",
                "requires_grad": bool(t.requires_grad), "stats": None, "grad": None, "hist": None, "heatmap": None,
                "images": None}
    a = t.numpy(force=True)
    out = {"name": name, "shape": list(a.shape), "dtype": t.dtype.name if hasattr(t.dtype, "name") else str(t.dtype),
           "device": str(t.device), "requires_grad": bool(getattr(t, "requires_grad", False)),
           "stats": summarize(t), "grad": summarize(grad) if grad is not None else None,
           "hist": None, "heatmap": None, "images": image_grid(a)}
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
    if s.get("images"):
        g = s["images"]
        scale = max(1, 160 // max(g["rows"], g["cols"]))
        hist += (f"<img class='tapelab-images' alt='{g['count']} images' src='{_bmp_data_url(g)}' "
                 f"style='image-rendering:pixelated;width:{g['cols'] * scale}px;height:{g['rows'] * scale}px'/>")
    title = f"<b>{esc(name)}</b> " if name else ""
    return (f"<div class='tapelab-tensor' style='display:flex;gap:12px;align-items:flex-start;font-size:12px'>"
            f"<div>{title}<table>{table}</table></div>{hist}</div>")
