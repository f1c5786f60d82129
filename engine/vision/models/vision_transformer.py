"""ViT-B/16 (Dosovitskiy et al. 2020): a Transformer encoder over 16x16 patches and a class token.

``vit_b_16(image_size=32)`` builds the same model for small images (only ``pos_embedding`` changes
shape), as torchvision's builder allows.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from typing import Any, Callable, NamedTuple

from ... import nn
from ...core.creation import zeros
from ...nn import init
from ...ops.movement import cat
from ..ops.misc import MLP, Conv2dNormActivation
from ._api import register_model

__all__ = ["VisionTransformer", "ConvStemConfig", "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"]


class ConvStemConfig(NamedTuple):
    """One conv-norm-activation layer of a convolutional stem (Xiao et al. 2021) that replaces the
    patchifying conv when ``VisionTransformer(conv_stem_configs=[...])`` is given."""
    out_channels: int
    kernel_size: int
    stride: int
    norm_layer: Callable[..., nn.Module] = nn.BatchNorm2d
    activation_layer: Callable[..., nn.Module] = nn.ReLU


def _conv_stem(configs: list, hidden_dim: int) -> nn.Sequential:
    """``conv_bn_relu_{i}`` per config, then a 1x1 ``conv_last`` to ``hidden_dim`` (torchvision's names,
    so state dicts load)."""
    stem, channels = nn.Sequential(), 3
    for i, c in enumerate(configs):
        stem.add_module(f"conv_bn_relu_{i}", Conv2dNormActivation(channels, c.out_channels, kernel_size=c.kernel_size,
                                                                  stride=c.stride, norm_layer=c.norm_layer,
                                                                  activation_layer=c.activation_layer))
        channels = c.out_channels
    stem.add_module("conv_last", nn.Conv2d(channels, hidden_dim, kernel_size=1))
    return stem


class MLPBlock(MLP):
    def __init__(self, in_dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                init.xavier_uniform_(m.weight)
                init.normal_(m.bias, std=1e-6)


class EncoderBlock(nn.Module):
    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int, dropout: float, attention_dropout: float,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6)) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=attention_dropout,
                                                    batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input):
        if input.dim() != 3:
            raise ValueError(f"EncoderBlock: expected (batch_size, seq_length, hidden_dim), got {tuple(input.shape)}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq_length: int, num_layers: int, num_heads: int, hidden_dim: int, mlp_dim: int,
                 dropout: float, attention_dropout: float, norm_layer=partial(nn.LayerNorm, eps=1e-6)) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(zeros(1, seq_length, hidden_dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(OrderedDict(
            (f"encoder_layer_{i}", EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                                                norm_layer)) for i in range(num_layers)))
        self.ln = norm_layer(hidden_dim)

    def forward(self, input):
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


class VisionTransformer(nn.Module):
    def __init__(self, image_size: int, patch_size: int, num_layers: int, num_heads: int, hidden_dim: int,
                 mlp_dim: int, dropout: float = 0.0, attention_dropout: float = 0.0, num_classes: int = 1000,
                 representation_size: int | None = None, norm_layer=partial(nn.LayerNorm, eps=1e-6),
                 conv_stem_configs: list[ConvStemConfig] | None = None) -> None:
        super().__init__()
        if image_size % patch_size:   # torchvision's torch._assert: an AssertionError
            raise AssertionError("Input shape indivisible by patch size!")
        self.image_size, self.patch_size = image_size, patch_size
        self.hidden_dim, self.mlp_dim = hidden_dim, mlp_dim
        self.attention_dropout, self.dropout = attention_dropout, dropout
        self.num_classes, self.representation_size = num_classes, representation_size
        self.norm_layer = norm_layer
        if conv_stem_configs is not None:
            self.conv_proj = _conv_stem(conv_stem_configs, hidden_dim)
        else:
            self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1
        self.class_token = nn.Parameter(zeros(1, 1, hidden_dim))
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                               norm_layer)
        self.seq_length = seq_length
        heads: OrderedDict[str, nn.Module] = OrderedDict()
        if representation_size is None:
            heads["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads["act"] = nn.Tanh()
            heads["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads)
        if conv_stem_configs is None:
            fan_in = self.conv_proj.in_channels * patch_size * patch_size
            init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
            init.zeros_(self.conv_proj.bias)
        else:   # the stem's last 1x1 conv: He-style normal over its outputs
            last = self.conv_proj.conv_last
            init.normal_(last.weight, mean=0.0, std=math.sqrt(2.0 / last.out_channels))
            init.zeros_(last.bias)
        if representation_size is not None:
            init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / self.heads.pre_logits.in_features))
            init.zeros_(self.heads.pre_logits.bias)
        init.zeros_(self.heads.head.weight)
        init.zeros_(self.heads.head.bias)

    def _process_input(self, x):
        n, _, h, w = x.shape
        p = self.patch_size
        if h != self.image_size:   # torchvision's torch._assert messages
            raise AssertionError(f"Wrong image height! Expected {self.image_size} but got {h}!")
        if w != self.image_size:
            raise AssertionError(f"Wrong image width! Expected {self.image_size} but got {w}!")
        x = self.conv_proj(x).reshape(n, self.hidden_dim, (h // p) * (w // p))
        return x.permute(0, 2, 1)

    def forward(self, x):
        x = self._process_input(x)
        x = cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])


@register_model()
def vit_b_16(*, weights=None, progress: bool = True, **kwargs: Any) -> VisionTransformer:
    """ViT-B/16 (86,567,656 parameters at 224x224); ``image_size=`` builds it for other sizes."""
    image_size = kwargs.pop("image_size", 224)
    return VisionTransformer(image_size, 16, 12, 12, 768, 3072, **kwargs)


@register_model()
def vit_b_32(*, weights=None, progress: bool = True, **kwargs: Any) -> VisionTransformer:
    """ViT-B/32 (88,224,232 parameters at 224x224)."""
    return VisionTransformer(kwargs.pop("image_size", 224), 32, 12, 12, 768, 3072, **kwargs)


@register_model()
def vit_l_16(*, weights=None, progress: bool = True, **kwargs: Any) -> VisionTransformer:
    """ViT-L/16 (304,326,632 parameters at 224x224)."""
    return VisionTransformer(kwargs.pop("image_size", 224), 16, 24, 16, 1024, 4096, **kwargs)


@register_model()
def vit_l_32(*, weights=None, progress: bool = True, **kwargs: Any) -> VisionTransformer:
    """ViT-L/32 (306,535,400 parameters at 224x224)."""
    return VisionTransformer(kwargs.pop("image_size", 224), 32, 24, 16, 1024, 4096, **kwargs)


@register_model()
def vit_h_14(*, weights=None, progress: bool = True, **kwargs: Any) -> VisionTransformer:
    """ViT-H/14 (632,045,800 parameters at 224x224); its only weights are SWAG's, at 518x518."""
    return VisionTransformer(kwargs.pop("image_size", 224), 14, 32, 16, 1280, 5120, **kwargs)
