"""The import path ``torch.distributions.uniform`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import Uniform

__all__ = ["Uniform"]
