"""Mask R-CNN (He et al. 2017): Faster R-CNN plus a branch that pools 14x14 per box, runs four 3x3
convolutions, upsamples by 2 and predicts a 28x28 mask per class."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .... import nn
from ....nn import init
from ...ops.misc import Conv2dNormActivation, rename_v1_convs
from ...ops.poolers import MultiScaleRoIAlign
from .._api import register_model
from ._utils import detection_arguments
from .backbone_utils import resnet50_fpn_backbone
from .faster_rcnn import FasterRCNN, resnet50_fpn_v2_parts

__all__ = ["MaskRCNN", "MaskRCNNHeads", "MaskRCNNPredictor", "maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2"]


class MaskRCNN(FasterRCNN):
    """Faster R-CNN with a mask branch: training also returns ``loss_mask`` (targets need ``masks``,
    (N, H, W) uint8), eval also returns ``masks`` (N, 1, H, W) probabilities in the image."""

    def __init__(self, backbone: nn.Module, num_classes: int | None = None, mask_roi_pool: nn.Module | None = None,
                 mask_head: nn.Module | None = None, mask_predictor: nn.Module | None = None,
                 **kwargs: Any) -> None:
        if not isinstance(mask_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"mask_roi_pool should be of type MultiScaleRoIAlign or None instead of "
                            f"{type(mask_roi_pool)}")
        if num_classes is not None and mask_predictor is not None:
            raise ValueError("num_classes should be None when mask_predictor is specified")
        out_channels = backbone.out_channels
        if mask_roi_pool is None:
            mask_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=14, sampling_ratio=2)
        if mask_head is None:
            mask_head = MaskRCNNHeads(out_channels, (256, 256, 256, 256), 1)
        if mask_predictor is None:
            mask_predictor = MaskRCNNPredictor(256, 256, num_classes)
        super().__init__(backbone, num_classes, **kwargs)
        self.roi_heads.mask_roi_pool = mask_roi_pool
        self.roi_heads.mask_head = mask_head
        self.roi_heads.mask_predictor = mask_predictor


class MaskRCNNHeads(nn.Sequential):
    """One 3x3 conv-ReLU (dilated by ``dilation``) per entry of ``layers`` (its width)."""

    _version = 2   # version 1 named the convs ``mask_fcn1``...: now ``0.0``...

    def __init__(self, in_channels: int, layers, dilation: int, norm_layer=None) -> None:
        widths = [in_channels, *layers]
        super().__init__(*[Conv2dNormActivation(a, b, kernel_size=3, stride=1, padding=dilation, dilation=dilation,
                                                norm_layer=norm_layer) for a, b in zip(widths, widths[1:])])
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    init.zeros_(layer.bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        rename_v1_convs(state_dict, prefix, local_metadata, {f"mask_fcn{i + 1}": f"{i}.0" for i in range(len(self))})
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class MaskRCNNPredictor(nn.Sequential):
    """A stride-2 2x2 transposed conv (``conv5_mask``), ReLU, and a 1x1 conv to a mask per class."""

    def __init__(self, in_channels: int, dim_reduced: int, num_classes: int) -> None:
        super().__init__(OrderedDict([("conv5_mask", nn.ConvTranspose2d(in_channels, dim_reduced, 2, 2, 0)),
                                      ("relu", nn.ReLU(inplace=True)),
                                      ("mask_fcn_logits", nn.Conv2d(dim_reduced, num_classes, 1, 1, 0))]))
        for name, param in self.named_parameters():
            if "weight" in name:
                init.kaiming_normal_(param, mode="fan_out", nonlinearity="relu")


@register_model()
def maskrcnn_resnet50_fpn(*, weights=None, progress: bool = True, num_classes: int | None = None,
                          weights_backbone: Any = "IMAGENET1K_V1", trainable_backbone_layers: int | None = None,
                          **kwargs: Any) -> MaskRCNN:
    """Mask R-CNN, ResNet-50-FPN (44,401,393 parameters with 91 classes and a pretrained backbone,
    whose batch norms are frozen buffers)."""
    num_classes, weights_backbone = detection_arguments(weights, num_classes, weights_backbone)
    backbone = resnet50_fpn_backbone(weights_backbone, progress, trainable_backbone_layers)
    return MaskRCNN(backbone, num_classes=num_classes, **kwargs)


@register_model()
def maskrcnn_resnet50_fpn_v2(*, weights=None, progress: bool = True, num_classes: int | None = None,
                             weights_backbone: Any = None, trainable_backbone_layers: int | None = None,
                             **kwargs: Any) -> MaskRCNN:
    """Mask R-CNN v2, ResNet-50-FPN: Faster R-CNN v2's parts and a batch-normed mask head
    (46,359,409 parameters with 91 classes)."""
    num_classes, weights_backbone = detection_arguments(weights, num_classes, weights_backbone)
    parts = resnet50_fpn_v2_parts(weights_backbone, progress, trainable_backbone_layers)
    mask_head = MaskRCNNHeads(parts["backbone"].out_channels, [256, 256, 256, 256], 1, norm_layer=nn.BatchNorm2d)
    return MaskRCNN(num_classes=num_classes, mask_head=mask_head, **parts, **kwargs)
