"""The import path ``torch.distributions.chi2`` (PyTorch's file layout); the code lives in
``gamma.py``."""
from .gamma import Chi2

__all__ = ["Chi2"]
