"""The import path ``torch.distributions.relaxed_bernoulli`` (PyTorch's file layout); the code lives in
``relaxed.py``."""
from .relaxed import LogitRelaxedBernoulli, RelaxedBernoulli

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]
