"""Random number generation: ``manual_seed`` and ``Generator`` over numpy's PCG64."""
from __future__ import annotations

import numpy as np

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
        from .creation import tensor
        import json
        raw = json.dumps(self._rng.bit_generator.state).encode()
        return tensor(list(raw), dtype=_uint8())

    def set_state(self, state) -> "Generator":
        import json
        self._rng.bit_generator.state = json.loads(bytes(state.tolist()).decode())
        return self


def _uint8():
    from .base.dtype import uint8
    return uint8


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
