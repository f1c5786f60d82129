"""What every program in the corpus shares: numpy-seeded weights and numpy-drawn data."""
from __future__ import annotations

import numpy as np


def seed_weights(torch, model, seed: int = 0, std: float | None = None) -> None:
    """Overwrite every parameter of ``model`` with values from ``numpy.random.default_rng(seed)``,
    in ``named_parameters()`` order: normalisation weights near 1, other vectors near 0, matrices
    and kernels uniform in +-1/sqrt(fan_in) (or normal with ``std``). Buffers keep their defaults."""
    rng = np.random.default_rng(seed)
    norm_weights = {id(m.weight) for m in model.modules()
                    if "Norm" in type(m).__name__ and getattr(m, "weight", None) is not None}
    with torch.no_grad():
        for _, p in model.named_parameters():
            shape = tuple(p.shape)
            if len(shape) <= 1:
                base = 1.0 if id(p) in norm_weights else 0.0
                values = base + 0.1 * rng.uniform(-1.0, 1.0, size=shape)
            elif std is not None:
                values = rng.normal(0.0, std, size=shape)
            else:
                values = rng.uniform(-1.0, 1.0, size=shape) / np.sqrt(np.prod(shape[1:]))
            p.copy_(torch.from_numpy(values.astype(np.float64 if p.dtype == torch.float64 else np.float32)))


def numpy_noise(torch, rng):
    """A ``torch.randn_like`` stand-in that draws from a numpy generator (same in both libraries)."""
    def randn_like(t):
        return torch.from_numpy(rng.standard_normal(tuple(t.shape)).astype(np.float32))
    return randn_like
