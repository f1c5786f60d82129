"""The import path ``torch.distributions.log_normal`` (PyTorch's file layout); the code lives in
``normal.py``."""
from .normal import LogNormal

__all__ = ["LogNormal"]
