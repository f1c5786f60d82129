"""torchvision.models.segmentation: FCN, DeepLabV3 and Lite R-ASPP with torchvision's module names
(so its checkpoints load); each returns ``{"out": ..., "aux": ...}`` at the input's size."""
from .deeplabv3 import *  # noqa: F401,F403
from .fcn import *  # noqa: F401,F403
from .lraspp import *  # noqa: F401,F403
