"""``torch.distributed.optim``: ``ZeroRedundancyOptimizer`` and ``DistributedOptimizer``."""
from .optimizer import DistributedOptimizer
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["DistributedOptimizer", "ZeroRedundancyOptimizer"]
