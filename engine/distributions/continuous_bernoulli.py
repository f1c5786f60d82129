"""The import path ``torch.distributions.continuous_bernoulli`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import ContinuousBernoulli

__all__ = ["ContinuousBernoulli"]
