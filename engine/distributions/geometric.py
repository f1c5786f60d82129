"""The import path ``torch.distributions.geometric`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import Geometric

__all__ = ["Geometric"]
