"""Feature Pyramid Network (Lin et al. 2017): lateral 1x1 convolutions and a top-down path of
nearest-neighbour upsampling, then a 3x3 convolution per level; extra blocks add coarser levels."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ... import nn
from ...core.tensor import Tensor
from ...nn import functional as F
from ...nn import init
from .misc import Conv2dNormActivation, rename_v1_convs

__all__ = ["FeaturePyramidNetwork", "ExtraFPNBlock", "LastLevelMaxPool", "LastLevelP6P7"]


class ExtraFPNBlock(nn.Module):
    """Base of the blocks that extend the FPN's outputs: ``forward(results, x, names)`` returns the
    extended results and names (``x`` are the FPN's inputs)."""

    def forward(self, results: list[Tensor], x: list[Tensor], names: list[str]) -> tuple[list[Tensor], list[str]]:
        raise NotImplementedError


class LastLevelMaxPool(ExtraFPNBlock):
    """A ``pool`` level: the last output subsampled by 2 (a 1x1 max pool with stride 2)."""

    def forward(self, x: list[Tensor], y: list[Tensor], names: list[str]) -> tuple[list[Tensor], list[str]]:
        names.append("pool")
        x.append(F.max_pool2d(x[-1], kernel_size=1, stride=2, padding=0))
        return x, names


class LastLevelP6P7(ExtraFPNBlock):
    """RetinaNet's P6 and P7: two stride-2 3x3 convolutions on P5 (or on C5 when widths differ)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.p6 = nn.Conv2d(in_channels, out_channels, 3, 2, 1)
        self.p7 = nn.Conv2d(out_channels, out_channels, 3, 2, 1)
        for module in (self.p6, self.p7):
            init.kaiming_uniform_(module.weight, a=1)
            init.constant_(module.bias, 0)
        self.use_P5 = in_channels == out_channels

    def forward(self, p: list[Tensor], c: list[Tensor], names: list[str]) -> tuple[list[Tensor], list[str]]:
        p6 = self.p6(p[-1] if self.use_P5 else c[-1])
        p7 = self.p7(F.relu(p6))
        p.extend([p6, p7])
        names.extend(["p6", "p7"])
        return p, names


class FeaturePyramidNetwork(nn.Module):
    """Maps an ordered dict of feature maps (finest first) to one of ``out_channels`` maps, same keys."""

    _version = 2   # version 1 held plain convolutions: ``inner_blocks.0.weight`` is now ``inner_blocks.0.0.weight``

    def __init__(self, in_channels_list: list[int], out_channels: int, extra_blocks: ExtraFPNBlock | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.inner_blocks = nn.ModuleList()
        self.layer_blocks = nn.ModuleList()
        for in_channels in in_channels_list:
            if in_channels == 0:
                raise ValueError("in_channels=0 is currently not supported")
            self.inner_blocks.append(Conv2dNormActivation(in_channels, out_channels, kernel_size=1, padding=0,
                                                          norm_layer=norm_layer, activation_layer=None))
            self.layer_blocks.append(Conv2dNormActivation(out_channels, out_channels, kernel_size=3,
                                                          norm_layer=norm_layer, activation_layer=None))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                init.kaiming_uniform_(m.weight, a=1)
                if m.bias is not None:
                    init.constant_(m.bias, 0)
        if extra_blocks is not None and not isinstance(extra_blocks, ExtraFPNBlock):
            raise TypeError(f"extra_blocks should be of type ExtraFPNBlock not {type(extra_blocks)}")
        self.extra_blocks = extra_blocks

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        rename_v1_convs(state_dict, prefix, local_metadata, {f"{block}.{i}": f"{block}.{i}.0"
                                                             for block in ("inner_blocks", "layer_blocks")
                                                             for i in range(len(self.inner_blocks))})
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x: dict[str, Tensor]) -> dict[str, Tensor]:
        names, feats = list(x.keys()), list(x.values())
        last_inner = self.inner_blocks[-1](feats[-1])
        results = [self.layer_blocks[-1](last_inner)]
        for idx in range(len(feats) - 2, -1, -1):
            lateral = self.inner_blocks[idx](feats[idx])
            last_inner = lateral + F.interpolate(last_inner, size=tuple(lateral.shape[-2:]), mode="nearest")
            results.insert(0, self.layer_blocks[idx](last_inner))
        if self.extra_blocks is not None:
            results, names = self.extra_blocks(results, feats, names)
        return OrderedDict(zip(names, results))
