"""DropBlock (Ghiasi et al. 2018): dropout of contiguous square (cubic) regions of feature maps,
which removes information that plain dropout leaves in neighbouring activations."""
from __future__ import annotations

from ... import nn
from ...core.creation import empty
from ...core.tensor import Tensor
from ...nn import functional as F

__all__ = ["drop_block2d", "drop_block3d", "DropBlock2d", "DropBlock3d"]


def _drop_block(input: Tensor, p: float, block_size: int, inplace: bool, eps: float, training: bool,
                dims: int) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}.")
    if input.ndim != dims + 2:
        raise ValueError(f"input should be {dims + 2} dimensional. Got {input.ndim} dimensions.")
    if not training or p == 0.0:
        return input
    spatial = tuple(input.shape[2:])
    block_size = min(block_size, *spatial)
    if block_size % 2 == 0:
        raise ValueError(f"block size should be odd. Got {block_size} which is even.")
    valid = [s - block_size + 1 for s in spatial]   # block centres whose block fits inside the map
    area = 1
    for s, v in zip(spatial, valid):
        area *= s / v
    gamma = p * area / block_size ** dims   # seed rate giving an expected dropped fraction of p
    seeds = empty((*input.shape[:2], *valid), dtype=input.dtype, device=input.device).bernoulli_(gamma)
    seeds = F.pad(seeds, [block_size // 2] * (2 * dims), value=0)
    pool = F.max_pool2d if dims == 2 else F.max_pool3d
    mask = 1 - pool(seeds, stride=1, kernel_size=block_size, padding=block_size // 2)
    scale = mask.numel() / (eps + mask.sum())
    if inplace:
        return input.mul_(mask).mul_(scale)
    return input * mask * scale


def drop_block2d(input: Tensor, p: float, block_size: int, inplace: bool = False, eps: float = 1e-06,
                 training: bool = True) -> Tensor:
    """Zero ``block_size`` x ``block_size`` regions of (N, C, H, W) ``input`` so that a fraction ``p`` is
    dropped on average, and rescale the rest by numel / kept; the identity outside training."""
    return _drop_block(input, p, block_size, inplace, eps, training, 2)


def drop_block3d(input: Tensor, p: float, block_size: int, inplace: bool = False, eps: float = 1e-06,
                 training: bool = True) -> Tensor:
    """``drop_block2d`` for (N, C, D, H, W) inputs, with cubic blocks."""
    return _drop_block(input, p, block_size, inplace, eps, training, 3)


class DropBlock2d(nn.Module):
    """``drop_block2d`` as a layer (its training flag is the module's)."""

    def __init__(self, p: float, block_size: int, inplace: bool = False, eps: float = 1e-06) -> None:
        super().__init__()
        self.p, self.block_size, self.inplace, self.eps = p, block_size, inplace, eps

    def forward(self, input: Tensor) -> Tensor:
        return drop_block2d(input, self.p, self.block_size, self.inplace, self.eps, self.training)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(p={self.p}, block_size={self.block_size}, inplace={self.inplace})"


class DropBlock3d(DropBlock2d):
    """``drop_block3d`` as a layer."""

    def forward(self, input: Tensor) -> Tensor:
        return drop_block3d(input, self.p, self.block_size, self.inplace, self.eps, self.training)
