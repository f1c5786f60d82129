"""``tapelab.utils.tensorboard``: PyTorch's ``SummaryWriter``, writing real TensorBoard event files.

Events are built with the ``tensorboard`` package's protobufs and written by its event file
writer, so ``tensorboard --logdir runs`` shows them. Like ``torch.utils.tensorboard``, this
module is not imported by ``import tapelab`` and needs ``pip install tensorboard``.
"""
from __future__ import annotations

try:
    import tensorboard  # noqa: F401
except ImportError as e:   # PyTorch's module fails the same way without the package
    raise ImportError("tapelab.utils.tensorboard needs the tensorboard package to write event files: "
                      "pip install tensorboard") from e

from .writer import SummaryWriter

__all__ = ["SummaryWriter"]
