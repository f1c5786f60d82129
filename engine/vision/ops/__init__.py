"""torchvision.ops: box utilities, IoU variants and their losses, focal loss, NMS, RoIAlign,
RoIPool, multi-scale RoIAlign, deformable convolution, feature pyramids, stochastic depth, DropBlock and the layer stacks
the models share."""
from .deform_conv import DeformConv2d, deform_conv2d
from .boxes import (batched_nms, box_area, box_convert, box_iou, clip_boxes_to_image, complete_box_iou,
                    distance_box_iou, generalized_box_iou, masks_to_boxes, nms, remove_small_boxes)
from .drop_block import DropBlock2d, DropBlock3d, drop_block2d, drop_block3d
from .feature_pyramid_network import FeaturePyramidNetwork
from .losses import complete_box_iou_loss, distance_box_iou_loss, generalized_box_iou_loss, sigmoid_focal_loss
from .misc import MLP, Conv2dNormActivation, Conv3dNormActivation, FrozenBatchNorm2d, Permute, SqueezeExcitation
from .poolers import MultiScaleRoIAlign
from .roi_align import RoIAlign, roi_align
from .roi_pool import RoIPool, roi_pool
from .stochastic_depth import StochasticDepth, stochastic_depth

__all__ = ["batched_nms", "box_area", "box_convert", "box_iou", "clip_boxes_to_image", "complete_box_iou",
           "distance_box_iou", "generalized_box_iou", "masks_to_boxes", "nms", "remove_small_boxes",
           "complete_box_iou_loss", "distance_box_iou_loss", "generalized_box_iou_loss", "sigmoid_focal_loss",
           "roi_align", "RoIAlign", "roi_pool", "RoIPool", "MultiScaleRoIAlign", "FeaturePyramidNetwork",
           "drop_block2d", "DropBlock2d", "drop_block3d", "DropBlock3d", "Conv2dNormActivation",
           "Conv3dNormActivation", "MLP", "FrozenBatchNorm2d", "SqueezeExcitation", "Permute", "StochasticDepth",
           "stochastic_depth", "deform_conv2d", "DeformConv2d"]
