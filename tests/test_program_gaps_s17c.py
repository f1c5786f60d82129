"""Gaps found by running Dive into Deep Learning's ``d2l`` (torch flavour) and fastai unchanged under
``install_aliases()``, each pattern written here directly and checked against real torch:
PyTorch's DataLoader iterator protocol driven by a library's own loader-like object (fastai's
``_FakeLoader``), ``torch._utils._flatten_dense_tensors`` (fastai's fp16 utilities), a Tensor
subclass whose ``__new__`` returns a finished tensor (fastai's ``TensorBase(x)``), saving and
pickling a Tensor subclass with its attributes (``Learner.save``, ``TensorBase.__reduce_ex__``), and
the backward of a subclass loss giving plain Tensor gradients (fastai's ``MSELossFlat`` returns a
``TensorBase``; its optimizer's ``p.grad.detach_(); p.grad.zero_()`` then failed)."""
from __future__ import annotations

import gc
import importlib
import io
import itertools
import pickle

import numpy as np
import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


# ---------------------------------------------------------------- the DataLoader iterator protocol
def _loader_module(m):
    return importlib.import_module(f"{m.__name__}.utils.data.dataloader")


class _BatchStream:
    """An iterable of whole batches, as fastai's loader hands PyTorch's iterator itself."""

    def __init__(self, m, n):
        self.m, self.n = m, n

    def __iter__(self):
        for i in range(self.n):
            yield (self.m.arange(4.0) + 10 * i, self.m.tensor([i]))


def _fake_loader(m, n, num_workers=0):
    dl = _loader_module(m)

    class FakeLoader:   # the attributes fastai's _FakeLoader sets, and nothing else
        _IterableDataset_len_called, _auto_collation, drop_last, in_order = None, False, False, True
        _index_sampler, generator, prefetch_factor = itertools.count(), None, 2
        _dataset_kind = dl._DatasetKind.Iterable
        pin_memory, pin_memory_device, timeout, persistent_workers = False, "", 0, False
        worker_init_fn, multiprocessing_context = None, None

        def __init__(self):
            self.dataset, self.num_workers = _BatchStream(m, n), num_workers

        @staticmethod
        def collate_fn(x):
            return x

    return FakeLoader()


@BOTH
def test_single_process_iterator_runs_a_loader_like_object(m):
    m.manual_seed(0)
    dl = _loader_module(m)
    it = dl._SingleProcessDataLoaderIter(_fake_loader(m, 3))
    assert isinstance(it, dl._BaseDataLoaderIter)
    batches = [(_np(x).tolist(), _np(y).tolist()) for x, y in it]
    assert batches == [([0.0, 1.0, 2.0, 3.0], [0]), ([10.0, 11.0, 12.0, 13.0], [1]),
                       ([20.0, 21.0, 22.0, 23.0], [2])]


def test_loader_like_pass_draws_the_same_numbers_after_it():
    out = []
    for m in (torch, tapelab):
        m.manual_seed(3)
        list(_loader_module(m)._SingleProcessDataLoaderIter(_fake_loader(m, 2)))
        out.append(_np(m.rand(4)))
    np.testing.assert_array_equal(out[0], out[1])


@BOTH
def test_iterator_made_from_a_real_loader_matches_iter(m):
    data = m.utils.data.TensorDataset(m.arange(10.0).reshape(5, 2), m.arange(5))
    loader = m.utils.data.DataLoader(data, batch_size=2, shuffle=True, generator=m.Generator().manual_seed(1))
    dl = _loader_module(m)
    assert loader._dataset_kind == dl._DatasetKind.Map
    assert isinstance(loader._index_sampler, m.utils.data.BatchSampler)
    it = dl._SingleProcessDataLoaderIter(loader)
    assert len(it) == 3
    got = [_np(y).tolist() for _, y in it]
    loader.generator.manual_seed(1)
    assert got == [_np(y).tolist() for _, y in loader]
    # the same order torch's loader gives for that generator
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(10.0).reshape(5, 2), torch.arange(5)),
                                     batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(1))
    assert got == [y.tolist() for _, y in tl]


