"""RetinaNet (Lin et al. 2017): one stage, dense. Per pyramid level a 4-conv classification tower
(sigmoid per class, focal loss) and a 4-conv box tower (L1 on the deltas) over 9 anchors per cell;
eval keeps each level's top-k scoring (anchor, class) pairs, then NMS per class."""
from __future__ import annotations

import math
from functools import partial
from typing import Any

from .... import nn
from ....core.tensor import Tensor
from ....nn import init
from ....ops.movement import cat
from ...ops import boxes as box_ops
from ...ops.feature_pyramid_network import LastLevelP6P7
from ...ops.losses import sigmoid_focal_loss
from ...ops.misc import Conv2dNormActivation, rename_v1_convs
from .._api import register_model
from ..resnet import resnet50
from . import _utils as det_utils
from .anchor_utils import AnchorGenerator
from .backbone_utils import _resnet_fpn_extractor, _validate_trainable_layers, resnet50_fpn_backbone
from .faster_rcnn import IMAGENET_MEAN, IMAGENET_STD
from .generalized_rcnn import prepare
from .transform import GeneralizedRCNNTransform

__all__ = ["RetinaNet", "RetinaNetHead", "RetinaNetClassificationHead", "RetinaNetRegressionHead",
           "retinanet_resnet50_fpn", "retinanet_resnet50_fpn_v2"]


def _tower(in_channels: int, norm_layer, draw: bool = True) -> nn.Sequential:
    """Four 3x3 conv(-norm)-ReLUs, weights drawn from N(0, 0.01), biases zero (``draw=False``: drawn
    later by ``_draw_tower``, where the head's own draws come first, as the regression head's)."""
    tower = nn.Sequential(*[Conv2dNormActivation(in_channels, in_channels, norm_layer=norm_layer) for _ in range(4)])
    return _draw_tower(tower) if draw else tower


def _draw_tower(tower: nn.Sequential) -> nn.Sequential:
    for layer in tower.modules():
        if isinstance(layer, nn.Conv2d):
            init.normal_(layer.weight, std=0.01)
            if layer.bias is not None:
                init.constant_(layer.bias, 0)
    return tower


def flatten_levels(outputs: list[Tensor], k: int) -> Tensor:
    """(N, A*k, H, W) per level -> (N, sum of H*W*A, k), location-major as the anchors."""
    flat = []
    for out in outputs:
        n, _, h, w = out.shape
        flat.append(out.reshape(n, -1, k, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, k))
    return cat(flat, dim=1)


