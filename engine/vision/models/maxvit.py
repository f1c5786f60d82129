"""MaxViT (Tu et al. 2022): stages of MBConv followed by two attentions over 7x7 token groups,
one within local windows and one over a dilated grid spanning the whole map.

Each attention works on (B, groups, tokens, C): ``WindowPartition`` cuts the (B, C, H, W) map into
P x P windows; the grid attention swaps the groups and tokens axes of the same partition, so a
group is every (H/P)-th pixel. The input size is fixed at construction: each stage's map must
divide into whole windows. Module names are torchvision's, so checkpoints load.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

from ... import nn
from ...core.creation import arange, empty
from ...core.tensor import Tensor
from ...nn import functional as F
from ...nn import init
from ...ops.movement import stack
from ...ops.shaping import meshgrid
from ..ops.misc import Conv2dNormActivation, SqueezeExcitation
from ..ops.stochastic_depth import StochasticDepth
from ._api import register_model

__all__ = ["MaxVit", "MBConv", "RelativePositionalMultiHeadAttention", "PartitionAttentionLayer", "MaxVitLayer",
           "MaxVitBlock", "maxvit_t"]


def _conv_output_shape(size: tuple[int, int], kernel: int, stride: int, padding: int) -> tuple[int, int]:
    return ((size[0] - kernel + 2 * padding) // stride + 1, (size[1] - kernel + 2 * padding) // stride + 1)


def _block_input_shapes(input_size: tuple[int, int], n_blocks: int) -> list[tuple[int, int]]:
    """The map size each stage works at: the stem and every stage halve it (3x3, stride 2, padding 1)."""
    shapes, size = [], _conv_output_shape(input_size, 3, 2, 1)
    for _ in range(n_blocks):
        size = _conv_output_shape(size, 3, 2, 1)
        shapes.append(size)
    return shapes


class MBConv(nn.Module):
    """Pre-norm inverted bottleneck with squeeze-excitation; a pooled 1x1 projection on the shortcut
    when the stride or width changes."""

    def __init__(self, in_channels: int, out_channels: int, expansion_ratio: float, squeeze_ratio: float,
                 stride: int, activation_layer: Callable[..., nn.Module], norm_layer: Callable[..., nn.Module],
                 p_stochastic_dropout: float = 0.0) -> None:
        super().__init__()
        if stride != 1 or in_channels != out_channels:
            proj: list[nn.Module] = [nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, bias=True)]
            if stride == 2:
                proj = [nn.AvgPool2d(kernel_size=3, stride=stride, padding=1)] + proj
            self.proj: nn.Module = nn.Sequential(*proj)
        else:
            self.proj = nn.Identity()
        mid, squeeze = int(out_channels * expansion_ratio), int(out_channels * squeeze_ratio)
        self.stochastic_depth: nn.Module = (StochasticDepth(p_stochastic_dropout, mode="row")
                                            if p_stochastic_dropout else nn.Identity())
        self.layers = nn.Sequential(OrderedDict([
            ("pre_norm", norm_layer(in_channels)),
            ("conv_a", Conv2dNormActivation(in_channels, mid, kernel_size=1, stride=1, padding=0,
                                            activation_layer=activation_layer, norm_layer=norm_layer, inplace=None)),
            ("conv_b", Conv2dNormActivation(mid, mid, kernel_size=3, stride=stride, padding=1,
                                            activation_layer=activation_layer, norm_layer=norm_layer, groups=mid,
                                            inplace=None)),
            ("squeeze_excitation", SqueezeExcitation(mid, squeeze, activation=nn.SiLU)),
            ("conv_c", nn.Conv2d(mid, out_channels, kernel_size=1, bias=True)),
        ]))

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x) + self.stochastic_depth(self.layers(x))


def _relative_position_index(height: int, width: int) -> Tensor:
    """(N, N) index into the (2H-1)(2W-1) bias table of each pair of tokens' relative offset."""
    coords = stack(meshgrid(arange(height), arange(width), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)
    return (rel[:, :, 0] + (height - 1)) * (2 * width - 1) + rel[:, :, 1] + (width - 1)


class RelativePositionalMultiHeadAttention(nn.Module):
    """Multi-head attention over (B, G, P, D) groups of P tokens with a learned bias per relative offset.
    Keys are scaled by feat_dim ** -0.5 (the whole width, as torchvision), not the head width."""

    def __init__(self, feat_dim: int, head_dim: int, max_seq_len: int) -> None:
        super().__init__()
        if feat_dim % head_dim != 0:
            raise ValueError(f"feat_dim: {feat_dim} must be divisible by head_dim: {head_dim}")
        self.n_heads, self.head_dim = feat_dim // head_dim, head_dim
        self.size, self.max_seq_len = int(math.sqrt(max_seq_len)), max_seq_len
        self.to_qkv = nn.Linear(feat_dim, self.n_heads * self.head_dim * 3)
        self.scale_factor = feat_dim ** -0.5
        self.merge = nn.Linear(self.head_dim * self.n_heads, feat_dim)
        self.relative_position_bias_table = nn.Parameter(empty((2 * self.size - 1) ** 2, self.n_heads))
        self.register_buffer("relative_position_index", _relative_position_index(self.size, self.size))
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def get_relative_positional_bias(self) -> Tensor:
        """(1, heads, P, P) bias added to the attention scores."""
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
        return bias.view(self.max_seq_len, self.max_seq_len, -1).permute(2, 0, 1).contiguous().unsqueeze(0)

    def forward(self, x: Tensor) -> Tensor:
        b, g, p, d = x.shape
        q, k, v = (t.reshape(b, g, p, self.n_heads, self.head_dim).permute(0, 1, 3, 2, 4)
                   for t in self.to_qkv(x).chunk(3, dim=-1))
        attn = F.softmax(q @ (k * self.scale_factor).transpose(-2, -1) + self.get_relative_positional_bias(), dim=-1)
        return self.merge((attn @ v).permute(0, 1, 3, 2, 4).reshape(b, g, p, d))


class SwapAxes(nn.Module):
    def __init__(self, a: int, b: int) -> None:
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x: Tensor) -> Tensor:
        return x.transpose(self.a, self.b)