def test_iterable_dataset_index_sampler_and_fetchers():
    class Stream(tapelab.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(5))

    class TStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(5))

    for m, ds in ((torch, TStream()), (tapelab, Stream())):
        dl = _loader_module(m)
        loader = m.utils.data.DataLoader(ds, batch_size=2, drop_last=True)
        assert loader._dataset_kind == dl._DatasetKind.Iterable
        assert [_np(b).tolist() for b in dl._SingleProcessDataLoaderIter(loader)] == [[0, 1], [2, 3]]
        # torch.utils.data._utils.fetch is tapelab.utils.data.fetch under install_aliases
        fetch = importlib.import_module("torch.utils.data._utils.fetch" if m is torch else "tapelab.utils.data.fetch")
        f = fetch._MapDatasetFetcher([10, 11, 12], True, list, False)
        assert f.fetch([2, 0]) == [12, 10]
        f = fetch._IterableDatasetFetcher(range(3), True, list, True)
        assert f.fetch([None, None]) == [0, 1]
        with pytest.raises(StopIteration):
            f.fetch([None, None])


def test_multi_process_iterator_runs_a_loader_like_object():
    dl = _loader_module(tapelab)
    fake = _fake_loader(tapelab, 2, num_workers=1)
    fake.multiprocessing_context = "fork"
    got = [(_np(x).tolist(), _np(y).tolist()) for x, y in dl._MultiProcessingDataLoaderIter(fake)]
    assert got == [([0.0, 1.0, 2.0, 3.0], [0]), ([10.0, 11.0, 12.0, 13.0], [1])]


# ---------------------------------------------------------------- torch._utils
@BOTH
def test_flatten_and_unflatten_dense_tensors(m):
    u = importlib.import_module(f"{m.__name__}._utils")
    a, b, c = m.arange(6.0).reshape(2, 3).t(), m.zeros(0, 2), m.arange(4.0)
    flat = u._flatten_dense_tensors([a, b, c])
    assert tuple(flat.shape) == (10,) and flat.is_contiguous()
    assert _np(flat).tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0, 0.0, 1.0, 2.0, 3.0]
    parts = u._unflatten_dense_tensors(flat, [a, b, c])
    assert isinstance(parts, tuple) and [tuple(p.shape) for p in parts] == [(3, 2), (0, 2), (4,)]
    assert parts[0]._base is flat
    np.testing.assert_array_equal(_np(parts[0]), _np(a))
    one = m.ones(2, 3)
    assert u._flatten_dense_tensors([one])._base is one
    with pytest.raises(ValueError, match="expected a non-empty list of Tensors"):
        u._flatten_dense_tensors([])


# ---------------------------------------------------------------- subclasses
def _meta_class(m, name):
    """fastai's TensorBase pattern: ``__new__`` returns ``as_subclass(cls)`` with metadata attributes."""
    def __new__(cls, x, **kwargs):
        res = m.as_tensor(x).as_subclass(cls)
        for k, v in kwargs.items():
            setattr(res, k, v)
        return res
    return type(m.Tensor)(name, (m.Tensor,), {"__new__": __new__, "__module__": __name__, "__qualname__": name})


@pytest.fixture(params=["torch", "tapelab"])
def sub(request):
    """(module, subclass), the class reachable by pickle as a module global while the test runs, and
    gone (collected) after it: a live subclass that takes part keeps tapelab's dispatcher on its
    slow path, which other tests check is off."""
    m = torch if request.param == "torch" else tapelab
    name = f"Meta_{request.param}"
    cls = globals()[name] = _meta_class(m, name)
    yield m, cls
    del globals()[name], cls
    if m is tapelab:
        gc.collect()


def test_subclass_new_returning_a_finished_tensor_keeps_it(sub):
    m, cls = sub
    t = cls(m.tensor([3, 4]), tag="x")
    assert type(t) is cls and t.dtype == m.int64 and _np(t).tolist() == [3, 4] and t.tag == "x"
    assert m.Tensor([1, 2]).dtype == m.float32 and tuple(m.Tensor(2, 3).shape) == (2, 3)
    assert tuple(m.Tensor().shape) == (0,)


def test_subclass_saves_and_pickles_with_its_attributes(sub):
    m, cls = sub
    t = cls(m.arange(6.0).reshape(2, 3), img_size=(2, 3))
    buf = io.BytesIO()
    m.save({"t": t, "v": t.view(6)}, buf)
    buf.seek(0)
    back = m.load(buf, weights_only=False)
    assert type(back["t"]) is cls and back["t"].img_size == (2, 3)
    np.testing.assert_array_equal(_np(back["t"]), _np(t))
    assert type(back["v"]) is cls and not hasattr(back["v"], "img_size")
    p = pickle.loads(pickle.dumps(t))
    assert type(p) is cls and p.img_size == (2, 3) and _np(p).tolist() == _np(t).tolist()
    assert type(pickle.loads(pickle.dumps(m.ones(2)))) is m.Tensor


