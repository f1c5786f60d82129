"""``torch.distributed.optim``: ``ZeroRedundancyOptimizer``."""
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
