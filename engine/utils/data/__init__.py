"""Datasets and loaders (torch.utils.data), plus ``progress`` for notebook-friendly loops."""
from __future__ import annotations

from typing import Iterable

from ._collate import collate, default_collate, default_convert
from .dataloader import DataLoader, WorkerInfo, get_worker_info
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .distributed import DistributedSampler
from .stack_dataset import StackDataset
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset",
           "StackDataset", "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader", "get_worker_info",
           "WorkerInfo", "default_collate", "default_convert", "collate", "progress"]


def progress(iterable: Iterable, **kwargs) -> Iterable:
    """``for batch in progress(loader, desc="epoch 1"):`` shows a progress bar.

    Uses ``tqdm.auto`` (a widget in Jupyter, text in a terminal) when tqdm is installed,
    and returns ``iterable`` unchanged otherwise; imported on call, so the engine itself
    never imports a notebook package.
    """
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, **kwargs)
