"""torchvision.ops: box utilities, NMS, RoIAlign and the layer stacks the models share."""
from .boxes import batched_nms, box_area, box_iou, nms
from .misc import MLP, Conv2dNormActivation
from .roi_align import RoIAlign, roi_align

__all__ = ["batched_nms", "box_area", "box_iou", "nms", "roi_align", "RoIAlign", "Conv2dNormActivation", "MLP"]
