"""The import path ``torch.distributions.fishersnedecor`` (PyTorch's file layout); the code lives in
``gamma.py``."""
from .gamma import FisherSnedecor

__all__ = ["FisherSnedecor"]