class _TowerHead(nn.Module):
    """A head over a conv tower: version-1 checkpoints (plain convs in the tower) load renamed."""

    _version = 2

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        rename_v1_convs(state_dict, prefix, local_metadata, {f"conv.{i}": f"conv.{i}.0" for i in range(4)})
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class RetinaNetClassificationHead(_TowerHead):
    """Class logits per anchor; the last conv's bias starts at the prior ``prior_probability``."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, prior_probability: float = 0.01,
                 norm_layer=None) -> None:
        super().__init__()
        self.conv = _tower(in_channels, norm_layer)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3, stride=1, padding=1)
        init.normal_(self.cls_logits.weight, std=0.01)
        init.constant_(self.cls_logits.bias, -math.log((1 - prior_probability) / prior_probability))
        self.num_classes, self.num_anchors = num_classes, num_anchors
        self.BETWEEN_THRESHOLDS = det_utils.Matcher.BETWEEN_THRESHOLDS

    def compute_loss(self, targets: list[dict], head_outputs: dict[str, Tensor], matched_idxs: list[Tensor]) -> Tensor:
        """Focal loss over the anchors not between thresholds, per image divided by its foreground count."""
        losses = []
        for target, logits, matched in zip(targets, head_outputs["cls_logits"], matched_idxs):
            foreground = matched >= 0
            gt = logits.new_zeros(logits.shape)
            fg_idx = foreground.nonzero().reshape(-1)
            gt[fg_idx, target["labels"][matched[fg_idx]]] = 1.0
            valid = (matched != self.BETWEEN_THRESHOLDS).nonzero().reshape(-1)
            num_foreground = int(fg_idx.numel())
            losses.append(sigmoid_focal_loss(logits[valid], gt[valid], reduction="sum") / max(1, num_foreground))
        return sum(losses) / len(targets)

    def forward(self, x: list[Tensor]) -> Tensor:
        return flatten_levels([self.cls_logits(self.conv(f)) for f in x], self.num_classes)


class RetinaNetRegressionHead(_TowerHead):
    """Box deltas per anchor (unit weights), trained on the foreground anchors with ``_loss_type``
    (L1 on the deltas; v2 uses GIoU on the decoded boxes)."""

    def __init__(self, in_channels: int, num_anchors: int, norm_layer=None) -> None:
        super().__init__()
        # torchvision's order of the seeded draws: the box conv's, then the tower's N(0, 0.01)
        self.conv = _tower(in_channels, norm_layer, draw=False)
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1, padding=1)
        init.normal_(self.bbox_reg.weight, std=0.01)
        init.zeros_(self.bbox_reg.bias)
        _draw_tower(self.conv)
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self._loss_type = "l1"

    def compute_loss(self, targets: list[dict], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     matched_idxs: list[Tensor]) -> Tensor:
        losses = []
        for target, deltas, anchors_i, matched in zip(targets, head_outputs["bbox_regression"], anchors, matched_idxs):
            fg = (matched >= 0).nonzero().reshape(-1)
            loss = det_utils.box_loss(self._loss_type, self.box_coder, anchors_i[fg], target["boxes"][matched[fg]],
                                      deltas[fg])
            losses.append(loss / max(1, int(fg.numel())))
        return sum(losses) / max(1, len(targets))

    def forward(self, x: list[Tensor]) -> Tensor:
        return flatten_levels([self.bbox_reg(self.conv(f)) for f in x], 4)


class RetinaNetHead(nn.Module):
    """The classification and regression towers; ``forward`` returns ``cls_logits`` and ``bbox_regression``."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, norm_layer=None) -> None:
        super().__init__()
        self.classification_head = RetinaNetClassificationHead(in_channels, num_anchors, num_classes,
                                                               norm_layer=norm_layer)
        self.regression_head = RetinaNetRegressionHead(in_channels, num_anchors, norm_layer=norm_layer)

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs) -> dict[str, Tensor]:
        return {"classification": self.classification_head.compute_loss(targets, head_outputs, matched_idxs),
                "bbox_regression": self.regression_head.compute_loss(targets, head_outputs, anchors, matched_idxs)}

    def forward(self, x: list[Tensor]) -> dict[str, Tensor]:
        return {"cls_logits": self.classification_head(x), "bbox_regression": self.regression_head(x)}


def _default_anchorgen() -> AnchorGenerator:
    """Three octave scales (2^0, 2^(1/3), 2^(2/3)) times three ratios per level."""
    sizes = tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3))) for x in (32, 64, 128, 256, 512))
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))


