"""utils.data: datasets, samplers, collation (against torch's default_collate) and DataLoader."""
import collections
import multiprocessing
import os
import time

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import tapelab
from tapelab.utils import data as tld


def _plain(x):
    """A batch as nested Python values, tagged with container kinds, for comparing libraries."""
    if isinstance(x, (torch.Tensor, tapelab.Tensor)):
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape), np.asarray(x).tolist())
    if isinstance(x, dict):
        return ("dict", {k: _plain(v) for k, v in x.items()})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__, [_plain(v) for v in x])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v) for v in x])
    return x


Point = collections.namedtuple("Point", "x y")

SAMPLES = {
    "ints": [1, 2, 3],
    "floats": [0.5, 1.5],
    "bools": [True, False],
    "strings": ["a", "bc"],
    "numpy-arrays": [np.arange(3, dtype=np.float32), np.ones(3, dtype=np.float32)],
    "numpy-scalars": [np.float32(1.5), np.float32(2.5)],
    "numpy-int64": [np.int64(3), np.int64(4)],
    "tuples": [(1, 2.0, "a"), (3, 4.0, "b")],
    "lists": [[1, 2], [3, 4]],
    "dicts": [{"x": 1, "y": [1.0, 2.0]}, {"x": 2, "y": [3.0, 4.0]}],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "nested": [{"img": np.zeros((2, 2)), "meta": (7, "cat")}, {"img": np.ones((2, 2)), "meta": (8, "dog")}],
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_default_collate_matches_torch(name):
    assert _plain(tld.default_collate(SAMPLES[name])) == _plain(tud.default_collate(SAMPLES[name]))


@pytest.mark.parametrize("name", list(SAMPLES))
def test_default_convert_matches_torch(name):
    sample = SAMPLES[name][0]
    assert _plain(tld.default_convert(sample)) == _plain(tud.default_convert(sample))


def test_collate_tensors_stack_and_errors():
    batch = [tapelab.tensor([1.0, 2.0]), tapelab.tensor([3.0, 4.0])]
    out = tld.default_collate(batch)
    assert out.shape == (2, 2) and out.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(RuntimeError, match="equal size"):
        tld.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="batch must contain tensors"):
        tld.default_collate([object(), object()])


def _dataset(n=10):
    return tld.TensorDataset(tapelab.arange(n).float().reshape(n, 1), tapelab.arange(n))