class WindowPartition(nn.Module):
    """(B, C, H, W) -> (B, H/P * W/P windows, P*P tokens, C)."""

    def forward(self, x: Tensor, p: int) -> Tensor:
        b, c, h, w = x.shape
        x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(b, (h // p) * (w // p), p * p, c)


class WindowDepartition(nn.Module):
    """The inverse of ``WindowPartition``, given the number of windows along each side."""

    def forward(self, x: Tensor, p: int, h_partitions: int, w_partitions: int) -> Tensor:
        b, _, _, c = x.shape
        x = x.reshape(b, h_partitions, w_partitions, p, p, c).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(b, c, h_partitions * p, w_partitions * p)


class PartitionAttentionLayer(nn.Module):
    """Pre-norm attention and MLP over windows (``"window"``) or over the dilated grid (``"grid"``)."""

    def __init__(self, in_channels: int, head_dim: int, partition_size: int, partition_type: str,
                 grid_size: tuple[int, int], mlp_ratio: int, activation_layer: Callable[..., nn.Module],
                 norm_layer: Callable[..., nn.Module], attention_dropout: float, mlp_dropout: float,
                 p_stochastic_dropout: float) -> None:
        super().__init__()
        if partition_type not in ("grid", "window"):
            raise ValueError("partition_type must be either 'grid' or 'window'")
        self.n_heads, self.head_dim = in_channels // head_dim, head_dim
        self.n_partitions = grid_size[0] // partition_size
        self.partition_type, self.grid_size = partition_type, grid_size
        # a grid partition is a window partition with P = the number of windows, groups and tokens swapped
        self.p, self.g = ((partition_size, self.n_partitions) if partition_type == "window"
                          else (self.n_partitions, partition_size))
        self.partition_op = WindowPartition()
        self.departition_op = WindowDepartition()
        self.partition_swap: nn.Module = SwapAxes(-2, -3) if partition_type == "grid" else nn.Identity()
        self.departition_swap: nn.Module = SwapAxes(-2, -3) if partition_type == "grid" else nn.Identity()
        attention = RelativePositionalMultiHeadAttention(in_channels, head_dim, partition_size ** 2)
        self.attn_layer = nn.Sequential(norm_layer(in_channels), attention, nn.Dropout(attention_dropout))
        self.mlp_layer = nn.Sequential(nn.LayerNorm(in_channels), nn.Linear(in_channels, in_channels * mlp_ratio),
                                       activation_layer(), nn.Linear(in_channels * mlp_ratio, in_channels),
                                       nn.Dropout(mlp_dropout))
        self.stochastic_dropout = StochasticDepth(p_stochastic_dropout, mode="row")

    def forward(self, x: Tensor) -> Tensor:
        gh, gw = self.grid_size[0] // self.p, self.grid_size[1] // self.p
        if self.grid_size[0] % self.p or self.grid_size[1] % self.p:
            raise ValueError(f"Grid size must be divisible by partition size. Got grid size of {self.grid_size} "
                             f"and partition size of {self.p}")
        x = self.partition_swap(self.partition_op(x, self.p))
        x = x + self.stochastic_dropout(self.attn_layer(x))
        x = x + self.stochastic_dropout(self.mlp_layer(x))
        return self.departition_op(self.departition_swap(x), self.p, gh, gw)


class MaxVitLayer(nn.Module):
    """MBConv, then window attention, then grid attention."""

    def __init__(self, in_channels: int, out_channels: int, squeeze_ratio: float, expansion_ratio: float, stride: int,
                 norm_layer: Callable[..., nn.Module], activation_layer: Callable[..., nn.Module], head_dim: int,
                 mlp_ratio: int, mlp_dropout: float, attention_dropout: float, p_stochastic_dropout: float,
                 partition_size: int, grid_size: tuple[int, int]) -> None:
        super().__init__()
        attention = partial(PartitionAttentionLayer, out_channels, head_dim, partition_size, grid_size=grid_size,
                            mlp_ratio=mlp_ratio, activation_layer=activation_layer, norm_layer=nn.LayerNorm,
                            attention_dropout=attention_dropout, mlp_dropout=mlp_dropout,
                            p_stochastic_dropout=p_stochastic_dropout)
        self.layers = nn.Sequential(OrderedDict([
            ("MBconv", MBConv(in_channels, out_channels, expansion_ratio, squeeze_ratio, stride, activation_layer,
                              norm_layer, p_stochastic_dropout)),
            ("window_attention", attention(partition_type="window")),
            ("grid_attention", attention(partition_type="grid")),
        ]))

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)


class MaxVitBlock(nn.Module):
    """One stage: ``n_layers`` MaxViT layers, the first halving the map."""

    def __init__(self, in_channels: int, out_channels: int, squeeze_ratio: float, expansion_ratio: float,
                 norm_layer: Callable[..., nn.Module], activation_layer: Callable[..., nn.Module], head_dim: int,
                 mlp_ratio: int, mlp_dropout: float, attention_dropout: float, partition_size: int,
                 input_grid_size: tuple[int, int], n_layers: int, p_stochastic: list[float]) -> None:
        super().__init__()
        if len(p_stochastic) != n_layers:
            raise ValueError(f"p_stochastic must have length n_layers={n_layers}, got p_stochastic={p_stochastic}.")
        self.grid_size = _conv_output_shape(input_grid_size, kernel=3, stride=2, padding=1)
        self.layers = nn.ModuleList([
            MaxVitLayer(in_channels if idx == 0 else out_channels, out_channels, squeeze_ratio, expansion_ratio,
                        2 if idx == 0 else 1, norm_layer, activation_layer, head_dim, mlp_ratio, mlp_dropout,
                        attention_dropout, p, partition_size, self.grid_size)
            for idx, p in enumerate(p_stochastic)])

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class MaxVit(nn.Module):
    """Convolutional stem, MaxViT stages, then pooled LayerNorm, a tanh pre-logits layer and the classifier."""

    def __init__(self, input_size: tuple[int, int], stem_channels: int, partition_size: int,
                 block_channels: list[int], block_layers: list[int], head_dim: int, stochastic_depth_prob: float,
                 norm_layer: Callable[..., nn.Module] | None = None,
                 activation_layer: Callable[..., nn.Module] = nn.GELU, squeeze_ratio: float = 0.25,
                 expansion_ratio: float = 4, mlp_ratio: int = 4, mlp_dropout: float = 0.0,
                 attention_dropout: float = 0.0, num_classes: int = 1000) -> None:
        super().__init__()
        norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=1e-3, momentum=0.01)
        sizes = _block_input_shapes(input_size, len(block_channels))
        for idx, size in enumerate(sizes):
            if size[0] % partition_size != 0 or size[1] % partition_size != 0:
                raise ValueError(
                    f"Input size {size} of block {idx} is not divisible by partition size {partition_size}. "
                    f"Consider changing the partition size or the input size.\n"
                    f"Current configuration yields the following block input sizes: {sizes}.")
        self.stem = nn.Sequential(
            Conv2dNormActivation(3, stem_channels, 3, stride=2, norm_layer=norm_layer,
                                 activation_layer=activation_layer, bias=False, inplace=None),
            Conv2dNormActivation(stem_channels, stem_channels, 3, stride=1, norm_layer=None, activation_layer=None,
                                 bias=True))
        grid = _conv_output_shape(input_size, 3, 2, 1)
        self.partition_size = partition_size
        total = sum(block_layers)   # drop probability grows linearly from 0 to its maximum over all layers
        p_all = [stochastic_depth_prob * i / (total - 1) if total > 1 else 0.0 for i in range(total)]
        self.blocks = nn.ModuleList()
        start = 0
        for in_ch, out_ch, n in zip([stem_channels] + block_channels[:-1], block_channels, block_layers):
            self.blocks.append(MaxVitBlock(in_ch, out_ch, squeeze_ratio, expansion_ratio, norm_layer,
                                           activation_layer, head_dim, mlp_ratio, mlp_dropout, attention_dropout,
                                           partition_size, grid, n, p_all[start:start + n]))
            grid, start = self.blocks[-1].grid_size, start + n
        self.classifier = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(block_channels[-1]),
                                        nn.Linear(block_channels[-1], block_channels[-1]), nn.Tanh(),
                                        nn.Linear(block_channels[-1], num_classes, bias=False))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                init.constant_(m.weight, 1)
                init.constant_(m.bias, 0)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.classifier(x)


@register_model()
def maxvit_t(*, weights=None, progress: bool = True, **kwargs: Any) -> MaxVit:
    """MaxViT-T (30,919,624 parameters) for 224x224 inputs (``input_size=`` for others)."""
    input_size = kwargs.pop("input_size", (224, 224))
    return MaxVit(input_size=input_size, stem_channels=64, block_channels=[64, 128, 256, 512],
                  block_layers=[2, 2, 5, 2], head_dim=32, stochastic_depth_prob=kwargs.pop("stochastic_depth_prob", 0.2),
                  partition_size=7, **kwargs)
