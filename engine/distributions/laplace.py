"""The import path ``torch.distributions.laplace`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import Laplace

__all__ = ["Laplace"]
