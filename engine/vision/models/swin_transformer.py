"""Swin Transformer (Liu et al. 2021) and Swin V2 (Liu et al. 2022): self-attention inside local
windows that shift by half a window every other block, and patch merging between stages.

Tensors stay channels-last (N, H, W, C) from the patch embedding to the head. V2 puts the norms
after attention and MLP, attends by scaled cosine similarity, and makes its position bias with a
small MLP of log-spaced relative coordinates. Module names are torchvision's, so checkpoints load.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

from ... import nn
from ...core.creation import arange, ones, zeros
from ...core.tensor import Tensor
from ...nn import functional as F
from ...nn import init
from ...ops.movement import cat, stack
from ...ops.shaping import meshgrid
from ..ops.misc import MLP, Permute
from ..ops.stochastic_depth import StochasticDepth
from ._api import register_model

__all__ = ["SwinTransformer", "PatchMerging", "PatchMergingV2", "ShiftedWindowAttention",
           "ShiftedWindowAttentionV2", "SwinTransformerBlock", "SwinTransformerBlockV2", "shifted_window_attention",
           "swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b"]


def _merge_patches(x: Tensor) -> Tensor:
    """Each 2x2 neighbourhood of (..., H, W, C) concatenated to (..., H/2, W/2, 4C); odd sizes padded."""
    h, w = x.shape[-3], x.shape[-2]
    x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
    return cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1)


class PatchMerging(nn.Module):
    """Halves the resolution and doubles the width: merge 2x2 patches, LayerNorm, project 4C -> 2C."""

    def __init__(self, dim: int, norm_layer: Callable[..., nn.Module] = nn.LayerNorm) -> None:
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.reduction(self.norm(_merge_patches(x)))


class PatchMergingV2(nn.Module):
    """V2's patch merging: the projection first, then LayerNorm over the 2C outputs."""

    def __init__(self, dim: int, norm_layer: Callable[..., nn.Module] = nn.LayerNorm) -> None:
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(2 * dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.reduction(_merge_patches(x)))


def _shift_mask(x: Tensor, pad_h: int, pad_w: int, window: list[int], shift: list[int]) -> Tensor:
    """(windows, N, N) additive mask: -100 between tokens that the cyclic shift brought from different regions."""
    region = x.new_zeros((pad_h, pad_w))
    count = 0
    for h0, h1 in ((0, -window[0]), (-window[0], -shift[0]), (-shift[0], None)):
        for w0, w1 in ((0, -window[1]), (-window[1], -shift[1]), (-shift[1], None)):
            region[h0:h1, w0:w1] = count
            count += 1
    region = region.view(pad_h // window[0], window[0], pad_w // window[1], window[1]).permute(0, 2, 1, 3)
    region = region.reshape(-1, window[0] * window[1])
    diff = region.unsqueeze(1) - region.unsqueeze(2)
    return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)