class DenseDetector(nn.Module):
    """What RetinaNet and FCOS share: transform, backbone (its maps as a list), a head giving per-anchor
    outputs (N, anchors, k), anchors; training returns ``self.losses(...)``, eval splits the outputs
    by level for ``postprocess_detections`` and maps the detections back to the input sizes."""

    def _setup(self, backbone: nn.Module, anchor_generator: AnchorGenerator | None, default_anchors,
               min_size, max_size: int, image_mean: list[float] | None, image_std: list[float] | None,
               score_thresh: float, nms_thresh: float, detections_per_img: int, topk_candidates: int,
               **kwargs: Any) -> None:
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the number of output "
                             "channels (assumed to be the same for all the levels)")
        if not isinstance(anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"anchor_generator should be of type AnchorGenerator or None instead of "
                            f"{type(anchor_generator)}")
        self.backbone = backbone
        self.anchor_generator = anchor_generator if anchor_generator is not None else default_anchors()
        self.transform = GeneralizedRCNNTransform(min_size, max_size, image_mean or IMAGENET_MEAN,
                                                  image_std or IMAGENET_STD, **kwargs)
        self.score_thresh, self.nms_thresh = score_thresh, nms_thresh
        self.detections_per_img, self.topk_candidates = detections_per_img, topk_candidates

    def losses(self, targets: list[dict], head_outputs: dict[str, Tensor], anchors: list[Tensor],
               num_anchors_per_level: list[int]) -> dict[str, Tensor]:
        raise NotImplementedError

    def postprocess_detections(self, head_outputs: dict[str, list[Tensor]], anchors: list[list[Tensor]],
                               image_sizes: list[tuple[int, int]]) -> list[dict[str, Tensor]]:
        """Per image and level: the flat (anchor, class) scores (``_level_scores``) above ``score_thresh``,
        the top ``topk_candidates``, their boxes decoded (``_decode``) and clipped; then per-class NMS over
        the levels, at most ``detections_per_img``."""
        detections = []
        for index, (anchors_i, shape) in enumerate(zip(anchors, image_sizes)):
            boxes_all, scores_all, labels_all = [], [], []
            for level, level_anchors in enumerate(anchors_i):
                num_classes = head_outputs["cls_logits"][level].shape[-1]
                scores, anchor_idx, labels = self._top_candidates(self._level_scores(head_outputs, index, level),
                                                                  num_classes)
                deltas = head_outputs["bbox_regression"][level][index]
                boxes = self._decode(deltas[anchor_idx], level_anchors[anchor_idx])
                boxes_all.append(box_ops.clip_boxes_to_image(boxes, shape))
                scores_all.append(scores)
                labels_all.append(labels)
            detections.append(self._nms(boxes_all, scores_all, labels_all))
        return detections

    def _level_scores(self, head_outputs: dict[str, list[Tensor]], index: int, level: int) -> Tensor:
        raise NotImplementedError

    def _decode(self, deltas: Tensor, anchors: Tensor) -> Tensor:
        raise NotImplementedError

    def _top_candidates(self, scores: Tensor, num_classes: int) -> tuple[Tensor, Tensor, Tensor]:
        """A level's flat (anchor, class) scores above ``score_thresh``, the best ``topk_candidates``:
        (scores, anchor indices, labels)."""
        candidates = (scores > self.score_thresh).nonzero().reshape(-1)
        scores, order = scores[candidates].topk(min(self.topk_candidates, int(candidates.numel())))
        candidates = candidates[order]
        return scores, candidates // num_classes, candidates % num_classes

    def _nms(self, boxes: list[Tensor], scores: list[Tensor], labels: list[Tensor]) -> dict[str, Tensor]:
        boxes, scores, labels = cat(boxes, dim=0), cat(scores, dim=0), cat(labels, dim=0)
        keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)[: self.detections_per_img]
        return {"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep]}

    def forward(self, images: list[Tensor], targets: list[dict] | None = None):
        images, targets, features, sizes = prepare(self, images, targets)
        features = list(features.values())
        head_outputs = self.head(features)
        anchors = self.anchor_generator(images, features)
        cells = [int(f.shape[2] * f.shape[3]) for f in features]
        per_cell = head_outputs["cls_logits"].shape[1] // sum(cells)
        counts = [c * per_cell for c in cells]
        if self.training:
            return self.losses(targets, head_outputs, anchors, counts)
        split_outputs = {k: list(v.split(counts, dim=1)) for k, v in head_outputs.items()}
        split_anchors = [list(a.split(counts)) for a in anchors]
        detections = self.postprocess_detections(split_outputs, split_anchors, images.image_sizes)
        return self.transform.postprocess(detections, images.image_sizes, sizes)


class RetinaNet(DenseDetector):
    """RetinaNet on ``backbone`` (with ``out_channels``). Training returns ``classification`` and
    ``bbox_regression`` losses; eval per image ``boxes``, ``scores``, ``labels``."""

    def __init__(self, backbone: nn.Module, num_classes: int, min_size=800, max_size: int = 1333,
                 image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 anchor_generator: AnchorGenerator | None = None, head: nn.Module | None = None,
                 proposal_matcher: det_utils.Matcher | None = None, score_thresh: float = 0.05,
                 nms_thresh: float = 0.5, detections_per_img: int = 300, fg_iou_thresh: float = 0.5,
                 bg_iou_thresh: float = 0.4, topk_candidates: int = 1000, **kwargs: Any) -> None:
        super().__init__()
        self._setup(backbone, anchor_generator, _default_anchorgen, min_size, max_size, image_mean, image_std,
                    score_thresh, nms_thresh, detections_per_img, topk_candidates, **kwargs)
        if head is None:
            head = RetinaNetHead(backbone.out_channels, self.anchor_generator.num_anchors_per_location()[0],
                                 num_classes)
        self.head = head
        self.proposal_matcher = proposal_matcher or det_utils.Matcher(fg_iou_thresh, bg_iou_thresh,
                                                                      allow_low_quality_matches=True)
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))

    def compute_loss(self, targets: list[dict], head_outputs: dict[str, Tensor],
                     anchors: list[Tensor]) -> dict[str, Tensor]:
        matched_idxs = det_utils.match_anchors(self.proposal_matcher, targets, anchors)
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def losses(self, targets, head_outputs, anchors, num_anchors_per_level) -> dict[str, Tensor]:
        return self.compute_loss(targets, head_outputs, anchors)

    def _level_scores(self, head_outputs: dict[str, list[Tensor]], index: int, level: int) -> Tensor:
        return head_outputs["cls_logits"][level][index].sigmoid().flatten()

    def _decode(self, deltas: Tensor, anchors: Tensor) -> Tensor:
        return self.box_coder.decode_single(deltas, anchors)


