"""The import path ``torch.distributions.beta`` (PyTorch's file layout); the code lives in
``gamma.py``."""
from .gamma import Beta

__all__ = ["Beta"]
