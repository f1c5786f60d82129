"""``torch.cuda.random``: the cuda generators' seeds and states."""
from __future__ import annotations

from ..core import random as _random
from ._runtime import (_lazy_init, cuda_available, cuda_device_count, current_device, device_count,  # noqa: F401
                       is_initialized, require_cuda)

__all__ = ["get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]


# ---------------------------------------------------------------- random: the cuda generators (session 21)
class _CudaGenerator(_random.Generator):
    """``torch.cuda.default_generators[i]``: a tapelab Generator on ``cuda:i`` (a ``generator=`` of a
    random op on cuda draws from it) whose seeding also seeds cupy's own generator on that device."""

    def __init__(self, index: int):
        self.index = index
        super().__init__(f"cuda:{index}")

    def manual_seed(self, seed: int) -> "_CudaGenerator":
        super().manual_seed(seed)
        cupy = require_cuda()
        with cupy.cuda.Device(self.index):
            cupy.random.seed(self._seed)
        return self


_GENERATORS: list = []   # [tuple of _CudaGenerator], made at the first use with a GPU


def _generators() -> tuple:
    """``default_generators``: one per device with a GPU; () without (as PyTorch's before CUDA starts)."""
    if not cuda_available():
        return ()
    if not _GENERATORS:
        _GENERATORS.append(tuple(_CudaGenerator(i) for i in range(cuda_device_count())))
    return _GENERATORS[0]


def manual_seed(seed: int) -> None:
    """Seed the current device's cuda generator (and cupy's) when a GPU is present; without one a
    no-op, as PyTorch's (it queues the call for a lazy initialisation that never comes)."""
    seed = int(seed)
    if cuda_available():
        _generators()[current_device()].manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed every device's cuda generator (a no-op without a GPU)."""
    seed = int(seed)
    for g in _generators():
        g.manual_seed(seed)


def seed() -> None:
    """Seed the current device's cuda generator with a random number (a no-op without a GPU)."""
    if cuda_available():
        _generators()[current_device()].seed()


def seed_all() -> None:
    """Seed every device's cuda generator with one random number (a no-op without a GPU)."""
    gens = _generators()
    if gens:
        s = gens[0].seed()
        for g in gens[1:]:
            g.manual_seed(s)


def initial_seed() -> int:
    """The current device's cuda seed (PyTorch's default 67280421310721 until seeded)."""
    _lazy_init()
    return _generators()[current_device()].initial_seed()


def get_rng_state(device="cuda"):
    """The state of the generator cuda tensors draw from: tapelab's host generator (see above)."""
    require_cuda()
    return _random.get_rng_state()


def set_rng_state(new_state, device="cuda") -> None:
    require_cuda()
    _random.set_rng_state(new_state)


def get_rng_state_all() -> list:
    """One state per cuda device (none without a GPU, as PyTorch's on a machine without one)."""
    return [get_rng_state(i) for i in range(cuda_device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


_random.on_manual_seed(manual_seed_all)   # torch.manual_seed seeds every CUDA device too