@register_model()
def retinanet_resnet50_fpn(*, weights=None, progress: bool = True, num_classes: int | None = None,
                           weights_backbone: Any = "IMAGENET1K_V1", trainable_backbone_layers: int | None = None,
                           **kwargs: Any) -> RetinaNet:
    """RetinaNet, ResNet-50-FPN with P6/P7 from P5 (34,014,999 parameters with 91 classes and a
    pretrained backbone, whose batch norms are frozen buffers)."""
    num_classes, weights_backbone = det_utils.detection_arguments(weights, num_classes, weights_backbone)
    backbone = resnet50_fpn_backbone(weights_backbone, progress, trainable_backbone_layers, returned_layers=[2, 3, 4],
                                     extra_blocks=lambda: LastLevelP6P7(256, 256))
    return RetinaNet(backbone, num_classes, **kwargs)


@register_model()
def retinanet_resnet50_fpn_v2(*, weights=None, progress: bool = True, num_classes: int | None = None,
                              weights_backbone: Any = None, trainable_backbone_layers: int | None = None,
                              **kwargs: Any) -> RetinaNet:
    """RetinaNet v2 (Benchmarking Detection Transfer Learning with Vision Transformers): trainable batch
    norm, P6 from C5, group-normed towers and a GIoU box loss (38,198,935 parameters with 91 classes)."""
    num_classes, weights_backbone = det_utils.detection_arguments(weights, num_classes, weights_backbone)
    trainable = _validate_trainable_layers(weights_backbone is not None, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=weights_backbone, progress=progress)
    backbone = _resnet_fpn_extractor(backbone, trainable, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(2048, 256))
    anchors = _default_anchorgen()
    head = RetinaNetHead(backbone.out_channels, anchors.num_anchors_per_location()[0], num_classes,
                         norm_layer=partial(nn.GroupNorm, 32))
    head.regression_head._loss_type = "giou"
    return RetinaNet(backbone, num_classes, anchor_generator=anchors, head=head, **kwargs)
