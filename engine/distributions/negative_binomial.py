"""The import path ``torch.distributions.negative_binomial`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import NegativeBinomial

__all__ = ["NegativeBinomial"]
