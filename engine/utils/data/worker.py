"""``torch.utils.data._utils.worker``'s seed derivation: the numpy seed each DataLoader worker
starts from, so augmentations drawn with ``np.random`` in a worker give PyTorch's numbers
(tensordict imports ``_generate_state`` from here)."""
from __future__ import annotations

import numpy as np

__all__ = ["_generate_state"]


def _generate_state(base_seed: int, worker_id: int) -> list[int]:
    """The four 32-bit words PyTorch seeds worker ``worker_id``'s numpy with: numpy's ``SeedSequence``
    (a pool of four words) over ``[worker_id, base_seed's low half, its high half, 0]``."""
    entropy = worker_id | (base_seed & 0xFFFFFFFF) << 32 | (base_seed >> 32) << 64
    return np.random.SeedSequence(entropy, pool_size=4).generate_state(4).tolist()
