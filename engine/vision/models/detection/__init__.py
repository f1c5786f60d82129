"""torchvision.models.detection: Faster R-CNN and Mask R-CNN with torchvision's module names (so its
checkpoints load). Train mode returns the dict of losses; eval returns per image ``boxes``,
``labels``, ``scores`` (and ``masks``)."""
from .faster_rcnn import *  # noqa: F401,F403
from .mask_rcnn import *  # noqa: F401,F403
