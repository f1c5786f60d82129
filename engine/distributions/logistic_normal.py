"""The import path ``torch.distributions.logistic_normal`` (PyTorch's file layout); the code lives in
``transformed_families.py``."""
from .transformed_families import LogisticNormal

__all__ = ["LogisticNormal"]
