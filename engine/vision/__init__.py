"""tapelab.vision: torchvision's layout on tapelab.

``import tapelab.vision as torchvision`` (or ``tapelab.install_aliases()``, then ``import torchvision``)
gives ``models``, ``transforms``, ``datasets``, ``utils`` and ``ops`` for tapelab tensors. Pillow
is needed only by the transforms and datasets that read or make images (the ``vision`` extra).
"""
from . import datasets, io, models, ops, transforms, utils  # noqa: F401

__version__ = "0.1.0"
__all__ = ["datasets", "io", "models", "ops", "transforms", "utils"]
