"""torchvision.models.detection: Faster R-CNN, Mask R-CNN, Keypoint R-CNN, RetinaNet, FCOS, SSD and SSDlite with torchvision's module names (so its
checkpoints load). Train mode returns the dict of losses; eval returns per image ``boxes``,
``labels``, ``scores`` (and ``masks``)."""
from .fcos import *  # noqa: F401,F403
from .faster_rcnn import *  # noqa: F401,F403
from .keypoint_rcnn import *  # noqa: F401,F403
from .mask_rcnn import *  # noqa: F401,F403
from .retinanet import *  # noqa: F401,F403
from .ssd import *  # noqa: F401,F403
from .ssdlite import *  # noqa: F401,F403
