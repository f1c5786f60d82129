"""The import path ``torch.distributions.binomial`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import Binomial

__all__ = ["Binomial"]
