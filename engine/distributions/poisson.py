"""The import path ``torch.distributions.poisson`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import Poisson

__all__ = ["Poisson"]
