"""The import path ``torch.distributions.cauchy`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import Cauchy

__all__ = ["Cauchy"]
