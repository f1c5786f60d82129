"""The import path ``torch.distributions.lowrank_multivariate_normal`` (PyTorch's file layout); the code lives in
``multivariate_normal.py``."""
from .multivariate_normal import LowRankMultivariateNormal

__all__ = ["LowRankMultivariateNormal"]
