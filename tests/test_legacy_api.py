"""Pre-0.4 PyTorch spellings that old programs and tutorials still use: ``autograd.Variable``,
``Tensor.type`` with legacy types and names, ``Tensor.new``; against the torch in the venv."""
import warnings

import numpy as np
import pytest
import torch

import tapelab


@pytest.mark.parametrize("lib", [tapelab, torch], ids=["tapelab", "torch"])
def test_variable_is_a_detached_alias_with_requires_grad(lib):
    base = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = base * 2
    v = lib.autograd.Variable(z.data)
    assert v.grad_fn is None and not v.requires_grad
    leaf = lib.autograd.Variable(lib.tensor([1.0, 2.0, 3.0]), requires_grad=True)
    assert leaf.is_leaf and leaf.requires_grad
    (leaf * leaf).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [2.0, 4.0, 6.0])
    shared = lib.autograd.Variable(z.detach())
    shared[0] = 7.0                                     # the same memory as its data
    assert float(z[0]) == 7.0
    assert isinstance(lib.ones(2), lib.autograd.Variable)
    assert not isinstance([1.0], lib.autograd.Variable)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        lib.autograd.Variable([1.0, 2.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib.autograd.Variable(lib.ones(1), volatile=True)
    assert any("volatile was removed" in str(w.message) for w in caught)


def test_type_names_and_casts_match_torch():
    x, r = tapelab.randn(3, 3), torch.randn(3, 3)
    assert x.type() == r.type() == "torch.FloatTensor"
    assert x.long().type() == r.long().type() == "torch.LongTensor"
    for legacy in ("DoubleTensor", "LongTensor", "ByteTensor", "FloatTensor"):
        assert str(x.type(getattr(tapelab, legacy)).dtype).split(".")[1] == \
            str(r.type(getattr(torch, legacy)).dtype).split(".")[1]
        assert x.type(f"torch.{legacy}").dtype == x.type(getattr(tapelab, legacy)).dtype
    assert x.type(tapelab.FloatTensor) is x                    # no cast needed: the same tensor
    assert x.type(tapelab.float64).dtype is tapelab.float64


def test_tensor_new_matches_torch():
    x, r = tapelab.ones(2, dtype=tapelab.float64), torch.ones(2, dtype=torch.float64)
    for args in [(), (2, 3), ([1.0, 2.0],), ((4,),)]:
        a, b = x.new(*args), r.new(*args)
        assert tuple(a.shape) == tuple(b.shape) and a.dtype is tapelab.float64
        if args and isinstance(args[0], list):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert x.new(tapelab.Size([2, 2])).shape == (2, 2)
    same = x.new(x)
    same[0] = 5.0
    assert float(x[0]) == 5.0
    with pytest.raises(TypeError):
        x.new(tapelab.ones(2))                                 # float32 into a float64 new


@pytest.mark.parametrize("name", ["uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
                                  "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"])
def test_deprecated_init_names_warn_and_call_the_underscore_form(name):
    shape = (4, 2, 3) if name == "dirac" else (6, 5)
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(name, ())
    for lib in (tapelab, torch):
        w = lib.empty(shape)
        with pytest.warns(FutureWarning, match=f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`"):
            out = getattr(lib.nn.init, name)(w, *args)
        assert out is w
    if name in ("eye", "dirac", "constant"):          # deterministic: the same values as torch's
        t, r = tapelab.empty(shape), torch.empty(shape)
        getattr(tapelab.nn.init, name + "_")(t, *args)
        getattr(torch.nn.init, name + "_")(r, *args)
        np.testing.assert_array_equal(t.numpy(), r.numpy())


@pytest.mark.parametrize("shape, groups", [((6, 3, 3), 1), ((6, 2, 3, 3), 2), ((4, 4, 1, 3, 3), 1), ((2, 5, 3, 3), 1)])
def test_dirac_matches_torch(shape, groups):
    t, r = tapelab.empty(shape), torch.empty(shape)
    tapelab.nn.init.dirac_(t, groups)
    torch.nn.init.dirac_(r, groups)
    np.testing.assert_array_equal(t.numpy(), r.numpy())
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
        tapelab.nn.init.dirac_(tapelab.empty(3, 3))


def test_sparse_init_zeroes_the_same_count_per_column_as_torch():
    t, r = tapelab.empty(10, 7), torch.empty(10, 7)
    tapelab.nn.init.sparse_(t, 0.35, std=0.5)
    torch.nn.init.sparse_(r, 0.35, std=0.5)
    assert ((t == 0).sum(0).tolist() == (r == 0).sum(0).tolist() == [4] * 7)
    assert 0.2 < float(t[t != 0].std()) < 1.0
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        tapelab.nn.init.sparse_(tapelab.empty(2, 2, 2), 0.1)


def test_clip_grad_norm_deprecated_name():
    ps = [tapelab.nn.Parameter(tapelab.ones(3)), tapelab.nn.Parameter(tapelab.ones(4))]
    rs = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(4))]
    for p, r in zip(ps, rs):
        p.grad, r.grad = tapelab.full(p.shape, 2.0), torch.full(r.shape, 2.0)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        n = tapelab.nn.utils.clip_grad_norm(ps, 1.0)
    with pytest.warns(FutureWarning):
        m = torch.nn.utils.clip_grad_norm(rs, 1.0)
    assert float(n) == pytest.approx(float(m))
    np.testing.assert_allclose(ps[0].grad.numpy(), rs[0].grad.numpy(), rtol=1e-6)


def test_resize_matches_torch():
    for lib in (tapelab, torch):
        x = lib.arange(6.0)
        assert x.resize_(2, 3) is x and tuple(x.shape) == (2, 3)
        assert x.resize_((4,)).tolist() == [0.0, 1.0, 2.0, 3.0]
        x.resize_(3, 3)
        assert x.reshape(-1)[:4].tolist() == [0.0, 1.0, 2.0, 3.0] and tuple(x.shape) == (3, 3)
        assert tuple(lib.zeros(2).resize_as_(lib.zeros(5, 2)).shape) == (5, 2)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            lib.zeros(2, requires_grad=True).resize_(4)


def test_cuda_legacy_types():
    for name in ("FloatTensor", "LongTensor", "ByteTensor"):
        cls, ref = getattr(tapelab.cuda, name), getattr(torch.cuda, name)
        assert cls.is_cuda and str(cls.dtype).split(".")[1] == str(ref.dtype).split(".")[1]
        assert not isinstance(tapelab.ones(2, dtype=cls.dtype), cls)
    if not tapelab.cuda.is_available():
        with pytest.raises(TypeError, match="type torch.cuda.FloatTensor not available"):
            tapelab.cuda.FloatTensor(2)
