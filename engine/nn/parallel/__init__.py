"""``tapelab.nn.parallel`` (``torch.nn.parallel``): data-parallel wrappers."""
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
