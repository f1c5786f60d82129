"""The import path ``torch.distributions.exponential`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import Exponential

__all__ = ["Exponential"]
