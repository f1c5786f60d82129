"""The import path ``torch.distributions.weibull`` (PyTorch's file layout); the code lives in
``transformed_families.py``."""
from .transformed_families import Weibull

__all__ = ["Weibull"]
