"""Helpers the segmentation and detection builders share: taking a classifier's intermediate
feature maps by child name (``IntermediateLayerGetter``) and where a MobileNet's stages end."""
from __future__ import annotations

from collections import OrderedDict

from ... import nn

__all__ = ["IntermediateLayerGetter", "stage_indices"]


class IntermediateLayerGetter(nn.ModuleDict):
    """The children of ``model`` up to the last one named in ``return_layers``; ``forward`` runs them
    in order and returns the outputs of those named, under their new names.

    It keeps the children (not the model), so the state_dict keys are the model's own
    (``backbone.layer4.0.conv1.weight``) and the unused head (``fc``) is dropped. Only direct
    children can be returned, and the model's forward must be the children applied in order.
    """

    def __init__(self, model: nn.Module, return_layers: dict[str, str]) -> None:
        children = dict(model.named_children())
        if not set(return_layers).issubset(children):
            raise ValueError("return_layers are not present in model")
        wanted = dict(return_layers)
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        for name, module in children.items():
            layers[name] = module
            wanted.pop(name, None)
            if not wanted:
                break
        super().__init__(layers)
        self.return_layers = dict(return_layers)

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out


def stage_indices(features: nn.Sequential) -> list[int]:
    """The indices of a MobileNet's ``features`` that end a stage: the stem, each block before a
    stride-2 block, and the last layer (torchvision's ``_is_cn`` marks the strided blocks)."""
    return [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] + [len(features) - 1]