def test_tensor_dataset_and_batching():
    ds = _dataset()
    x, y = ds[3]
    assert x.tolist() == [3.0] and y.item() == 3 and len(ds) == 10
    with pytest.raises(AssertionError, match="Size mismatch"):
        tld.TensorDataset(tapelab.zeros(3), tapelab.zeros(4))
    batches = list(tld.DataLoader(ds, batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].shape == (4, 1) and batches[0][0].dtype == tapelab.float32
    assert len(tld.DataLoader(ds, batch_size=4)) == 3
    dropped = tld.DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [b[1].tolist() for b in dropped] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    single = list(tld.DataLoader(ds, batch_size=None))
    assert len(single) == 10 and single[2][1].item() == 2


def _order(loader):
    return [i for b in loader for i in b[1].tolist()]


def test_shuffle_is_a_reproducible_permutation():
    ds = _dataset(20)
    loader = tld.DataLoader(ds, batch_size=6, shuffle=True)
    tapelab.manual_seed(0)
    first, second = _order(loader), _order(loader)
    assert sorted(first) == list(range(20)) and sorted(second) == list(range(20))
    assert first != second  # a new order every epoch
    tapelab.manual_seed(0)
    assert _order(loader) == first
    gen_a = tld.DataLoader(ds, batch_size=6, shuffle=True, generator=tapelab.Generator().manual_seed(5))
    gen_b = tld.DataLoader(ds, batch_size=6, shuffle=True, generator=tapelab.Generator().manual_seed(5))
    assert _order(gen_a) == _order(gen_b)


def test_samplers():
    ds = list(range(10))
    assert list(tld.SequentialSampler(ds)) == list(range(10))
    g = tapelab.Generator().manual_seed(3)
    rs = tld.RandomSampler(ds, replacement=True, num_samples=70, generator=g)
    draws = list(rs)
    assert len(draws) == 70 == len(rs) and set(draws) <= set(range(10))
    more = list(tld.RandomSampler(ds, num_samples=25, generator=g))
    assert len(more) == 25 and sorted(more[:10]) == list(range(10)) and sorted(more[10:20]) == list(range(10))
    sub = list(tld.SubsetRandomSampler([2, 4, 6, 8], generator=g))
    assert sorted(sub) == [2, 4, 6, 8]
    bs = tld.BatchSampler(tld.SequentialSampler(ds), batch_size=3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]] and len(bs) == 4
    assert len(tld.BatchSampler(ds, 3, True)) == 3
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        tld.RandomSampler(ds, num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        tld.RandomSampler(ds, replacement=1)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        tld.BatchSampler(ds, 0, False)


def test_sampler_and_batch_sampler_options():
    ds = _dataset()
    loader = tld.DataLoader(ds, batch_size=2, sampler=[9, 8, 7])
    assert [b[1].tolist() for b in loader] == [[9, 8], [7]]
    loader = tld.DataLoader(ds, batch_sampler=[[1, 2], [5]])
    assert [b[1].tolist() for b in loader] == [[1, 2], [5]] and len(loader) == 2
    loader = tld.DataLoader(list(range(5)), batch_size=2, collate_fn=lambda b: sum(b))
    assert list(loader) == [1, 5, 4]
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        tld.DataLoader(ds, sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        tld.DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        tld.DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        tld.DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        tld.DataLoader(Stream(4), shuffle=True)


def test_subset_concat_random_split():
    ds = list(range(10))
    sub = tld.Subset(ds, [3, 1])
    assert len(sub) == 2 and sub[0] == 3
    cat = tld.ConcatDataset([list(range(3)), list(range(10, 14))])
    assert len(cat) == 7 and cat[3] == 10 and cat[-1] == 13 and cat[2] == 2
    with pytest.raises(ValueError, match="absolute value of index"):
        cat[-8]
    assert len(_dataset(3) + _dataset(4)) == 7
    parts = tld.random_split(ds, [3, 7], generator=tapelab.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == ds
    again = tld.random_split(ds, [3, 7], generator=tapelab.Generator().manual_seed(0))
    assert list(again[0]) == list(parts[0])
    fractions = tld.random_split(range(11), [0.3, 0.3, 0.4])
    assert [len(p) for p in fractions] == [len(p) for p in tud.random_split(range(11), [0.3, 0.3, 0.4])]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        tld.random_split(ds, [3, 3])


class Stream(tld.IterableDataset):
    """0..n-1, each worker taking every num_workers-th item."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = tld.get_worker_info()
        start, step = (info.id, info.num_workers) if info else (0, 1)
        return iter(range(start, self.n, step))

    def __len__(self):
        return self.n


def test_iterable_dataset_batches_like_torch():
    for workers in (0, 2):
        ours = [b.tolist() for b in tld.DataLoader(Stream(9), batch_size=2, num_workers=workers)]
        theirs = [b.tolist() for b in tud.DataLoader(TorchStream(9), batch_size=2, num_workers=workers)]
        assert ours == theirs
    assert len(tld.DataLoader(Stream(9), batch_size=2)) == 5
    assert len(tld.DataLoader(Stream(9), batch_size=2, drop_last=True)) == 4


class TorchStream(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = tud.get_worker_info()
        start, step = (info.id, info.num_workers) if info else (0, 1)
        return iter(range(start, self.n, step))


class Slow(tld.Dataset):
    """Later items are faster, so workers finish out of order."""

    def __getitem__(self, i):
        time.sleep(0.002 * (20 - i))
        info = tld.get_worker_info()
        return {"i": i, "x": np.full(2, i, dtype=np.float32), "who": info.id if info else -1}

    def __len__(self):
        return 20


def test_workers_preserve_order_and_match_single_process():
    single = [b["i"].tolist() for b in tld.DataLoader(Slow(), batch_size=3, sampler=list(range(20)))]
    loader = tld.DataLoader(Slow(), batch_size=3, num_workers=3)
    batches = list(loader)
    assert [b["i"].tolist() for b in batches] == single
    assert batches[0]["x"].shape == (3, 2) and batches[0]["x"].dtype == tapelab.float32
    assert {w for b in batches for w in b["who"].tolist()} == {0, 1, 2}
    assert len(loader) == 7


class Seeds(tld.Dataset):
    def __getitem__(self, i):
        return tapelab.rand(1).item(), INIT_MARK.get("worker")

    def __len__(self):
        return 4


INIT_MARK = {}


def _init(worker_id):
    INIT_MARK["worker"] = worker_id * 10


def test_worker_seeds_and_init_fn():
    def run():
        return [tuple(x) for b in tld.DataLoader(Seeds(), batch_size=2, num_workers=2, worker_init_fn=_init)
                for x in zip(*b)]
    tapelab.manual_seed(1)
    first = run()
    tapelab.manual_seed(1)
    assert run() == first  # reproducible from the main seed
    assert first[0][0] != first[2][0]  # workers draw different streams
    assert [mark for _, mark in first] == [0, 0, 10, 10]


class Faulty(tld.Dataset):
    def __getitem__(self, i):
        if i == 5:
            raise KeyError(f"no sample {i}")
        return i

    def __len__(self):
        return 8


def test_worker_error_is_reraised_with_its_traceback():
    loader = tld.DataLoader(Faulty(), batch_size=2, num_workers=2)
    with pytest.raises(KeyError) as info:
        list(loader)
    text = str(info.value)
    assert "in DataLoader worker process 0" in text and "Traceback" in text and "no sample 5" in text
    assert "__getitem__" in text


class Dies(tld.Dataset):
    def __getitem__(self, i):
        if i == 3:
            os._exit(7)
        return i

    def __len__(self):
        return 6


def test_dead_worker_and_timeout():
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(tld.DataLoader(Dies(), batch_size=1, num_workers=2))
    with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
        list(tld.DataLoader(Slow(), batch_size=20, num_workers=1, timeout=0.2))


def test_breaking_out_early_shuts_workers_down():
    before = {p.pid for p in multiprocessing.active_children()}
    it = iter(tld.DataLoader(Slow(), batch_size=2, num_workers=2))
    assert next(it)["i"].tolist() == [0, 1]
    workers = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert len(workers) == 2 and all(p.is_alive() for p in workers)
    it.close()
    assert not any(p.is_alive() for p in workers)
    assert not {p.pid for p in multiprocessing.active_children()} - before


def test_progress_wraps_iterables():
    bar = tld.progress(range(3), disable=True)
    assert list(bar) == [0, 1, 2]


class _PerSample(tld.TensorDataset):
    """A subclass: the loader fetches it sample by sample and collates (the general path)."""


@pytest.mark.parametrize("shuffle,drop_last", [(True, False), (False, True)])
def test_tensor_dataset_batches_equal_the_sample_by_sample_path_and_torch(shuffle, drop_last):
    # a TensorDataset under default_collate is gathered once per tensor: same batches as
    # stacking each sample, and as torch's DataLoader under the same seed
    x = np.random.default_rng(0).standard_normal((50, 3, 2)).astype(np.float32)
    y = np.arange(50) % 7
    batches = {}
    for name, lib, ds in (("gathered", tapelab, tld.TensorDataset), ("per-sample", tapelab, _PerSample),
                          ("torch", torch, tud.TensorDataset)):
        lib.manual_seed(3)
        loader = (tud if lib is torch else tld).DataLoader(ds(lib.tensor(x), lib.tensor(y)), batch_size=8,
                                                           shuffle=shuffle, drop_last=drop_last)
        batches[name] = [_plain(b) for b in loader]
    assert batches["gathered"] == batches["per-sample"] == batches["torch"]
    assert len(batches["torch"]) == (6 if drop_last else 7)


def test_tensor_dataset_gather_keeps_negative_indices_and_falls_back_for_graphs():
    x = tapelab.arange(12.0).reshape(6, 2)
    ds = tld.TensorDataset(x, tapelab.arange(6))
    sampler = [[5, -1, 0], [2]]
    got = [_plain(b) for b in tld.DataLoader(ds, batch_sampler=sampler)]
    assert got == [_plain([x[[5, 5, 0]], tapelab.tensor([5, 5, 0])]), _plain([x[[2]], tapelab.tensor([2])])]
    w = tapelab.ones(6, 2, requires_grad=True)
    ds = tld.TensorDataset(w * 2)   # records a graph: collated by stacking samples, as torch does
    (batch,) = next(iter(tld.DataLoader(ds, batch_size=4)))
    assert batch.grad_fn.name() == "StackBackward0"
    batch.sum().backward()
    assert w.grad[:4].tolist() == [[2.0, 2.0]] * 4 and w.grad[4:].tolist() == [[0.0, 0.0]] * 2


def test_collated_transposed_samples_are_contiguous_as_torch():
    # default_collate stacks: PyTorch's stack always returns a contiguous tensor
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    for lib, collate in ((tapelab, tld.default_collate), (torch, tud.default_collate)):
        batch = collate([lib.tensor(base).T, lib.tensor(base + 1).T])
        assert batch.is_contiguous() and batch.stride() == (6, 2, 1)
        assert np.asarray(batch).tolist() == np.stack([base.T, base.T + 1]).tolist()


# ---------------------------------------------------------------- persistent workers
class _Augmented:
    """A map dataset whose samples draw from the worker's torch generator (a random augmentation)
    and name the process that made them."""

    def __init__(self, lib, n: int):
        self.lib, self.n = lib, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.lib.tensor(float(i)) + self.lib.rand(()), os.getpid()


class _Counting:
    """An iterable dataset: 0..n-1, split between the workers."""

    def __init__(self, lib, n: int):
        self.lib, self.n = lib, n

    def __iter__(self):
        info = self.lib.utils.data.get_worker_info()
        return iter(range(info.id, self.n, info.num_workers))


def _epochs(lib, dataset, epochs: int, stop_first_after: int | None = None, **kw):
    lib.manual_seed(0)
    base = lib.utils.data.IterableDataset if isinstance(dataset, _Counting) else lib.utils.data.Dataset
    wrapped = type("DS", (base,), {k: getattr(type(dataset), k) for k in ("__len__", "__getitem__", "__iter__")
                                   if hasattr(type(dataset), k)})
    ds = wrapped.__new__(wrapped)
    ds.__dict__.update(dataset.__dict__, lib=lib)
    loader = lib.utils.data.DataLoader(ds, batch_size=3, num_workers=2, persistent_workers=True,
                                       generator=lib.Generator().manual_seed(5), **kw)
    out, pids = [], set()
    for e in range(epochs):
        for k, batch in enumerate(loader):
            if isinstance(batch, list):
                values, who = batch
                pids.update(who.tolist())
                out.append([round(v, 6) for v in values.tolist()])
            else:
                out.append(batch.tolist())
            if e == 0 and stop_first_after is not None and k + 1 == stop_first_after:
                break
    return out, len(pids), lib.rand(()).item()


@pytest.mark.parametrize("stop_first_after", [None, 1])
def test_persistent_workers_keep_their_processes_seed_and_random_streams_as_torch(stop_first_after):
    """With ``persistent_workers`` PyTorch draws the workers' base seed from the loader's generator
    at the first pass only, and its workers' generators run on across epochs: three shuffled
    epochs of randomly augmented samples equal torch's, made by the same two processes, also when
    the first pass stops after one batch (its prefetched results are dropped)."""
    ours = _epochs(tapelab, _Augmented(tapelab, 10), 3, stop_first_after, shuffle=True)
    theirs = _epochs(torch, _Augmented(torch, 10), 3, stop_first_after, shuffle=True)
    assert ours == theirs and ours[1] == 2


def test_persistent_workers_restart_an_iterable_dataset_each_pass():
    ours, theirs = _epochs(tapelab, _Counting(tapelab, 7), 2), _epochs(torch, _Counting(torch, 7), 2)
    assert ours == theirs and sorted(sum(ours[0][: len(ours[0]) // 2], [])) == list(range(7))
