"""The import path ``torch.distributions.half_normal`` (PyTorch's file layout); the code lives in
``normal.py``."""
from .normal import HalfNormal

__all__ = ["HalfNormal"]
