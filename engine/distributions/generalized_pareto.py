"""The import path ``torch.distributions.generalized_pareto`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import GeneralizedPareto

__all__ = ["GeneralizedPareto"]
