"""``torch.quasirandom``: ``SobolEngine``, over scipy's ``qmc.Sobol``.

scipy and PyTorch build Sobol points from the same Joe-Kuo direction numbers with 30 bits, so
unscrambled draws equal PyTorch's bit for bit (the first point, ``fast_forward`` and all). A
scrambled engine is scipy's linear matrix scramble plus digital shift, the randomisation PyTorch
applies, seeded by ``seed`` (or, without one, by a draw from tapelab's default generator, so
``manual_seed`` makes it reproducible); its numbers are not PyTorch's.
"""
from __future__ import annotations

import warnings

import numpy as np

from .base.dtype import get_default_dtype
from .core.creation import tensor
from .core.random import rng
from .core.tensor import Tensor

__all__ = ["SobolEngine"]


class SobolEngine:
    """Draws from a (scrambled) Sobol sequence of ``dimension`` coordinates in [0, 1)."""

    MAXBIT = 30
    MAXDIM = 21201

    def __init__(self, dimension: int, scramble: bool = False, seed: int | None = None) -> None:
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError(f"Supported range of dimensionality for SobolEngine is [1, {self.MAXDIM}]")
        from scipy.stats import qmc   # scipy.stats takes a noticeable time to import: only when used
        self.dimension, self.scramble, self.seed = dimension, scramble, seed
        stream = np.random.default_rng(int(rng(None).integers(2 ** 63)) if seed is None else seed)
        self._sobol = qmc.Sobol(dimension, scramble=scramble, bits=self.MAXBIT, seed=stream)
        self.num_generated = 0

    def draw(self, n: int = 1, out: Tensor | None = None, dtype=None) -> Tensor:
        """The next ``n`` points, shape ``(n, dimension)``, in ``dtype`` (default: the default dtype)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # scipy's power-of-2 advice: PyTorch gives none
            points = self._sobol.random(n)
        self.num_generated += n
        result = tensor(points, dtype=dtype or get_default_dtype())
        if out is not None:
            out.resize_as_(result).copy_(result)
            return out
        return result

    def draw_base2(self, m: int, out: Tensor | None = None, dtype=None) -> Tensor:
        """The next ``2**m`` points; the total drawn must stay a power of 2 (the sequence's balance)."""
        n = 2 ** m
        total_n = self.num_generated + n
        if total_n & (total_n - 1):
            raise ValueError("The balance properties of Sobol' points require n to be a power of 2. "
                             f"{self.num_generated} points have been previously generated, then: "
                             f"n={self.num_generated}+2**{m}={total_n}. If you still want to do this, please use "
                             "'SobolEngine.draw()' instead.")
        return self.draw(n=n, out=out, dtype=dtype)

    def reset(self) -> "SobolEngine":
        self._sobol.reset()
        self.num_generated = 0
        return self

    def fast_forward(self, n: int) -> "SobolEngine":
        """Skip ``n`` points, as drawing them would."""
        self._sobol.fast_forward(n)
        self.num_generated += n
        return self

    def __repr__(self) -> str:
        fields = [f"dimension={self.dimension}"] + ["scramble=True"] * bool(self.scramble) + (
            [f"seed={self.seed}"] if self.seed is not None else [])
        return f"{type(self).__name__}({', '.join(fields)})"