def test_subclass_loss_backward_gives_plain_gradients(sub):
    m, cls = sub
    m.manual_seed(0)
    lin = m.nn.Linear(3, 1)
    with m.no_grad():
        lin.weight.copy_(m.tensor([[0.5, -1.0, 2.0]]))
        lin.bias.fill_(0.1)
    x = m.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
    out = lin(x).as_subclass(cls)
    loss = ((out - m.tensor([[1.0], [2.0]])) ** 2).mean()
    assert type(loss) is cls
    loss.backward()
    for p in lin.parameters():
        assert type(p.grad) is m.Tensor
        p.grad.detach_()
        p.grad.zero_()
        assert float(p.grad.abs().sum()) == 0.0


def test_subclass_loss_gradients_equal_torchs():
    def grads(m):
        cls = _meta_class(m, "Meta")
        lin = m.nn.Linear(3, 1)
        with m.no_grad():
            lin.weight.copy_(m.tensor([[0.5, -1.0, 2.0]]))
            lin.bias.fill_(0.1)
        x = m.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
        ((lin(x).as_subclass(cls) - 1) ** 2).sum().backward()
        return _np(lin.weight.grad), _np(lin.bias.grad)
    for a, b in zip(grads(torch), grads(tapelab)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    gc.collect()


@BOTH
def test_tensor_constructor_of_a_tensor_is_an_alias(m):
    """``torch.Tensor(t)`` aliases ``t`` (its dtype and memory), as PyTorch's legacy constructor."""
    a = m.tensor([3, 4])
    t = m.Tensor(a)
    assert type(t) is m.Tensor and t.dtype == m.int64 and t._base is a and t.data_ptr() == a.data_ptr()
    a.add_(1)
    assert _np(m.Tensor(a)).tolist() == [4, 5]
    f = m.ones(2, requires_grad=True)
    c = m.Tensor(f)
    assert c.requires_grad and c.grad_fn is not None
    (c * 3).sum().backward()
    assert _np(f.grad).tolist() == [3.0, 3.0]


# ---------------------------------------------------------------- __torch_function__'s func
def _recording_class(m, name, seen, opt=None):
    """A subclass whose handler records (func, types) and, as fastai's TensorBase, treats the calls
    registered in ``opt`` (keyed on PyTorch's callables) as plain Tensor calls."""
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        seen.append((func, [t.__name__ for t in types]))
        if opt is not None and func in opt:
            types = (m.Tensor,)
        return m.Tensor.__torch_function__.__func__(cls, func, types, args, kwargs or {})
    return type(m.Tensor)(name, (m.Tensor,), {"__torch_function__": classmethod(__torch_function__),
                                              "__module__": __name__})


@BOTH
def test_handler_gets_pytorchs_callables_for_methods_and_operators(m):
    seen = []
    cls = _recording_class(m, "Rec", seen)
    x, y = m.arange(6.0).reshape(2, 3).as_subclass(cls), m.ones(2, 3)
    T = m.Tensor
    cases = [(lambda: x + y, T.add, "add"), (lambda: y + x, T.add, "add"), (lambda: x + 1, T.add, "add"),
             (lambda: x.view(6), T.view, "view"), (lambda: x[0], T.__getitem__, "__getitem__"),
             (lambda: x * x, T.mul, "mul"), (lambda: 1 - x, T.__rsub__, "__rsub__"), (lambda: y - x, T.sub, "sub"),
             (lambda: x == y, T.__eq__, "__eq__"), (lambda: x / 2, T.div, "div"), (lambda: x.float(), T.float, "float"),
             (lambda: x.mean(), T.mean, "mean"), (lambda: x.permute(1, 0), T.permute, "permute"),
             (lambda: x.__iadd__(0), T.add_, "add_"), (lambda: x.__setitem__(0, 1.0), T.__setitem__, "__setitem__"),
             (lambda: x @ y.t(), T.matmul, "matmul")]
    for call, func, name in cases:
        seen.clear()
        call()
        assert seen and seen[0][0] is func and seen[0][0].__name__ == name and seen[0][1] == ["Rec"], (name, seen[:1])
    del cls, seen, x
    if m is tapelab:
        gc.collect()


@BOTH
def test_registered_pairs_of_unrelated_subclasses_combine(m):
    """fastai: ``TensorImage + TensorMask`` is handled because ``Tensor.add`` is registered for the pair."""
    seen = []
    opt = {m.Tensor.add: [], m.Tensor.__getitem__: []}
    img, mask = _recording_class(m, "Img", seen, opt), _recording_class(m, "Mask", seen, opt)
    a, b = m.ones(2).as_subclass(img), m.full((2,), 2.0).as_subclass(mask)
    r = a + b
    assert type(r) is img and _np(r).tolist() == [3.0, 3.0]
    with pytest.raises(TypeError):
        a * b   # not registered: neither type handles the other
    mx = m.tensor([[1.0, 5.0], [7.0, 2.0]]).as_subclass(img).max(dim=1)
    assert type(mx.values) is img and type(mx.indices) is img and _np(mx.indices).tolist() == [1, 0]
    del img, mask, a, b, r, mx, seen, opt
    if m is tapelab:
        gc.collect()


# ---------------------------------------------------------------- torch.save(pickle_module=cloudpickle)
_SCALE = 3.0


@BOTH
def test_save_with_cloudpickle_keeps_local_functions_and_tensors(m):
    """fastai's ``Learner.export`` saves the whole learner with ``pickle_module=cloudpickle``."""
    cloudpickle = pytest.importorskip("cloudpickle")

    def local_fn(x):   # a local function: only cloudpickle pickles it (by value)
        return x * _SCALE

    lin = m.nn.Linear(2, 1)
    buf = io.BytesIO()
    m.save({"fn": local_fn, "model": lin, "t": m.arange(4.0)}, buf, pickle_module=cloudpickle)
    buf.seek(0)
    back = m.load(buf, weights_only=False)
    assert _np(back["fn"](m.ones(2))).tolist() == [3.0, 3.0]
    assert _np(back["t"]).tolist() == [0.0, 1.0, 2.0, 3.0] and type(back["model"]) is m.nn.Linear
    np.testing.assert_array_equal(_np(back["model"].weight), _np(lin.weight))
    with pytest.raises(pickle.PicklingError if m is tapelab else (pickle.PicklingError, AttributeError)):
        m.save({"fn": local_fn}, io.BytesIO())
    with pytest.raises(AttributeError):
        m.save({"t": m.ones(1)}, io.BytesIO(), pickle_module=object())


# ---------------------------------------------------------------- non-writable numpy arrays
def test_sharing_a_non_writable_array_warns_once_as_torch():
    """fastai's ``as_tensor(df.values)`` prints PyTorch's warning (once per process) under torch."""
    import warnings
    from tapelab.core import creation
    a = np.arange(3.0)
    a.flags.writeable = False
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        torch.from_numpy(a)
    creation._NOT_WRITABLE_WARNED.clear()
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        tapelab.tensor(a)                    # a copy: no warning
        t = tapelab.as_tensor(a)
        tapelab.from_numpy(a)                # once per process
    assert len(ours) == 1 and ours[0].category is UserWarning and ours[0].filename == __file__
    assert str(ours[0].message).startswith("The given NumPy array is not writable, and PyTorch does not support "
                                           "non-writable tensors.")
    if theirs:   # torch warns once per process too: compare when this was its first time
        assert str(theirs[0].message).startswith(str(ours[0].message))
    assert _np(t).tolist() == [0.0, 1.0, 2.0]


@BOTH
def test_composite_function_hands_itself_to_program_subclasses(m):
    """fastai's affine augmentation: ``F.grid_sample(TensorImage, TensorFlowField)`` reaches the handler
    as ``F.grid_sample`` (registered for that pair), not as the ops inside it."""
    seen = []
    F = m.nn.functional
    opt = {F.grid_sample: []}
    img, flow = _recording_class(m, "Img", seen, opt), _recording_class(m, "Flow", seen, opt)
    x = m.arange(16.0).reshape(1, 1, 4, 4).as_subclass(img)
    g = m.tensor([[[[-0.5, -0.5], [0.5, 0.25]]]]).as_subclass(flow)
    out = F.grid_sample(x, g, align_corners=False)
    assert seen[0][0] is F.grid_sample and seen[0][1] == ["Img", "Flow"]
    assert type(out) is img
    ref = torch.nn.functional.grid_sample(torch.arange(16.0).reshape(1, 1, 4, 4),
                                          torch.tensor([[[[-0.5, -0.5], [0.5, 0.25]]]]), align_corners=False)
    np.testing.assert_allclose(_np(out), ref.numpy(), rtol=1e-6)
    del img, flow, x, g, out, seen, opt
    if m is tapelab:
        gc.collect()
