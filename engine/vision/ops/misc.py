"""Building blocks torchvision's models share: conv-norm-activation stacks, MLPs, frozen batch norm,
squeeze-and-excitation, permutation layers.

They subclass ``nn.Sequential`` so their children are numbered as torchvision numbers them,
which is what makes state_dict keys (``features.0.1.weight``) identical.
"""
from __future__ import annotations

from collections.abc import Callable

from ... import nn
from ...core.creation import ones, zeros

__all__ = ["ConvNormActivation", "Conv2dNormActivation", "Conv3dNormActivation", "MLP", "FrozenBatchNorm2d",
           "SqueezeExcitation", "Permute"]


class ConvNormActivation(nn.Sequential):
    """``conv_layer``, then an optional norm layer, then an optional activation (children 0, 1, 2)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size=3, stride=1, padding=None,
                 groups: int = 1, norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm2d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU, dilation=1,
                 inplace: bool | None = True, bias: bool | None = None,
                 conv_layer: Callable[..., nn.Module] = nn.Conv2d) -> None:
        if padding is None:   # "same" padding for odd kernels, per dimension when either is a tuple
            if isinstance(kernel_size, int) and isinstance(dilation, int):
                padding = (kernel_size - 1) // 2 * dilation
            else:
                n = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else len(dilation)
                ks = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * n
                ds = dilation if isinstance(dilation, (tuple, list)) else (dilation,) * n
                padding = tuple((k - 1) // 2 * d for k, d in zip(ks, ds))
        if bias is None:
            bias = norm_layer is None
        layers = [conv_layer(in_channels, out_channels, kernel_size, stride, padding, dilation=dilation,
                             groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer() if inplace is None else activation_layer(inplace=inplace))
        super().__init__(*layers)
        self.out_channels = out_channels


def rename_v1_convs(state_dict: dict, prefix: str, local_metadata: dict, moves: dict[str, str]) -> None:
    """A checkpoint saved by version 1 of a module, before its plain convs became ``Conv2dNormActivation``
    blocks, names a conv's ``weight``/``bias`` by the old path: move them under the new one, for each
    ``old -> new`` in ``moves`` (FPN, the RPN head, RetinaNet's towers, the Mask R-CNN head)."""
    if (local_metadata.get("version") or 1) >= 2:
        return
    for old, new in moves.items():
        for kind in ("weight", "bias"):
            key = f"{prefix}{old}.{kind}"
            if key in state_dict:
                state_dict[f"{prefix}{new}.{kind}"] = state_dict.pop(key)


class Conv2dNormActivation(ConvNormActivation):
    """Conv2d, then an optional norm layer, then an optional activation (children 0, 1, 2)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size=3, stride=1, padding=None,
                 groups: int = 1, norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm2d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU, dilation=1,
                 inplace: bool | None = True, bias: bool | None = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, groups, norm_layer,
                         activation_layer, dilation, inplace, bias, nn.Conv2d)


class Conv3dNormActivation(ConvNormActivation):
    """Conv3d, then an optional norm layer (BatchNorm3d), then an optional activation."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size=3, stride=1, padding=None,
                 groups: int = 1, norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm3d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU, dilation=1,
                 inplace: bool | None = True, bias: bool | None = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, groups, norm_layer,
                         activation_layer, dilation, inplace, bias, nn.Conv3d)


class MLP(nn.Sequential):
    """Linear layers with an activation and dropout after each hidden one, and dropout at the end."""

    def __init__(self, in_channels: int, hidden_channels: list[int],
                 norm_layer: Callable[..., nn.Module] | None = None,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU, inplace: bool | None = None,
                 bias: bool = True, dropout: float = 0.0) -> None:
        params = {} if inplace is None else {"inplace": inplace}
        layers: list[nn.Module] = []
        in_dim = in_channels
        for hidden_dim in hidden_channels[:-1]:
            layers.append(nn.Linear(in_dim, hidden_dim, bias=bias))
            if norm_layer is not None:
                layers.append(norm_layer(hidden_dim))
            layers.append(activation_layer(**params))
            layers.append(nn.Dropout(dropout, **params))
            in_dim = hidden_dim
        layers.append(nn.Linear(in_dim, hidden_channels[-1], bias=bias))
        layers.append(nn.Dropout(dropout, **params))
        super().__init__(*layers)


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with its statistics and affine parameters fixed as buffers (detection backbones)."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", ones(num_features))
        self.register_buffer("bias", zeros(num_features))
        self.register_buffer("running_mean", zeros(num_features))
        self.register_buffer("running_var", ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        state_dict.pop(prefix + "num_batches_tracked", None)   # a BatchNorm2d checkpoint loads as is
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    def forward(self, x):
        scale = self.weight.reshape(1, -1, 1, 1) * (self.running_var.reshape(1, -1, 1, 1) + self.eps).rsqrt()
        return x * scale + (self.bias.reshape(1, -1, 1, 1) - self.running_mean.reshape(1, -1, 1, 1) * scale)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.weight.shape[0]}, eps={self.eps})"


class SqueezeExcitation(nn.Module):
    """Channel attention: global average, two 1x1 convolutions, a gate that scales the input."""

    def __init__(self, input_channels: int, squeeze_channels: int,
                 activation: Callable[..., nn.Module] = nn.ReLU,
                 scale_activation: Callable[..., nn.Module] = nn.Sigmoid) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation, self.scale_activation = activation(), scale_activation()

    def _scale(self, input):
        return self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(input)))))

    def forward(self, input):
        return self._scale(input) * input


class Permute(nn.Module):
    """``input.permute(dims)`` as a layer."""

    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return x.permute(self.dims)
