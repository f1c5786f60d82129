"""The import path ``torch.distributions.kumaraswamy`` (PyTorch's file layout); the code lives in
``transformed_families.py``."""
from .transformed_families import Kumaraswamy

__all__ = ["Kumaraswamy"]
