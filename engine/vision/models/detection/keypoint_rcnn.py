"""Keypoint R-CNN (He et al. 2017, Mask R-CNN's keypoint head): Faster R-CNN plus a branch that pools
14x14 per box, runs eight 3x3 convolutions and predicts a 56x56 heatmap per keypoint."""
from __future__ import annotations

from typing import Any

from .... import nn
from ....nn import functional as F
from ....nn import init
from ...ops.poolers import MultiScaleRoIAlign
from .._api import register_model
from ._utils import detection_arguments
from .backbone_utils import resnet50_fpn_backbone
from .faster_rcnn import FasterRCNN

__all__ = ["KeypointRCNN", "KeypointRCNNHeads", "KeypointRCNNPredictor", "keypointrcnn_resnet50_fpn"]


class KeypointRCNN(FasterRCNN):
    """Faster R-CNN with a keypoint branch: training also returns ``loss_keypoint`` (targets need
    ``keypoints``, (N, K, 3) float with visibility), eval also returns ``keypoints`` (N, K, 3) and
    ``keypoints_scores``. Training draws the short side from 640..800 by default."""

    def __init__(self, backbone: nn.Module, num_classes: int | None = None, min_size=None, max_size: int = 1333,
                 keypoint_roi_pool: MultiScaleRoIAlign | None = None, keypoint_head: nn.Module | None = None,
                 keypoint_predictor: nn.Module | None = None, num_keypoints: int | None = None,
                 **kwargs: Any) -> None:
        if not isinstance(keypoint_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"keypoint_roi_pool should be of type MultiScaleRoIAlign or None instead of "
                            f"{type(keypoint_roi_pool)}")
        if num_keypoints is not None and keypoint_predictor is not None:
            raise ValueError("num_keypoints should be None when keypoint_predictor is specified")
        if keypoint_roi_pool is None:
            keypoint_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=14, sampling_ratio=2)
        if keypoint_head is None:
            keypoint_head = KeypointRCNNHeads(backbone.out_channels, tuple(512 for _ in range(8)))
        if keypoint_predictor is None:
            keypoint_predictor = KeypointRCNNPredictor(512, 17 if num_keypoints is None else num_keypoints)
        super().__init__(backbone, num_classes, (640, 672, 704, 736, 768, 800) if min_size is None else min_size,
                         max_size, **kwargs)
        self.roi_heads.keypoint_roi_pool = keypoint_roi_pool
        self.roi_heads.keypoint_head = keypoint_head
        self.roi_heads.keypoint_predictor = keypoint_predictor


class KeypointRCNNHeads(nn.Sequential):
    """One 3x3 conv and ReLU per entry of ``layers`` (its width)."""

    def __init__(self, in_channels: int, layers) -> None:
        widths = [in_channels, *layers]
        blocks: list[nn.Module] = []
        for a, b in zip(widths, widths[1:]):
            blocks += [nn.Conv2d(a, b, 3, stride=1, padding=1), nn.ReLU(inplace=True)]
        super().__init__(*blocks)
        for layer in self.children():
            if isinstance(layer, nn.Conv2d):
                init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                init.constant_(layer.bias, 0)


class KeypointRCNNPredictor(nn.Module):
    """A stride-2 4x4 transposed conv to one map per keypoint, then bilinear upsampling by 2."""

    def __init__(self, in_channels: int, num_keypoints: int) -> None:
        super().__init__()
        self.kps_score_lowres = nn.ConvTranspose2d(in_channels, num_keypoints, 4, stride=2, padding=1)
        init.kaiming_normal_(self.kps_score_lowres.weight, mode="fan_out", nonlinearity="relu")
        init.constant_(self.kps_score_lowres.bias, 0)
        self.up_scale = 2
        self.out_channels = num_keypoints

    def forward(self, x):
        x = self.kps_score_lowres(x)
        return F.interpolate(x, scale_factor=float(self.up_scale), mode="bilinear", align_corners=False,
                             recompute_scale_factor=False)


@register_model()
def keypointrcnn_resnet50_fpn(*, weights=None, progress: bool = True, num_classes: int | None = None,
                              num_keypoints: int | None = None, weights_backbone: Any = "IMAGENET1K_V1",
                              trainable_backbone_layers: int | None = None, **kwargs: Any) -> KeypointRCNN:
    """Keypoint R-CNN, ResNet-50-FPN (59,137,258 parameters with 2 classes, 17 keypoints and a pretrained
    backbone, whose batch norms are frozen buffers)."""
    if num_classes is None:
        num_classes = 2    # person and background
    num_classes, weights_backbone = detection_arguments(weights, num_classes, weights_backbone)
    backbone = resnet50_fpn_backbone(weights_backbone, progress, trainable_backbone_layers)
    return KeypointRCNN(backbone, num_classes, num_keypoints=17 if num_keypoints is None else num_keypoints, **kwargs)