def shifted_window_attention(input: Tensor, qkv_weight: Tensor, proj_weight: Tensor, relative_position_bias: Tensor,
                             window_size: list[int], num_heads: int, shift_size: list[int],
                             attention_dropout: float = 0.0, dropout: float = 0.0, qkv_bias: Tensor | None = None,
                             proj_bias: Tensor | None = None, logit_scale: Tensor | None = None,
                             training: bool = True) -> Tensor:
    """Multi-head attention within (shifted) windows of a (B, H, W, C) tensor, padded to whole windows.

    With ``logit_scale`` (V2) the scores are cosine similarities times ``exp(min(logit_scale, log 100))``
    and the key bias is held at zero; otherwise scaled dot products.
    """
    b, h, w, c = input.shape
    pad_r = (window_size[1] - w % window_size[1]) % window_size[1]
    pad_b = (window_size[0] - h % window_size[0]) % window_size[0]
    x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b))
    pad_h, pad_w = x.shape[1], x.shape[2]
    # a window that covers the whole map needs no shift
    shift = [0 if window_size[i] >= (pad_h, pad_w)[i] else shift_size[i] for i in range(2)]
    if sum(shift) > 0:
        x = x.roll((-shift[0], -shift[1]), (1, 2))
    n_h, n_w = pad_h // window_size[0], pad_w // window_size[1]
    num_windows, tokens = n_h * n_w, window_size[0] * window_size[1]
    x = x.view(b, n_h, window_size[0], n_w, window_size[1], c).permute(0, 1, 3, 2, 4, 5)
    x = x.reshape(b * num_windows, tokens, c)
    if logit_scale is not None and qkv_bias is not None:
        length = qkv_bias.numel() // 3
        qkv_bias = cat([qkv_bias[:length], zeros(length, dtype=qkv_bias.dtype, device=qkv_bias.device),
                        qkv_bias[2 * length:]])
    qkv = F.linear(x, qkv_weight, qkv_bias).reshape(x.shape[0], tokens, 3, num_heads, c // num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    if logit_scale is not None:
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * logit_scale.clamp(max=math.log(100.0)).exp()
    else:
        attn = (q * (c // num_heads) ** -0.5) @ k.transpose(-2, -1)
    attn = attn + relative_position_bias
    if sum(shift) > 0:
        mask = _shift_mask(x, pad_h, pad_w, window_size, shift)
        attn = attn.view(b, num_windows, num_heads, tokens, tokens) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, num_heads, tokens, tokens)
    attn = F.dropout(F.softmax(attn, dim=-1), p=attention_dropout, training=training)
    x = (attn @ v).transpose(1, 2).reshape(x.shape[0], tokens, c)
    x = F.dropout(F.linear(x, proj_weight, proj_bias), p=dropout, training=training)
    x = x.view(b, n_h, n_w, window_size[0], window_size[1], c).permute(0, 1, 3, 2, 4, 5).reshape(b, pad_h, pad_w, c)
    if sum(shift) > 0:
        x = x.roll((shift[0], shift[1]), (1, 2))
    return x[:, :h, :w, :].contiguous()


def _relative_position_index(window_size: list[int]) -> Tensor:
    """(N*N,) index into the (2Wh-1)(2Ww-1) table of each pair of tokens' relative offset."""
    coords = stack(meshgrid(arange(window_size[0]), arange(window_size[1]), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)
    rel_h = (rel[:, :, 0] + (window_size[0] - 1)) * (2 * window_size[1] - 1)
    return (rel_h + rel[:, :, 1] + (window_size[1] - 1)).flatten()


class ShiftedWindowAttention(nn.Module):
    """Window attention with a learned bias per head for each relative offset (a table)."""

    def __init__(self, dim: int, window_size: list[int], shift_size: list[int], num_heads: int, qkv_bias: bool = True,
                 proj_bias: bool = True, attention_dropout: float = 0.0, dropout: float = 0.0) -> None:
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError("window_size and shift_size must be of length 2")
        self.window_size, self.shift_size, self.num_heads = window_size, shift_size, num_heads
        self.attention_dropout, self.dropout = attention_dropout, dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.define_relative_position_bias_table()
        self.register_buffer("relative_position_index", _relative_position_index(window_size))

    def define_relative_position_bias_table(self) -> None:
        size = (2 * self.window_size[0] - 1) * (2 * self.window_size[1] - 1)
        self.relative_position_bias_table = nn.Parameter(zeros(size, self.num_heads))
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def _bias_from(self, table: Tensor) -> Tensor:
        n = self.window_size[0] * self.window_size[1]
        return table[self.relative_position_index].view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)

    def get_relative_position_bias(self) -> Tensor:
        """(1, heads, N, N) bias added to the attention scores."""
        return self._bias_from(self.relative_position_bias_table)

    def forward(self, x: Tensor) -> Tensor:
        return shifted_window_attention(x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
                                        self.window_size, self.num_heads, shift_size=self.shift_size,
                                        attention_dropout=self.attention_dropout, dropout=self.dropout,
                                        qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class ShiftedWindowAttentionV2(ShiftedWindowAttention):
    """V2: cosine attention with a learned per-head temperature; the bias comes from an MLP of log-spaced
    relative coordinates (16 * sigmoid), so it transfers across window sizes."""

    def __init__(self, dim: int, window_size: list[int], shift_size: list[int], num_heads: int, qkv_bias: bool = True,
                 proj_bias: bool = True, attention_dropout: float = 0.0, dropout: float = 0.0) -> None:
        super().__init__(dim, window_size, shift_size, num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias,
                         attention_dropout=attention_dropout, dropout=dropout)
        self.logit_scale = nn.Parameter((10 * ones(num_heads, 1, 1)).log())
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))
        if qkv_bias:
            length = self.qkv.bias.numel() // 3
            self.qkv.bias.data[length:2 * length].zero_()

    def define_relative_position_bias_table(self) -> None:
        wh, ww = self.window_size
        grid = stack(meshgrid(arange(-(wh - 1), wh).float() / (wh - 1) * 8,
                              arange(-(ww - 1), ww).float() / (ww - 1) * 8, indexing="ij"))
        table = grid.permute(1, 2, 0).contiguous().unsqueeze(0)   # (1, 2Wh-1, 2Ww-1, 2)
        self.register_buffer("relative_coords_table", table.sign() * (table.abs() + 1.0).log2() / 3.0)

    def get_relative_position_bias(self) -> Tensor:
        table = self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads)
        return 16 * self._bias_from(table).sigmoid()

    def forward(self, x: Tensor) -> Tensor:
        return shifted_window_attention(x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
                                        self.window_size, self.num_heads, shift_size=self.shift_size,
                                        attention_dropout=self.attention_dropout, dropout=self.dropout,
                                        qkv_bias=self.qkv.bias, proj_bias=self.proj.bias,
                                        logit_scale=self.logit_scale, training=self.training)


