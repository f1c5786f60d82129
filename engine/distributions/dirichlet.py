"""The import path ``torch.distributions.dirichlet`` (PyTorch's file layout); the code lives in
``gamma.py``."""
from .gamma import Dirichlet

__all__ = ["Dirichlet"]
