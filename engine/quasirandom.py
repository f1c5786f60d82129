"""``torch.quasirandom``: ``SobolEngine``, PyTorch's Sobol sequence bit for bit, scrambled or not.

The engine keeps PyTorch's state: ``sobolstate`` (the 30-bit direction numbers of each dimension,
Joe-Kuo's, which scipy's ``qmc.Sobol`` holds too), ``shift`` and ``quasi`` (the last point as
integers). Each draw XORs in the direction number of the lowest zero bit of the point's index (a
Gray-code walk), as ATen's ``_sobol_engine_draw``; a scrambled engine applies ATen's linear matrix
scramble to the direction numbers and a digital shift, both drawn with ``randint`` from a generator
seeded with ``seed`` (or the default generator), so the points are PyTorch's.
"""
from __future__ import annotations

import numpy as np

from .base.dtype import get_default_dtype
from .core.creation import randint, tensor
from .core.random import Generator
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
        self.seed, self.scramble, self.dimension = seed, scramble, dimension
        self.sobolstate = qmc.Sobol(dimension, scramble=False, bits=self.MAXBIT)._sv.astype(np.int64)
        if scramble:
            self._scramble()
        else:
            self.shift = np.zeros(dimension, dtype=np.int64)
        self.quasi = self.shift.copy()
        # PyTorch divides the long shift in the default dtype of the engine's construction
        self._first_point = (self.quasi.astype(get_default_dtype().np) / 2 ** self.MAXBIT).reshape(1, -1)
        self.num_generated = 0

    def _scramble(self) -> None:
        """ATen's ``_sobol_engine_scramble_``: bit ``p`` (from the top) of each new direction number is
        the parity of the old one AND-ed with row ``p`` of a random unit lower-triangular matrix."""
        g = None
        if self.seed is not None:
            g = Generator()
            g.manual_seed(self.seed)
        bits = np.arange(self.MAXBIT)
        shift_ints = randint(2, (self.dimension, self.MAXBIT), generator=g).numpy()
        self.shift = shift_ints @ (1 << bits)
        ltm = np.tril(randint(2, (self.dimension, self.MAXBIT, self.MAXBIT), generator=g).numpy())
        ltm[:, bits, bits] = 1
        v_bits = (self.sobolstate[:, :, None] >> bits) & 1                         # (d, j, k): bit k of v[d, j]
        parity = np.matmul(v_bits, ltm[:, :, ::-1].transpose(0, 2, 1)) & 1          # (d, j, p)
        self.sobolstate = parity @ (1 << (self.MAXBIT - 1 - bits))

    def _walk(self, n: int, start: int) -> np.ndarray:
        """The next ``n`` points as integers, ``start`` being the index of the last one, and advance."""
        index = np.arange(start, start + n, dtype=np.int64)
        lowest_zero = np.log2(~index & (index + 1)).astype(np.int64)
        points = self.quasi ^ np.bitwise_xor.accumulate(self.sobolstate[:, lowest_zero].T, axis=0)
        if n:
            self.quasi = points[-1].copy()
        return points

    def draw(self, n: int = 1, out: Tensor | None = None, dtype=None) -> Tensor:
        """The next ``n`` points, shape ``(n, dimension)``, in ``dtype`` (default: the default dtype)."""
        np_dtype = (dtype or get_default_dtype()).np
        if self.num_generated == 0:   # the first point, then n - 1 more
            points = np.concatenate([self._first_point.astype(np_dtype),
                                     self._walk(n - 1, 0).astype(np_dtype) / 2 ** self.MAXBIT])
        else:
            points = self._walk(n, self.num_generated - 1).astype(np_dtype) / 2 ** self.MAXBIT
        self.num_generated += n
        result = tensor(points)
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
        self.quasi = self.shift.copy()
        self.num_generated = 0
        return self

    def fast_forward(self, n: int) -> "SobolEngine":
        """Skip ``n`` points, as drawing them would."""
        if self.num_generated == 0:
            self._walk(n - 1, 0)
        else:
            self._walk(n, self.num_generated - 1)
        self.num_generated += n
        return self

    def __repr__(self) -> str:
        fields = [f"dimension={self.dimension}"] + ["scramble=True"] * bool(self.scramble) + (
            [f"seed={self.seed}"] if self.seed is not None else [])
        return f"{type(self).__name__}({', '.join(fields)})"
