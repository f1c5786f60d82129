"""The import path ``torch.distributions.one_hot_categorical`` (PyTorch's file layout); the code lives in
``discrete.py``."""
from .discrete import OneHotCategorical, OneHotCategoricalStraightThrough

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]
