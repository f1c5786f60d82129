"""torchvision.transforms (the v1 API) and its ``functional`` module."""
from . import functional  # noqa: F401
from .functional import InterpolationMode  # noqa: F401
from .transforms import *  # noqa: F401,F403
