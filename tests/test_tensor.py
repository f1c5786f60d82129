"""Tensor core: construction, dtype inference, conversion, repr and random — against torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl


def _dt(t):
    return str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("data", [[1, 2, 3], [1.5, 2.0], [True, False], 3, 2.5, [[1, 2], [3, 4]], [],
                                  np.arange(3, dtype=np.int32), np.ones(2, np.float64), np.array(True)])
def test_tensor_infers_dtype_and_shape_like_torch(data):
    a, b = tl.tensor(data), torch.tensor(data)
    assert _dt(a) == _dt(b)
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("make", [
    lambda m: m.zeros(2, 3), lambda m: m.ones((2, 3), dtype=m.int32), lambda m: m.full((2,), 7),
    lambda m: m.full((2,), 7.0), lambda m: m.full((2,), True), lambda m: m.arange(5), lambda m: m.arange(0, 1, 0.25),
    lambda m: m.arange(1, 10, 3), lambda m: m.arange(5.0), lambda m: m.linspace(0, 1, 5), lambda m: m.eye(3),
    lambda m: m.eye(2, 4), lambda m: m.zeros_like(m.ones(2, dtype=m.int64)), lambda m: m.ones_like(m.ones(3)),
    lambda m: m.full_like(m.zeros(2), 3.5), lambda m: m.empty(3, 2).shape, lambda m: m.scalar_tensor(2),
    lambda m: m.logspace(0, 2, 3),
])
def test_creation_matches_torch(make):
    a, b = make(tl), make(torch)
    if isinstance(b, torch.Size):
        assert tuple(a) == tuple(b)
        return
    assert _dt(a) == _dt(b) and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_repr_matches_torch():
    cases = [lambda m: m.tensor([1.0, 2.5, -3.0]), lambda m: m.tensor([1, 2, 3]),
             lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]), lambda m: m.tensor(3.25),
             lambda m: m.tensor([True, False]), lambda m: m.tensor([1.0, 2.0], dtype=m.float64),
             lambda m: m.tensor([1, 2], dtype=m.int32), lambda m: m.tensor([1.0, 2.0], requires_grad=True),
             lambda m: m.zeros(0), lambda m: m.tensor([1e-5, 1.0]), lambda m: m.tensor([0.1234567, 10.5])]
    for make in cases:
        assert repr(make(tl)).replace("tapelab.", "torch.") == repr(make(torch))


def test_repr_of_non_leaf_names_grad_fn():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"


def test_conversions():
    t = tl.tensor([[1.5, 2.5], [3.5, 4.5]])
    assert t.tolist() == [[1.5, 2.5], [3.5, 4.5]]
    assert t[0, 1].item() == 2.5 if hasattr(t, "__getitem__") else True
    assert float(tl.tensor(2.5)) == 2.5 and int(tl.tensor(3)) == 3 and bool(tl.tensor(1))
    assert np.asarray(t).shape == (2, 2)
    assert t.numpy() is t._data
    with pytest.raises(RuntimeError, match="requires grad"):
        tl.ones(2, requires_grad=True).numpy()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(tl.ones(2))
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        tl.ones(2).item()
    with pytest.raises(TypeError, match="0-d"):
        len(tl.tensor(1.0))


def test_dlpack_round_trip_with_torch():
    a = tl.arange(6.0).reshape(2, 3)
    b = torch.from_dlpack(a)
    assert b.tolist() == a.tolist()
    c = tl.from_dlpack(torch.arange(4))
    assert c.tolist() == [0, 1, 2, 3] and c.dtype is tl.int64


def test_from_numpy_shares_memory():
    arr = np.zeros(3, np.float32)
    t = tl.from_numpy(arr)
    arr[0] = 5
    assert t[0].item() == 5 if hasattr(t, "__getitem__") else t.tolist()[0] == 5


def test_to_and_dtype_methods():
    t = tl.tensor([1.7, -2.2])
    assert t.long().tolist() == torch.tensor([1.7, -2.2]).long().tolist()
    assert t.double().dtype is tl.float64 and t.half().dtype is tl.float16 and t.bool().dtype is tl.bool
    assert t.to(tl.float32) is t
    assert t.to("cpu") is t
    assert t.to(t) is t
    assert t.type() == "torch.FloatTensor"   # PyTorch's spelling: programs compare the string
    assert t.to(tl.float64, copy=True).dtype is tl.float64


def test_cast_is_differentiable():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = (x.double() * 3).sum()
    y.backward()
    assert x.grad.dtype is tl.float32 and x.grad.tolist() == [3.0, 3.0]


def test_requires_grad_rules():
    with pytest.raises(RuntimeError, match="floating point"):
        tl.tensor([1, 2]).requires_grad_()
    x = tl.ones(2, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)
    assert (x.long() + 1).requires_grad is False


def test_size_and_metadata():
    t = tl.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and repr(t.shape) == "tapelab.Size([2, 3, 4])"
    assert t.size(-1) == 4 and t.dim() == 3 and t.ndim == 3 and t.numel() == 24
    assert t.stride() == torch.zeros(2, 3, 4).stride()
    assert t.is_contiguous() and t.is_floating_point() and t.element_size() == 4
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.size(3)


def test_manual_seed_reproducible_and_generator_independent():
    tl.manual_seed(123)
    a = tl.randn(5)
    tl.manual_seed(123)
    assert tl.randn(5).tolist() == a.tolist()
    g = tl.Generator().manual_seed(7)
    g2 = tl.Generator().manual_seed(7)
    assert tl.rand(3, generator=g).tolist() == tl.rand(3, generator=g2).tolist()
    state = tl.get_rng_state()
    x = tl.rand(4)
    tl.set_rng_state(state)
    assert tl.rand(4).tolist() == x.tolist()


def test_random_distributions():
    tl.manual_seed(0)
    n = tl.randn(20000)
    assert abs(n.numpy().mean()) < 0.03 and abs(n.numpy().std() - 1) < 0.03
    u = tl.rand(20000).numpy()
    assert u.min() >= 0 and u.max() < 1
    r = tl.randint(3, 7, (1000,))
    assert r.dtype is tl.int64 and r.numpy().min() == 3 and r.numpy().max() == 6
    p = tl.randperm(10)
    assert sorted(p.tolist()) == list(range(10)) and p.dtype is tl.int64
    nm = tl.normal(tl.zeros(3) + 5, 0.001)
    assert np.allclose(nm.numpy(), 5, atol=0.01)
    bern = tl.bernoulli(tl.full((1000,), 0.3))
    assert bern.dtype is tl.float32 and 0.2 < bern.numpy().mean() < 0.4
    with pytest.raises(RuntimeError, match="from=5 >= to=5"):
        tl.randint(5, 5, (2,))


def test_bad_creation_inputs():
    with pytest.raises(RuntimeError, match="negative dimension"):
        tl.zeros(-1)
    with pytest.raises(TypeError):
        tl.zeros(2.5)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        tl.arange(0, 1, 0)
    with pytest.raises(RuntimeError, match="same device|device"):
        tl.device("tpu")


def test_default_dtype():
    tl.set_default_dtype(tl.float64)
    try:
        assert tl.tensor([1.5]).dtype is tl.float64 and tl.zeros(1).dtype is tl.float64
        assert (tl.tensor([1, 2]) * 0.5).dtype is tl.float64
    finally:
        tl.set_default_dtype(tl.float32)
    with pytest.raises(TypeError):
        tl.set_default_dtype(tl.int32)


def test_finfo_iinfo():
    for d in ("float16", "float32", "float64"):
        assert tl.finfo(getattr(tl, d)).eps == torch.finfo(getattr(torch, d)).eps
    assert tl.iinfo(tl.int32).max == torch.iinfo(torch.int32).max


def test_device_objects():
    assert tl.device("cpu") is tl.device("cpu") and tl.device("cpu") == "cpu"
    assert str(tl.device("cuda:1")) == "cuda:1" and repr(tl.device("cpu")) == "device(type='cpu')"
    assert tl.ones(1).device == tl.device("cpu") and not tl.ones(1).is_cuda
    assert tl.cuda.is_available() in (True, False)


def test_linalg_qr_matches_torch():
    a = np.random.default_rng(0).standard_normal((5, 3))
    q, r = tl.linalg.qr(tl.tensor(a))
    tq, tr = torch.linalg.qr(torch.tensor(a))
    np.testing.assert_allclose(np.abs(q.numpy()), np.abs(tq.numpy()), atol=1e-10)
    np.testing.assert_allclose(np.abs(r.numpy()), np.abs(tr.numpy()), atol=1e-10)
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, atol=1e-10)
    assert tuple(tl.linalg.qr(tl.tensor(a), mode="complete").Q.shape) == (5, 5)
