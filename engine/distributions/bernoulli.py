"""The import path ``torch.distributions.bernoulli`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import Bernoulli

__all__ = ["Bernoulli"]
