"""``torch.cuda.random``: the cuda generators' seeds and states; the objects are ``tapelab.cuda``'s."""
from __future__ import annotations

from . import (current_device, device_count, get_rng_state, get_rng_state_all, initial_seed,  # noqa: F401
               is_initialized, manual_seed, manual_seed_all, seed, seed_all, set_rng_state, set_rng_state_all)

__all__ = ["get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]
