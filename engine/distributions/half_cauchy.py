"""The import path ``torch.distributions.half_cauchy`` (PyTorch's file layout); the code lives in
``continuous.py``."""
from .continuous import HalfCauchy

__all__ = ["HalfCauchy"]
