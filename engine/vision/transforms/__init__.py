"""torchvision.transforms (the v1 API), its ``functional`` module and ``v2``."""
from . import functional  # noqa: F401
from .autoaugment import *  # noqa: F401,F403
from .functional import InterpolationMode  # noqa: F401
from .transforms import *  # noqa: F401,F403
