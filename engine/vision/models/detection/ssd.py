"""SSD (Liu et al. 2016): class scores and box deltas predicted directly on default boxes over several
feature maps; training matches boxes by IoU (each ground truth also takes its best box) and keeps
three negatives per positive, the hardest (hard negative mining). ssd300_vgg16 is the paper's model."""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

from .... import nn
from ....base.dtype import int64
from ....core.creation import full, ones, zeros
from ....core.tensor import Tensor
from ....nn import functional as F
from ....ops.movement import cat, stack
from ...ops import boxes as box_ops
from .._api import register_model
from ..vgg import vgg16
from . import _utils as det_utils
from .anchor_utils import DefaultBoxGenerator
from .backbone_utils import _validate_trainable_layers
from .generalized_rcnn import prepare
from .retinanet import flatten_levels
from .transform import GeneralizedRCNNTransform

__all__ = ["SSD", "SSDHead", "SSDClassificationHead", "SSDRegressionHead", "SSDScoringHead",
           "SSDFeatureExtractorVGG", "ssd300_vgg16"]


class SSDScoringHead(nn.Module):
    """One module per feature map; outputs (N, anchors, ``num_columns``) over all maps."""

    def __init__(self, module_list: nn.ModuleList, num_columns: int) -> None:
        super().__init__()
        self.module_list = module_list
        self.num_columns = num_columns

    def forward(self, x: list[Tensor]) -> Tensor:
        return flatten_levels([module(f) for module, f in zip(self.module_list, x)], self.num_columns)


class SSDClassificationHead(SSDScoringHead):
    """A 3x3 conv per map to ``num_classes`` logits per default box."""

    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int) -> None:
        convs = nn.ModuleList([nn.Conv2d(c, num_classes * a, kernel_size=3, padding=1)
                               for c, a in zip(in_channels, num_anchors)])
        _xavier_init(convs)
        super().__init__(convs, num_classes)


class SSDRegressionHead(SSDScoringHead):
    """A 3x3 conv per map to 4 box deltas per default box."""

    def __init__(self, in_channels: list[int], num_anchors: list[int]) -> None:
        convs = nn.ModuleList([nn.Conv2d(c, 4 * a, kernel_size=3, padding=1) for c, a in zip(in_channels, num_anchors)])
        _xavier_init(convs)
        super().__init__(convs, 4)


def _xavier_init(conv: nn.Module) -> None:
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0.0)


class SSDHead(nn.Module):
    """The classification and regression heads; ``forward`` returns ``bbox_regression`` and ``cls_logits``."""

    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int) -> None:
        super().__init__()
        self.classification_head = SSDClassificationHead(in_channels, num_anchors, num_classes)
        self.regression_head = SSDRegressionHead(in_channels, num_anchors)

    def forward(self, x: list[Tensor]) -> dict[str, Tensor]:
        return {"bbox_regression": self.regression_head(x), "cls_logits": self.classification_head(x)}


