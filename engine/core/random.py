"""Random number generation: ``manual_seed`` and ``Generator`` over numpy's PCG64, and the
random ops (``kind="random"``) that draw from them.

A random op's forward draws on the host from its param ``generator`` (None: the default
generator) before moving the numbers to the device, and draws nothing on the meta device,
as PyTorch's. The public functions (``rand``, ``randn`` ...) are in ``creation.py``.
"""
from __future__ import annotations

import json

import numpy as np

from ..base.device import CPU
from ..base.meta import has_data
from .dispatch import apply
from .factories import TENSOR
from .registry import Op

__all__ = ["Generator", "manual_seed", "seed", "initial_seed", "default_generator",
           "get_rng_state", "set_rng_state"]


class Generator:
    """A source of random numbers, like ``torch.Generator`` (streams differ from PyTorch's)."""

    def __init__(self, device="cpu"):
        self.device = device
        self._seed = 67280421310721
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """The state as a uint8 tensor on the cpu, as PyTorch's."""
        raw = json.dumps(self._rng.bit_generator.state).encode()
        return apply(TENSOR, data=np.frombuffer(raw, np.uint8).copy(), device=CPU)

    def set_state(self, state) -> "Generator":
        self._rng.bit_generator.state = json.loads(bytes(state.tolist()).decode())
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and cupy's, when a GPU is in use)."""
    default_generator.manual_seed(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)


def rng(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator)._rng


# ---------------------------------------------------------------- the random ops
def _draw(xp, draw, size, dtype):
    """``draw()`` (host numbers of ``size``) on ``xp``'s device; the meta device draws nothing."""
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    return xp.asarray(draw().astype(dtype.np, copy=False))


def _normal(xp, mean, std, *, size, dtype, device, generator):
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    if bool((xp.asarray(std) < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    # numpy's normal(mean, std) is exactly mean + std * standard_normal(), in double
    return (mean + std * xp.asarray(rng(generator).standard_normal(size))).astype(dtype.np)


def _bernoulli(xp, probs, *, p, generator):
    if not has_data(xp):
        return xp.empty(probs.shape, probs.dtype)
    if p is None and bool(((probs < 0) | (probs > 1)).any()):
        raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
    return (xp.asarray(rng(generator).random(probs.shape)) < (probs if p is None else p)).astype(probs.dtype)


RAND = Op("rand", lambda xp, *, size, dtype, device, generator:
          _draw(xp, lambda: rng(generator).random(size), size, dtype), kind="random")
RANDN = Op("randn", lambda xp, *, size, dtype, device, generator:
           _draw(xp, lambda: rng(generator).standard_normal(size), size, dtype), kind="random")
RANDINT = Op("randint", lambda xp, *, low, high, size, dtype, device, generator:
             _draw(xp, lambda: rng(generator).integers(low, high, size), size, dtype), kind="random")
RANDPERM = Op("randperm", lambda xp, *, n, dtype, device, generator:
              _draw(xp, lambda: rng(generator).permutation(n), (n,), dtype), kind="random")
NORMAL = Op("normal", _normal, kind="random")
BERNOULLI = Op("bernoulli", _bernoulli, kind="random")
