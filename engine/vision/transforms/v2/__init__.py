"""torchvision.transforms.v2: so far its ``functional`` module (image processors call it on tensors)."""
from . import functional  # noqa: F401