class SSD(nn.Module):
    """SSD on ``backbone`` (returning a map or an ordered dict of maps) at the fixed input ``size``.
    Training returns ``bbox_regression`` and ``classification`` losses; eval per image ``boxes``,
    ``scores``, ``labels``."""

    def __init__(self, backbone: nn.Module, anchor_generator: DefaultBoxGenerator, size: tuple[int, int],
                 num_classes: int, image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 head: nn.Module | None = None, score_thresh: float = 0.01, nms_thresh: float = 0.45,
                 detections_per_img: int = 200, iou_thresh: float = 0.5, topk_candidates: int = 400,
                 positive_fraction: float = 0.25, **kwargs: Any) -> None:
        super().__init__()
        self.backbone = backbone
        self.anchor_generator = anchor_generator
        self.box_coder = det_utils.BoxCoder(weights=(10.0, 10.0, 5.0, 5.0))
        if head is None:
            out_channels = (backbone.out_channels if hasattr(backbone, "out_channels")
                            else det_utils.retrieve_out_channels(backbone, size))
            num_anchors = anchor_generator.num_anchors_per_location()
            if len(out_channels) != len(num_anchors):
                raise ValueError(f"The length of the output channels from the backbone ({len(out_channels)}) do not "
                                 f"match the length of the anchor generator aspect ratios ({len(num_anchors)})")
            head = SSDHead(out_channels, num_anchors, num_classes)
        self.head = head
        self.proposal_matcher = det_utils.SSDMatcher(iou_thresh)
        self.transform = GeneralizedRCNNTransform(min(size), max(size), image_mean or [0.485, 0.456, 0.406],
                                                  image_std or [0.229, 0.224, 0.225], size_divisible=1,
                                                  fixed_size=size, **kwargs)
        self.score_thresh, self.nms_thresh = score_thresh, nms_thresh
        self.detections_per_img, self.topk_candidates = detections_per_img, topk_candidates
        self.neg_to_pos_ratio = (1.0 - positive_fraction) / positive_fraction

    def compute_loss(self, targets: list[dict], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     matched_idxs: list[Tensor]) -> dict[str, Tensor]:
        """Smooth L1 on the matched boxes; cross-entropy on the positives and the hardest negatives
        (``neg_to_pos_ratio`` per positive, per image); both divided by the number of positives."""
        num_foreground, bbox_loss, cls_targets = 0, [], []
        for target, deltas, logits, anchors_i, matched in zip(targets, head_outputs["bbox_regression"],
                                                               head_outputs["cls_logits"], anchors, matched_idxs):
            fg = (matched >= 0).nonzero().reshape(-1)
            fg_matched = matched[fg]
            num_foreground += int(fg_matched.numel())
            wanted = self.box_coder.encode_single(target["boxes"][fg_matched], anchors_i[fg])
            bbox_loss.append(F.smooth_l1_loss(deltas[fg], wanted, reduction="sum"))
            classes = zeros((logits.shape[0],), dtype=target["labels"].dtype, device=logits.device)
            classes[fg] = target["labels"][fg_matched]
            cls_targets.append(classes)
        bbox_loss, cls_targets = stack(bbox_loss), stack(cls_targets)
        logits = head_outputs["cls_logits"]
        cls_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), cls_targets.reshape(-1),
                                   reduction="none").reshape(cls_targets.shape)
        foreground = cls_targets > 0
        num_negative = self.neg_to_pos_ratio * foreground.sum(1, keepdim=True)
        negative_loss = cls_loss.detach().clone()
        negative_loss[foreground] = -float("inf")
        _, order = negative_loss.sort(1, descending=True)
        background = order.sort(1)[1] < num_negative    # each box's rank among the negatives
        n = max(1, num_foreground)
        return {"bbox_regression": bbox_loss.sum() / n,
                "classification": (cls_loss[foreground].sum() + cls_loss[background].sum()) / n}

    def postprocess_detections(self, head_outputs: dict[str, Tensor], image_anchors: list[Tensor],
                               image_shapes: list[tuple[int, int]]) -> list[dict[str, Tensor]]:
        """Per image and foreground class: scores above ``score_thresh``, the top ``topk_candidates``;
        then per-class NMS, at most ``detections_per_img``."""
        scores_all = F.softmax(head_outputs["cls_logits"], dim=-1)
        num_classes = scores_all.shape[-1]
        detections = []
        for deltas, scores, anchors, shape in zip(head_outputs["bbox_regression"], scores_all, image_anchors,
                                                  image_shapes):
            boxes = box_ops.clip_boxes_to_image(self.box_coder.decode_single(deltas, anchors), shape)
            out_boxes, out_scores, out_labels = [], [], []
            for label in range(1, num_classes):
                score = scores[:, label]
                keep = (score > self.score_thresh).nonzero().reshape(-1)
                score, order = score[keep].topk(min(self.topk_candidates, int(keep.numel())))
                out_boxes.append(boxes[keep][order])
                out_scores.append(score)
                out_labels.append(full(tuple(score.shape), label, dtype=int64, device=score.device))
            b, s, lab = cat(out_boxes, dim=0), cat(out_scores, dim=0), cat(out_labels, dim=0)
            keep = box_ops.batched_nms(b, s, lab, self.nms_thresh)[: self.detections_per_img]
            detections.append({"boxes": b[keep], "scores": s[keep], "labels": lab[keep]})
        return detections

    def forward(self, images: list[Tensor], targets: list[dict] | None = None):
        images, targets, features, sizes = prepare(self, images, targets)
        features = list(features.values())
        head_outputs = self.head(features)
        anchors = self.anchor_generator(images, features)
        if self.training:
            matched_idxs = det_utils.match_anchors(self.proposal_matcher, targets, anchors)
            return self.compute_loss(targets, head_outputs, anchors, matched_idxs)
        detections = self.postprocess_detections(head_outputs, anchors, images.image_sizes)
        return self.transform.postprocess(detections, images.image_sizes, sizes)


