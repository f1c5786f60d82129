"""The import path ``torch.distributions.pareto`` (PyTorch's file layout); the code lives in
``transformed_families.py``."""
from .transformed_families import Pareto

__all__ = ["Pareto"]
