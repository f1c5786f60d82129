"""torchvision.transforms.v2: transforms over samples (images, tv_tensors, labels) and ``functional``."""
from . import functional  # noqa: F401
from ..functional import InterpolationMode  # noqa: F401
from ._transforms import *  # noqa: F401,F403
from ._transforms import Transform, query_chw, query_size  # noqa: F401
