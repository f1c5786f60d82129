"""RoIAlign (Mask R-CNN): average of bilinear samples in each bin of each region, without rounding.

The sample positions and bilinear weights depend only on the boxes (which get no gradient, as in
torchvision), so they are computed on the host; the output is then a weighted gather of the input,
written with Tensor ops, and its gradient with respect to the input comes from autograd.
"""
from __future__ import annotations

import math

import numpy as np

from ... import nn
from ...core.creation import as_tensor, full
from ...core.tensor import Tensor
from ...ops.movement import cat

__all__ = ["roi_align", "RoIAlign"]

_GATHER_ELEMENTS = 1 << 24   # values gathered per chunk of RoIs (64 MiB in float32)


def _rois(boxes) -> Tensor:
    """A (K, 5) tensor of (batch index, x1, y1, x2, y2) from that tensor or a list of (L, 4) per image."""
    if isinstance(boxes, Tensor):
        if boxes.dim() != 2 or boxes.shape[1] != 5:
            raise ValueError(f"roi_align: boxes must be a (K, 5) tensor or a list of (L, 4) tensors, "
                             f"got shape {tuple(boxes.shape)}")
        return boxes
    parts = [cat([full((len(b), 1), i, dtype=b.dtype, device=b.device), b], 1) for i, b in enumerate(boxes)]
    return cat(parts, 0)


def _sampling(rois: np.ndarray, height: int, width: int, pooled: tuple[int, int], scale: float, ratio: int,
              aligned: bool) -> tuple[np.ndarray, np.ndarray]:
    """Flat input indices and weights (K, PH*PW, S) whose weighted sum is each output bin."""
    ph_n, pw_n = pooled
    offset = 0.5 if aligned else 0.0
    per_roi = []
    for x1, y1, x2, y2 in rois[:, 1:].astype(np.float64):
        sw, sh = x1 * scale - offset, y1 * scale - offset
        rw, rh = x2 * scale - offset - sw, y2 * scale - offset - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph_n, rw / pw_n
        gh = ratio if ratio > 0 else math.ceil(rh / ph_n)
        gw = ratio if ratio > 0 else math.ceil(rw / pw_n)
        count = max(gh * gw, 1)
        ys = sh + np.arange(ph_n)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh    # (PH, gh)
        xs = sw + np.arange(pw_n)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw    # (PW, gw)
        y = np.broadcast_to(ys[:, None, :, None], (ph_n, pw_n, gh, gw)).reshape(ph_n * pw_n, -1)
        x = np.broadcast_to(xs[None, :, None, :], (ph_n, pw_n, gh, gw)).reshape(ph_n * pw_n, -1)
        per_roi.append(_bilinear(y, x, height, width, count))
    s = max((idx.shape[1] for idx, _ in per_roi), default=4)
    index = np.zeros((len(per_roi), ph_n * pw_n, s), dtype=np.int64)
    weight = np.zeros((len(per_roi), ph_n * pw_n, s))
    for k, (idx, w) in enumerate(per_roi):
        index[k, :, :idx.shape[1]] = idx
        weight[k, :, :w.shape[1]] = w
    return index, weight


def _bilinear(y: np.ndarray, x: np.ndarray, height: int, width: int, count: int):
    """The four neighbours' flat indices and weights (divided by the bin's sample count)."""
    outside = (y < -1.0) | (y > height) | (x < -1.0) | (x > width)
    y, x = np.maximum(y, 0.0), np.maximum(x, 0.0)
    y_low, x_low = y.astype(np.int64), x.astype(np.int64)
    y_edge, x_edge = y_low >= height - 1, x_low >= width - 1
    y_low, x_low = np.where(y_edge, height - 1, y_low), np.where(x_edge, width - 1, x_low)
    y_high, x_high = np.where(y_edge, y_low, y_low + 1), np.where(x_edge, x_low, x_low + 1)
    y, x = np.where(y_edge, y_low, y), np.where(x_edge, x_low, x)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1.0 - ly, 1.0 - lx
    idx = np.concatenate([y_low * width + x_low, y_low * width + x_high, y_high * width + x_low,
                          y_high * width + x_high], axis=1)
    w = np.concatenate([hy * hx, hy * lx, ly * hx, ly * lx], axis=1) * np.tile(~outside, (1, 4))
    return idx, w / count


def roi_align(input: Tensor, boxes, output_size, spatial_scale: float = 1.0, sampling_ratio: int = -1,
              aligned: bool = False) -> Tensor:
    """Pool each region of ``boxes`` from ``input`` (N, C, H, W) into ``output_size`` bins -> (K, C, PH, PW).

    Args:
        boxes: (K, 5) rows of (batch index, x1, y1, x2, y2), or a list of (L, 4) boxes per image.
        spatial_scale: maps box coordinates to input coordinates (1/stride of the feature map).
        sampling_ratio: samples per bin side; <= 0 picks ceil(roi size / output size) per region.
        aligned: shift boxes by half a pixel so that corners land on pixel centres.
    """
    if input.dim() != 4:
        raise ValueError(f"roi_align: input must be (N, C, H, W), got shape {tuple(input.shape)}")
    pooled = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    rois = _rois(boxes).detach().cpu().numpy()
    n, c, height, width = input.shape
    index, weight = _sampling(rois, height, width, pooled, spatial_scale, sampling_ratio, aligned)
    k, bins, s = index.shape
    # gather only the sampled pixels, as rows of the (N*H*W, C) map, a bounded number of RoIs at a time:
    # a detector pools hundreds of RoIs from maps of 10^5 pixels
    flat = rois[:, 0].astype(np.int64)[:, None, None] * (height * width) + index       # (K, bins, S)
    pixels = input.permute(0, 2, 3, 1).reshape(n * height * width, c)
    step = max(1, _GATHER_ELEMENTS // max(1, bins * s * c))
    parts = []
    for start in range(0, k, step):
        rows = pixels[as_tensor(flat[start:start + step].reshape(-1), device=input.device)]
        w = as_tensor(weight[start:start + step].reshape(-1, bins, s, 1), dtype=input.dtype, device=input.device)
        parts.append((rows.reshape(-1, bins, s, c) * w).sum(2))                          # (k', bins, C)
    out = cat(parts, 0) if parts else pixels.new_zeros((0, bins, c))
    return out.permute(0, 2, 1).reshape(k, c, *pooled)


class RoIAlign(nn.Module):
    """``roi_align`` as a module."""

    def __init__(self, output_size, spatial_scale: float, sampling_ratio: int, aligned: bool = False) -> None:
        super().__init__()
        self.output_size, self.spatial_scale = output_size, spatial_scale
        self.sampling_ratio, self.aligned = sampling_ratio, aligned

    def forward(self, input: Tensor, rois) -> Tensor:
        return roi_align(input, rois, self.output_size, self.spatial_scale, self.sampling_ratio, self.aligned)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
                f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned}")
