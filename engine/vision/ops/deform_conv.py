"""Deformable convolution (torchvision's ``deform_conv2d``, DCN v1, and v2 with a modulation ``mask``).

Each kernel tap of each output position reads the input at its regular place moved by a learned
``offset`` (dy, dx pairs per offset group and tap), by bilinear interpolation, zero outside the image
(a point at or beyond one pixel past the border reads nothing, as torchvision's kernel); ``mask``
scales what a tap read. The sampled columns then meet the weight in one batched product per group.
Written with Tensor ops, so the gradients with respect to the input, offset, mask, weight and bias
come from autograd.
"""
from __future__ import annotations

import math

from ... import nn
from ...core.creation import arange, empty
from ...core.tensor import Tensor
from ...nn import init

__all__ = ["deform_conv2d", "DeformConv2d"]


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def deform_conv2d(input: Tensor, offset: Tensor, weight: Tensor, bias: Tensor | None = None, stride=(1, 1),
                  padding=(0, 0), dilation=(1, 1), mask: Tensor | None = None) -> Tensor:
    """``input`` (B, C, H, W) convolved with ``weight`` (O, C / groups, kh, kw) at positions moved by
    ``offset`` (B, 2 * offset_groups * kh * kw, Ho, Wo), each tap scaled by ``mask`` (B, offset_groups *
    kh * kw, Ho, Wo) when given."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    B, C, H, W = input.shape
    O, Cg, kh, kw = weight.shape
    K = kh * kw
    if C % Cg or offset.shape[1] % (2 * K):
        raise RuntimeError(f"deform_conv2d: input channels {C} must be a multiple of the weight's {Cg}, and the "
                           f"offset's channels {offset.shape[1]} of 2 * kh * kw = {2 * K}")
    groups, og = C // Cg, offset.shape[1] // (2 * K)
    if C % og:
        raise RuntimeError(f"deform_conv2d: input channels {C} must be a multiple of the offset groups {og}")
    Ho, Wo = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if tuple(offset.shape[2:]) != (Ho, Wo) or (mask is not None and tuple(mask.shape) != (B, og * K, Ho, Wo)):
        raise RuntimeError(f"deform_conv2d: offset {tuple(offset.shape)} and mask "
                           f"{None if mask is None else tuple(mask.shape)} must cover the output's {Ho}x{Wo} positions")
    dt, dev = input.dtype, input.device
    taps_y = (arange(kh, dtype=dt, device=dev) * dh).repeat_interleave(kw).view(K, 1, 1)
    taps_x = (arange(kw, dtype=dt, device=dev) * dw).repeat(kh).view(K, 1, 1)
    rows = (arange(Ho, dtype=dt, device=dev) * sh - ph).view(1, Ho, 1)
    cols = (arange(Wo, dtype=dt, device=dev) * sw - pw).view(1, 1, Wo)
    moved = offset.view(B, og, K, 2, Ho, Wo)
    y = rows + taps_y + moved[:, :, :, 0]          # (B, og, K, Ho, Wo)
    x = cols + taps_x + moved[:, :, :, 1]
    reads = ((y > -1) & (y < H) & (x > -1) & (x < W)).to(dt)
    y0, x0 = y.detach().floor(), x.detach().floor()
    ly, lx = y - y0, x - x0
    n = K * Ho * Wo
    image = input.reshape(B, og, C // og, H * W)
    sampled = None
    for dy, dx, share in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx), (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        yi, xi = y0 + dy, x0 + dx
        inside = ((yi >= 0) & (yi <= H - 1) & (xi >= 0) & (xi <= W - 1)).to(dt)
        index = (yi.clamp(0, H - 1) * W + xi.clamp(0, W - 1)).long().view(B, og, 1, n)
        values = image.gather(3, index.expand(B, og, C // og, n))
        term = values * (share * inside * reads).view(B, og, 1, n)
        sampled = term if sampled is None else sampled + term
    if mask is not None:
        sampled = sampled * mask.view(B, og, 1, n)
    columns = sampled.reshape(B, groups, Cg * K, Ho * Wo)
    out = weight.reshape(groups, O // groups, Cg * K).matmul(columns).reshape(B, O, Ho, Wo)
    return out if bias is None else out + bias.view(1, O, 1, 1)


class DeformConv2d(nn.Module):
    """torchvision's ``DeformConv2d``: a convolution's weight and bias (initialised as ``Conv2d``'s),
    applied with ``deform_conv2d`` to the offsets (and mask) given at each call."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True):
        super().__init__()
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)
        self.weight = nn.Parameter(empty(out_channels, in_channels // groups, *self.kernel_size))
        self.bias = nn.Parameter(empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(init._calculate_fan_in_and_fan_out(self.weight)[0])
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor, offset: Tensor, mask: Tensor | None = None) -> Tensor:
        return deform_conv2d(input, offset, self.weight, self.bias, self.stride, self.padding, self.dilation, mask)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
             f"{f', padding={self.padding}' if self.padding != (0, 0) else ''}"
             f"{f', dilation={self.dilation}' if self.dilation != (1, 1) else ''}"
             f"{f', groups={self.groups}' if self.groups != 1 else ''}")
        return s + ("" if self.bias is not None else ", bias=False")
