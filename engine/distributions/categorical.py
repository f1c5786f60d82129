"""The import path ``torch.distributions.categorical`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import Categorical

__all__ = ["Categorical"]
