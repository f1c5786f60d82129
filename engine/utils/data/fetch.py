"""PyTorch's dataset fetchers (``torch.utils.data._utils.fetch``): what turns one index from a
loader's ``_index_sampler`` into one batch. ``DataLoader`` itself batches through ``_Job``; these
serve code that drives PyTorch's iterator types with its own loader-like object (fastai's
``_FakeLoader`` hands ``_SingleProcessDataLoaderIter`` an iterable "dataset" that yields whole
batches and a no-op ``collate_fn``)."""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["_BaseDatasetFetcher", "_MapDatasetFetcher", "_IterableDatasetFetcher"]


class _BaseDatasetFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.dataset, self.auto_collation = dataset, auto_collation
        self.collate_fn, self.drop_last = collate_fn, drop_last

    def fetch(self, possibly_batched_index):
        raise NotImplementedError()


class _MapDatasetFetcher(_BaseDatasetFetcher):
    """``dataset[index]`` (one sample), or the samples of a list of indices (``__getitems__`` when
    the dataset has one), collated."""

    def fetch(self, possibly_batched_index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[possibly_batched_index])
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems:
            samples = getitems(possibly_batched_index)
        else:
            samples = [self.dataset[i] for i in possibly_batched_index]
        return self.collate_fn(samples)


class _IterableDatasetFetcher(_BaseDatasetFetcher):
    """The next sample of ``iter(dataset)`` (or as many as the batched index is long), collated;
    ``StopIteration`` once the dataset has run dry (or before a short last batch with
    ``drop_last``)."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        super().__init__(dataset, auto_collation, collate_fn, drop_last)
        self.dataset_iter, self.ended = iter(dataset), False

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        samples = []
        for _ in possibly_batched_index:
            try:
                samples.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not samples or (self.drop_last and len(samples) < len(possibly_batched_index)):
            raise StopIteration
        return self.collate_fn(samples)
