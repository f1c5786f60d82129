"""The import path ``torch.distributions.gumbel`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import Gumbel

__all__ = ["Gumbel"]
