"""tapelab.vision: torchvision's layout on tapelab.

``import tapelab.vision as torchvision`` (or ``tapelab.install_aliases()``, then ``import torchvision``)
gives ``models``, ``transforms``, ``datasets``, ``utils`` and ``ops`` for tapelab tensors. Pillow
is needed only by the transforms and datasets that read or make images (the ``vision`` extra).
"""
from . import datasets, io, models, ops, transforms, utils  # noqa: F401
from ..version import TAPELAB, TorchVersion

__version__ = TorchVersion(f"0.28.0+tapelab.{TAPELAB}")   # torchvision's release paired with the PyTorch API tapelab implements
__all__ = ["datasets", "io", "models", "ops", "transforms", "utils"]
