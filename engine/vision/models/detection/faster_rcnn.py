"""Faster R-CNN (Ren et al. 2015) on a feature pyramid: RPN proposals, RoIAlign from the level each
box's size selects, two fully connected layers, a class score and class-specific box deltas."""
from __future__ import annotations

from typing import Any

from .... import nn
from ....nn import functional as F
from ....nn import init
from ...ops.misc import Conv2dNormActivation, FrozenBatchNorm2d
from ...ops.poolers import MultiScaleRoIAlign
from .._api import register_model
from ..mobilenetv3 import mobilenet_v3_large
from ..resnet import resnet50
from ._utils import detection_arguments
from .anchor_utils import AnchorGenerator
from .backbone_utils import _mobilenet_extractor, _resnet_fpn_extractor, _validate_trainable_layers, resnet50_fpn_backbone
from .generalized_rcnn import GeneralizedRCNN
from .roi_heads import RoIHeads
from .rpn import RegionProposalNetwork, RPNHead
from .transform import GeneralizedRCNNTransform

__all__ = ["FasterRCNN", "TwoMLPHead", "FastRCNNConvFCHead", "FastRCNNPredictor", "fasterrcnn_resnet50_fpn",
           "fasterrcnn_resnet50_fpn_v2", "fasterrcnn_mobilenet_v3_large_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn"]

IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _default_anchorgen() -> AnchorGenerator:
    sizes = ((32,), (64,), (128,), (256,), (512,))
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))


class TwoMLPHead(nn.Module):
    """Flatten, then two ReLU fully connected layers (``fc6``, ``fc7``)."""

    def __init__(self, in_channels: int, representation_size: int) -> None:
        super().__init__()
        self.fc6 = nn.Linear(in_channels, representation_size)
        self.fc7 = nn.Linear(representation_size, representation_size)

    def forward(self, x):
        return F.relu(self.fc7(F.relu(self.fc6(x.flatten(start_dim=1)))))


class FastRCNNConvFCHead(nn.Sequential):
    """v2's box head: 3x3 conv-norm-ReLUs on the pooled (C, H, W) features, flatten, ReLU linears."""

    def __init__(self, input_size: tuple[int, int, int], conv_layers: list[int], fc_layers: list[int],
                 norm_layer=None) -> None:
        channels, height, width = input_size
        blocks: list[nn.Module] = []
        for out in conv_layers:
            blocks.append(Conv2dNormActivation(channels, out, norm_layer=norm_layer))
            channels = out
        blocks.append(nn.Flatten())
        features = channels * height * width
        for out in fc_layers:
            blocks += [nn.Linear(features, out), nn.ReLU(inplace=True)]
            features = out
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    init.zeros_(layer.bias)


class FastRCNNPredictor(nn.Module):
    """Class scores (``cls_score``) and per-class box deltas (``bbox_pred``); replace it to finetune on
    ``num_classes`` classes (background included)."""

    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__()
        self.cls_score = nn.Linear(in_channels, num_classes)
        self.bbox_pred = nn.Linear(in_channels, num_classes * 4)

    def forward(self, x):
        if x.dim() == 4 and list(x.shape[2:]) != [1, 1]:
            raise ValueError(f"x has the wrong shape, expecting the last two dimensions to be [1,1] instead of "
                             f"{list(x.shape[2:])}")
        x = x.flatten(start_dim=1)
        return self.cls_score(x), self.bbox_pred(x)


