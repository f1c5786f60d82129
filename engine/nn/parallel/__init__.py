"""``tapelab.nn.parallel`` (``torch.nn.parallel``): data-parallel wrappers."""
from . import scatter_gather
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel
from .parallel_apply import parallel_apply
from .replicate import replicate
from .scatter_gather import gather, scatter

__all__ = ["DataParallel", "DistributedDataParallel", "scatter", "gather", "parallel_apply", "replicate"]