def _relu_convs(*specs: tuple) -> nn.Sequential:
    """Each (in, out, kwargs) as a conv and a ReLU."""
    layers: list[nn.Module] = []
    for c_in, c_out, kw in specs:
        layers += [nn.Conv2d(c_in, c_out, **kw), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class SSDFeatureExtractorVGG(nn.Module):
    """VGG16 up to conv4_3 (L2-normalised, rescaled by a learned per-channel ``scale_weight``), then
    conv5 with the dilated fc6/fc7 convs, then four (five with ``highres``) extra blocks."""

    def __init__(self, backbone: nn.Sequential, highres: bool) -> None:
        super().__init__()
        _, _, pool3, pool4, _ = (i for i, layer in enumerate(backbone) if isinstance(layer, nn.MaxPool2d))
        backbone[pool3].ceil_mode = True    # the paper's 38x38 conv4_3 at 300 px
        self.scale_weight = nn.Parameter(ones(512) * 20)
        self.features = nn.Sequential(*backbone[:pool4])
        k1, k3 = {"kernel_size": 1}, {"kernel_size": 3}
        extra = nn.ModuleList([
            _relu_convs((1024, 256, k1), (256, 512, {"kernel_size": 3, "padding": 1, "stride": 2})),
            _relu_convs((512, 128, k1), (128, 256, {"kernel_size": 3, "padding": 1, "stride": 2})),
            _relu_convs((256, 128, k1), (128, 256, k3)),
            _relu_convs((256, 128, k1), (128, 256, k3))])
        if highres:
            extra.append(_relu_convs((256, 128, k1), (128, 256, {"kernel_size": 4})))
        _xavier_init(extra)
        fc = nn.Sequential(nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=False),
                           *_relu_convs((512, 1024, {"kernel_size": 3, "padding": 6, "dilation": 6}),
                                        (1024, 1024, k1)))
        _xavier_init(fc)
        extra.insert(0, nn.Sequential(*backbone[pool4:-1], fc))   # conv5, without pool5
        self.extra = extra

    def forward(self, x):
        x = self.features(x)
        output = [self.scale_weight.reshape(1, -1, 1, 1) * F.normalize(x)]
        for block in self.extra:
            x = block(x)
            output.append(x)
        return OrderedDict((str(i), v) for i, v in enumerate(output))


def _vgg_extractor(backbone, highres: bool, trainable_layers: int) -> SSDFeatureExtractorVGG:
    features = backbone.features
    stages = [0] + [i for i, b in enumerate(features) if isinstance(b, nn.MaxPool2d)][:-1]
    if not 0 <= trainable_layers <= len(stages):
        raise ValueError(f"trainable_layers should be in the range [0, {len(stages)}]. Instead got {trainable_layers}")
    freeze_before = len(features) if trainable_layers == 0 else stages[len(stages) - trainable_layers]
    for block in features[:freeze_before]:
        for parameter in block.parameters():
            parameter.requires_grad_(False)
    return SSDFeatureExtractorVGG(features, highres)


@register_model()
def ssd300_vgg16(*, weights=None, progress: bool = True, num_classes: int | None = None,
                 weights_backbone: Any = "IMAGENET1K_FEATURES", trainable_backbone_layers: int | None = None,
                 **kwargs: Any) -> SSD:
    """SSD300 on VGG16 (35,641,826 parameters with 91 classes); inputs are scaled back to 0-255."""
    if "size" in kwargs:
        warnings.warn("The size of the model is already fixed; ignoring the parameter.")
        kwargs.pop("size")
    num_classes, weights_backbone = det_utils.detection_arguments(weights, num_classes, weights_backbone)
    trainable = _validate_trainable_layers(weights_backbone is not None, trainable_backbone_layers, 5, 4)
    backbone = _vgg_extractor(vgg16(weights=weights_backbone, progress=progress), False, trainable)
    anchors = DefaultBoxGenerator([[2], [2, 3], [2, 3], [2, 3], [2], [2]],
                                  scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05], steps=[8, 16, 32, 64, 100, 300])
    kwargs = {"image_mean": [0.48235, 0.45882, 0.40784], "image_std": [1.0 / 255.0, 1.0 / 255.0, 1.0 / 255.0],
              **kwargs}
    return SSD(backbone, anchors, (300, 300), num_classes, **kwargs)