class FasterRCNN(GeneralizedRCNN):
    """Faster R-CNN on ``backbone`` (a module with ``out_channels`` returning a feature map or an
    ordered dict of them). Give ``num_classes`` (background included) or your own ``box_predictor``.
    See GeneralizedRCNN for the inputs and outputs."""

    def __init__(self, backbone: nn.Module, num_classes: int | None = None, min_size=800, max_size: int = 1333,
                 image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 rpn_anchor_generator: AnchorGenerator | None = None, rpn_head: nn.Module | None = None,
                 rpn_pre_nms_top_n_train: int = 2000, rpn_pre_nms_top_n_test: int = 1000,
                 rpn_post_nms_top_n_train: int = 2000, rpn_post_nms_top_n_test: int = 1000,
                 rpn_nms_thresh: float = 0.7, rpn_fg_iou_thresh: float = 0.7, rpn_bg_iou_thresh: float = 0.3,
                 rpn_batch_size_per_image: int = 256, rpn_positive_fraction: float = 0.5,
                 rpn_score_thresh: float = 0.0, box_roi_pool: MultiScaleRoIAlign | None = None,
                 box_head: nn.Module | None = None, box_predictor: nn.Module | None = None,
                 box_score_thresh: float = 0.05, box_nms_thresh: float = 0.5, box_detections_per_img: int = 100,
                 box_fg_iou_thresh: float = 0.5, box_bg_iou_thresh: float = 0.5,
                 box_batch_size_per_image: int = 512, box_positive_fraction: float = 0.25,
                 bbox_reg_weights: tuple[float, float, float, float] | None = None, **kwargs: Any) -> None:
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the number of output "
                             "channels (assumed to be the same for all the levels)")
        if not isinstance(rpn_anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"rpn_anchor_generator should be of type AnchorGenerator or None instead of "
                            f"{type(rpn_anchor_generator)}")
        if not isinstance(box_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"box_roi_pool should be of type MultiScaleRoIAlign or None instead of {type(box_roi_pool)}")
        if num_classes is not None and box_predictor is not None:
            raise ValueError("num_classes should be None when box_predictor is specified")
        if num_classes is None and box_predictor is None:
            raise ValueError("num_classes should not be None when box_predictor is not specified")
        out_channels = backbone.out_channels
        if rpn_anchor_generator is None:
            rpn_anchor_generator = _default_anchorgen()
        if rpn_head is None:
            rpn_head = RPNHead(out_channels, rpn_anchor_generator.num_anchors_per_location()[0])
        rpn = RegionProposalNetwork(
            rpn_anchor_generator, rpn_head, rpn_fg_iou_thresh, rpn_bg_iou_thresh, rpn_batch_size_per_image,
            rpn_positive_fraction, {"training": rpn_pre_nms_top_n_train, "testing": rpn_pre_nms_top_n_test},
            {"training": rpn_post_nms_top_n_train, "testing": rpn_post_nms_top_n_test}, rpn_nms_thresh,
            score_thresh=rpn_score_thresh)
        if box_roi_pool is None:
            box_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=7, sampling_ratio=2)
        if box_head is None:
            box_head = TwoMLPHead(out_channels * box_roi_pool.output_size[0] ** 2, 1024)
        if box_predictor is None:
            box_predictor = FastRCNNPredictor(1024, num_classes)
        roi_heads = RoIHeads(box_roi_pool, box_head, box_predictor, box_fg_iou_thresh, box_bg_iou_thresh,
                             box_batch_size_per_image, box_positive_fraction, bbox_reg_weights, box_score_thresh,
                             box_nms_thresh, box_detections_per_img)
        transform = GeneralizedRCNNTransform(min_size, max_size, image_mean or IMAGENET_MEAN,
                                             image_std or IMAGENET_STD, **kwargs)
        super().__init__(backbone, rpn, roi_heads, transform)


