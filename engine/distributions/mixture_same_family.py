"""The import path ``torch.distributions.mixture_same_family`` (PyTorch's file layout); the code lives in
``composite.py``."""
from .composite import MixtureSameFamily

__all__ = ["MixtureSameFamily"]
