"""The import path ``torch.distributions.multinomial`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import Multinomial

__all__ = ["Multinomial"]
