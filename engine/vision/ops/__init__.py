"""torchvision.ops: box utilities, IoU variants and their losses, focal loss, NMS, RoIAlign,
stochastic depth and the layer stacks the models share."""
from .boxes import (batched_nms, box_area, box_convert, box_iou, clip_boxes_to_image, complete_box_iou,
                    distance_box_iou, generalized_box_iou, masks_to_boxes, nms, remove_small_boxes)
from .losses import complete_box_iou_loss, distance_box_iou_loss, generalized_box_iou_loss, sigmoid_focal_loss
from .misc import MLP, Conv2dNormActivation, FrozenBatchNorm2d, Permute, SqueezeExcitation
from .roi_align import RoIAlign, roi_align
from .stochastic_depth import StochasticDepth, stochastic_depth

__all__ = ["batched_nms", "box_area", "box_convert", "box_iou", "clip_boxes_to_image", "complete_box_iou",
           "distance_box_iou", "generalized_box_iou", "masks_to_boxes", "nms", "remove_small_boxes",
           "complete_box_iou_loss", "distance_box_iou_loss", "generalized_box_iou_loss", "sigmoid_focal_loss",
           "roi_align", "RoIAlign", "Conv2dNormActivation", "MLP", "FrozenBatchNorm2d", "SqueezeExcitation",
           "Permute", "StochasticDepth", "stochastic_depth"]
