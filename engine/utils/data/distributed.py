"""``DistributedSampler``: each of ``num_replicas`` processes visits its own share of a dataset."""
from __future__ import annotations

import math
from typing import Iterator, Sized

import numpy as np

from ... import _c10d as dist
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The indices for replica ``rank`` of ``num_replicas``, PyTorch's algorithm exactly.

    Every replica shuffles with the same seed (``seed + epoch``; call :meth:`set_epoch` each
    epoch), then takes every ``num_replicas``-th index from position ``rank``. The index list is
    first padded by repeating its start (or, with ``drop_last``, cut) so that every replica gets
    ``len(self)`` indices. ``num_replicas`` and ``rank`` default to the default process group's
    (``tapelab.distributed.init_process_group``). The permutation is PyTorch's for the same seed, so
    a job keeps its data order when it moves between tapelab and PyTorch.

    Example::

        >>> sampler = DistributedSampler(dataset, num_replicas=4, rank=1, shuffle=True, seed=0)
        >>> loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        >>> for epoch in range(10):
        ...     sampler.set_epoch(epoch)
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = dist.get_world_size()
        if rank is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        # with drop_last, the largest share every replica can have; else enough to cover all
        self.num_samples = math.ceil((n - num_replicas) / num_replicas) if drop_last and n % num_replicas \
            else math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = torch_permutation(n, self.seed + self.epoch)
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding] if padding > n else indices[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Shuffle with ``seed + epoch`` from the next iteration on (the same on every replica)."""
        self.epoch = epoch


def torch_permutation(n: int, seed: int) -> list[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed))`` on the cpu.

    PyTorch's cpu permutation is a Fisher–Yates shuffle driven by one 32-bit mt19937 draw per
    position (``z = draw % (n - i)``, swap ``i`` and ``i + z``); numpy's legacy ``RandomState`` is
    the same mt19937 with the same seeding of the seed's low 32 bits, so its draws are PyTorch's.
    tapelab's own generator is a different stream, so the sampler (whose only use of randomness is
    this one permutation from a fresh seed) computes PyTorch's directly.
    """
    if n >= 2 ** 32:
        raise ValueError(f"DistributedSampler: a dataset of {n} items is larger than PyTorch's 32-bit permutation")
    order = np.arange(n, dtype=np.int64)
    if n > 1:
        draws = np.random.RandomState(seed & 0xFFFFFFFF).randint(0, 2 ** 32, size=n - 1, dtype=np.uint32)
        steps = draws.astype(np.int64) % np.arange(n, 1, -1, dtype=np.int64)
        for i, z in enumerate(steps.tolist()):
            if z:
                j = i + z
                order[i], order[j] = order[j], order[i]
    return order.tolist()