class SwinTransformerBlock(nn.Module):
    """Pre-norm block: x + attention(norm1(x)), then x + MLP(norm2(x)), each branch stochastically dropped."""

    def __init__(self, dim: int, num_heads: int, window_size: list[int], shift_size: list[int],
                 mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.0, norm_layer: Callable[..., nn.Module] = nn.LayerNorm,
                 attn_layer: Callable[..., nn.Module] = ShiftedWindowAttention) -> None:
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = attn_layer(dim, window_size, shift_size, num_heads, attention_dropout=attention_dropout,
                               dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    init.normal_(m.bias, std=1e-6)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformerBlockV2(SwinTransformerBlock):
    """Res-post-norm block of V2: x + norm1(attention(x)), then x + norm2(MLP(x))."""

    def __init__(self, dim: int, num_heads: int, window_size: list[int], shift_size: list[int],
                 mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.0, norm_layer: Callable[..., nn.Module] = nn.LayerNorm,
                 attn_layer: Callable[..., nn.Module] = ShiftedWindowAttentionV2) -> None:
        super().__init__(dim, num_heads, window_size, shift_size, mlp_ratio=mlp_ratio, dropout=dropout,
                         attention_dropout=attention_dropout, stochastic_depth_prob=stochastic_depth_prob,
                         norm_layer=norm_layer, attn_layer=attn_layer)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.stochastic_depth(self.norm1(self.attn(x)))
        return x + self.stochastic_depth(self.norm2(self.mlp(x)))


class SwinTransformer(nn.Module):
    """Patch embedding, four stages of blocks with patch merging between them, LayerNorm, pooled linear head."""

    def __init__(self, patch_size: list[int], embed_dim: int, depths: list[int], num_heads: list[int],
                 window_size: list[int], mlp_ratio: float = 4.0, dropout: float = 0.0,
                 attention_dropout: float = 0.0, stochastic_depth_prob: float = 0.1, num_classes: int = 1000,
                 norm_layer: Callable[..., nn.Module] | None = None, block: Callable[..., nn.Module] | None = None,
                 downsample_layer: Callable[..., nn.Module] = PatchMerging) -> None:
        super().__init__()
        self.num_classes = num_classes
        block = block or SwinTransformerBlock
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        layers: list[nn.Module] = [nn.Sequential(
            nn.Conv2d(3, embed_dim, kernel_size=(patch_size[0], patch_size[1]), stride=(patch_size[0], patch_size[1])),
            Permute([0, 2, 3, 1]), norm_layer(embed_dim))]
        total, block_id = sum(depths), 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):   # odd blocks shift by half a window; drop probability grows linearly
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else s // 2 for s in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout, attention_dropout=attention_dropout,
                                   stochastic_depth_prob=stochastic_depth_prob * block_id / (total - 1),
                                   norm_layer=norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.permute(self.norm(self.features(x)))
        return self.head(self.flatten(self.avgpool(x)))


# (embedding width, depths, heads, default stochastic depth)
_SIZES = {"t": (96, [2, 2, 6, 2], [3, 6, 12, 24], 0.2), "s": (96, [2, 2, 18, 2], [3, 6, 12, 24], 0.3),
          "b": (128, [2, 2, 18, 2], [4, 8, 16, 32], 0.5)}


def _swin(size: str, v2: bool, kwargs: dict) -> SwinTransformer:
    embed_dim, depths, heads, sd_prob = _SIZES[size]
    extra: dict[str, Any] = {"block": SwinTransformerBlockV2, "downsample_layer": PatchMergingV2} if v2 else {}
    return SwinTransformer([4, 4], embed_dim, depths, heads, [8, 8] if v2 else [7, 7],
                           stochastic_depth_prob=kwargs.pop("stochastic_depth_prob", sd_prob), **extra, **kwargs)


@register_model()
def swin_t(*, weights=None, progress: bool = True, **kwargs: Any) -> SwinTransformer:
    """Swin-T (28,288,354 parameters)."""
    return _swin("t", False, kwargs)


@register_model()
def swin_s(*, weights=None, progress: bool = True, **kwargs: Any) -> SwinTransformer:
    """Swin-S (49,606,258 parameters)."""
    return _swin("s", False, kwargs)


@register_model()
def swin_b(*, weights=None, progress: bool = True, **kwargs: Any) -> SwinTransformer:
    """Swin-B (87,768,224 parameters)."""
    return _swin("b", False, kwargs)


@register_model()
def swin_v2_t(*, weights=None, progress: bool = True, **kwargs: Any) -> SwinTransformer:
    """Swin-V2-T (28,351,570 parameters)."""
    return _swin("t", True, kwargs)


@register_model()
def swin_v2_s(*, weights=None, progress: bool = True, **kwargs: Any) -> SwinTransformer:
    """Swin-V2-S (49,737,442 parameters)."""
    return _swin("s", True, kwargs)


@register_model()
def swin_v2_b(*, weights=None, progress: bool = True, **kwargs: Any) -> SwinTransformer:
    """Swin-V2-B (87,930,848 parameters)."""
    return _swin("b", True, kwargs)
