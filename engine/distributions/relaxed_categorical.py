"""The import path ``torch.distributions.relaxed_categorical`` (PyTorch's file layout); the code lives in
``relaxed.py``."""
from .relaxed import ExpRelaxedCategorical, RelaxedOneHotCategorical

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]
