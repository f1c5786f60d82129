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
