"""RoIPool (Fast R-CNN): the maximum of each bin of each region, with box corners rounded to the grid.

As in roi_align, the bins' cells depend only on the boxes (no gradient), so they are listed on the
host; the output is a masked gather and a max over each bin, whose gradient (to the first maximal
cell, as torchvision's kernel picks it) comes from autograd.
"""
from __future__ import annotations

import math

import numpy as np

from ... import nn
from ...core.creation import as_tensor
from ...core.tensor import Tensor
from .roi_align import _rois

__all__ = ["roi_pool", "RoIPool"]


def _round_half_away(x: float) -> int:
    """C's ``round``: halves go away from zero (Python's ``round`` goes to even)."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def _bins(rois: np.ndarray, height: int, width: int, pooled: tuple[int, int],
          scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Flat input indices (K, PH*PW, S) of each bin's cells in row-major order, and which are real."""
    ph_n, pw_n = pooled
    cells: list[list[np.ndarray]] = []
    for x1, y1, x2, y2 in rois[:, 1:].astype(np.float64):
        start_w, start_h = _round_half_away(x1 * scale), _round_half_away(y1 * scale)
        end_w, end_h = _round_half_away(x2 * scale), _round_half_away(y2 * scale)
        bin_h = max(end_h - start_h + 1, 1) / ph_n
        bin_w = max(end_w - start_w + 1, 1) / pw_n
        per_bin = []
        for ph in range(ph_n):
            h0 = min(max(math.floor(ph * bin_h) + start_h, 0), height)
            h1 = min(max(math.ceil((ph + 1) * bin_h) + start_h, 0), height)
            for pw in range(pw_n):
                w0 = min(max(math.floor(pw * bin_w) + start_w, 0), width)
                w1 = min(max(math.ceil((pw + 1) * bin_w) + start_w, 0), width)
                per_bin.append((np.arange(h0, h1)[:, None] * width + np.arange(w0, w1)[None, :]).ravel())
        cells.append(per_bin)
    s = max([len(c) for per_bin in cells for c in per_bin] + [1])
    index = np.zeros((len(cells), ph_n * pw_n, s), dtype=np.int64)
    valid = np.zeros((len(cells), ph_n * pw_n, s), dtype=bool)
    for k, per_bin in enumerate(cells):
        for b, c in enumerate(per_bin):
            index[k, b, :len(c)] = c
            valid[k, b, :len(c)] = True
    return index, valid


def roi_pool(input: Tensor, boxes, output_size, spatial_scale: float = 1.0) -> Tensor:
    """Max-pool each region of ``boxes`` from ``input`` (N, C, H, W) into ``output_size`` bins -> (K, C, PH, PW).

    Args:
        boxes: (K, 5) rows of (batch index, x1, y1, x2, y2), or a list of (L, 4) boxes per image.
        spatial_scale: maps box coordinates to input coordinates (1/stride of the feature map).

    Empty bins (a region outside the map) give 0.
    """
    if input.dim() != 4:
        raise ValueError(f"roi_pool: input must be (N, C, H, W), got shape {tuple(input.shape)}")
    pooled = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    rois = _rois(boxes).detach().cpu().numpy()
    n, c, height, width = input.shape
    index, valid = _bins(rois, height, width, pooled, spatial_scale)
    k, bins, s = index.shape
    batch = as_tensor(rois[:, 0].astype(np.int64), device=input.device)
    feats = input.reshape(n, c, height * width)[batch]                                  # (K, C, H*W)
    idx = as_tensor(index.reshape(k, 1, bins * s), device=input.device).expand(k, c, bins * s)
    values = feats.gather(2, idx).reshape(k, c, bins, s)
    mask = as_tensor(valid.reshape(k, 1, bins, s), device=input.device)
    best = values.masked_fill(~mask, float("-inf")).max(dim=-1).values
    empty = as_tensor(~valid.any(-1).reshape(k, 1, bins), device=input.device)
    return best.masked_fill(empty, 0.0).reshape(k, c, *pooled)


class RoIPool(nn.Module):
    """``roi_pool`` as a module."""

    def __init__(self, output_size, spatial_scale: float) -> None:
        super().__init__()
        self.output_size, self.spatial_scale = output_size, spatial_scale

    def forward(self, input: Tensor, rois) -> Tensor:
        return roi_pool(input, rois, self.output_size, self.spatial_scale)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale})"
