"""The import path ``torch.distributions.transformed_distribution`` (PyTorch's file layout); the code lives in
``composite.py``."""
from .composite import TransformedDistribution

__all__ = ["TransformedDistribution"]
