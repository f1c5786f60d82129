"""The import path ``torch.distributions.independent`` (PyTorch's file layout); the code lives in
``composite.py``."""
from .composite import Independent

__all__ = ["Independent"]
