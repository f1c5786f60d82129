"""The import path ``torch.distributions.studentT`` (PyTorch's file layout); the code lives in
``gamma.py``."""
from .gamma import StudentT

__all__ = ["StudentT"]