@register_model()
def fasterrcnn_resnet50_fpn(*, weights=None, progress: bool = True, num_classes: int | None = None,
                            weights_backbone: Any = "IMAGENET1K_V1", trainable_backbone_layers: int | None = None,
                            **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN, ResNet-50-FPN (41,755,286 parameters with 91 classes and a pretrained backbone,
    whose batch norms are frozen buffers)."""
    num_classes, weights_backbone = detection_arguments(weights, num_classes, weights_backbone)
    backbone = resnet50_fpn_backbone(weights_backbone, progress, trainable_backbone_layers)
    return FasterRCNN(backbone, num_classes=num_classes, **kwargs)


def resnet50_fpn_v2_parts(weights_backbone: Any, progress: bool, trainable_backbone_layers: int | None) -> dict:
    """v2's backbone (trainable batch norm everywhere), two-conv RPN head and conv-FC box head."""
    trainable = _validate_trainable_layers(weights_backbone is not None, trainable_backbone_layers, 5, 3)
    backbone = _resnet_fpn_extractor(resnet50(weights=weights_backbone, progress=progress), trainable,
                                     norm_layer=nn.BatchNorm2d)
    anchors = _default_anchorgen()
    return {"backbone": backbone, "rpn_anchor_generator": anchors,
            "rpn_head": RPNHead(backbone.out_channels, anchors.num_anchors_per_location()[0], conv_depth=2),
            "box_head": FastRCNNConvFCHead((backbone.out_channels, 7, 7), [256, 256, 256, 256], [1024],
                                           norm_layer=nn.BatchNorm2d)}


@register_model()
def fasterrcnn_resnet50_fpn_v2(*, weights=None, progress: bool = True, num_classes: int | None = None,
                               weights_backbone: Any = None, trainable_backbone_layers: int | None = None,
                               **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN v2, ResNet-50-FPN (Benchmarking Detection Transfer Learning with Vision Transformers;
    43,712,278 parameters with 91 classes)."""
    num_classes, weights_backbone = detection_arguments(weights, num_classes, weights_backbone)
    return FasterRCNN(num_classes=num_classes, **resnet50_fpn_v2_parts(weights_backbone, progress,
                                                                      trainable_backbone_layers), **kwargs)


def _fasterrcnn_mobilenet_v3_large_fpn(weights: Any, progress: bool, num_classes: int | None,
                                       weights_backbone: Any, trainable_backbone_layers: int | None,
                                       **kwargs: Any) -> FasterRCNN:
    num_classes, weights_backbone = detection_arguments(weights, num_classes, weights_backbone)
    is_trained = weights_backbone is not None
    trainable = _validate_trainable_layers(is_trained, trainable_backbone_layers, 6, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    backbone = _mobilenet_extractor(backbone, True, trainable)
    sizes = ((32, 64, 128, 256, 512),) * 3
    anchors = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))
    return FasterRCNN(backbone, num_classes, rpn_anchor_generator=anchors, **kwargs)


@register_model()
def fasterrcnn_mobilenet_v3_large_fpn(*, weights=None, progress: bool = True, num_classes: int | None = None,
                                      weights_backbone: Any = "IMAGENET1K_V1",
                                      trainable_backbone_layers: int | None = None, **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN, MobileNetV3-Large-FPN, high resolution (19,386,354 parameters with 91 classes and a
    pretrained backbone)."""
    kwargs = {"rpn_score_thresh": 0.05, **kwargs}
    return _fasterrcnn_mobilenet_v3_large_fpn(weights, progress, num_classes, weights_backbone,
                                              trainable_backbone_layers, **kwargs)


@register_model()
def fasterrcnn_mobilenet_v3_large_320_fpn(*, weights=None, progress: bool = True, num_classes: int | None = None,
                                          weights_backbone: Any = "IMAGENET1K_V1",
                                          trainable_backbone_layers: int | None = None, **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN, MobileNetV3-Large-FPN at 320 px for mobile use (19,386,354 parameters)."""
    kwargs = {"min_size": 320, "max_size": 640, "rpn_pre_nms_top_n_test": 150, "rpn_post_nms_top_n_test": 150,
              "rpn_score_thresh": 0.05, **kwargs}
    return _fasterrcnn_mobilenet_v3_large_fpn(weights, progress, num_classes, weights_backbone,
                                              trainable_backbone_layers, **kwargs)
