"""The import path ``torch.distributions.inverse_gamma`` (PyTorch's file layout); the code lives in
``transformed_families.py``."""
from .transformed_families import InverseGamma

__all__ = ["InverseGamma"]
