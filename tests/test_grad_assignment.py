"""Assigning ``.grad`` is checked as PyTorch checks it (issue 16, defect 3): a gradient of another
size, dtype or device, or not a Tensor, is refused at the assignment with PyTorch's exception
type, instead of being broadcast by every optimizer step afterwards."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl

BAD = [
    ("size", lambda m: m.ones(1), RuntimeError, "size '[1]' to a tensor of size '[3]'"),
    ("rank", lambda m: m.ones(3, 1), RuntimeError, "size '[3, 1]'"),
    ("dtype", lambda m: m.ones(3, dtype=m.float64), RuntimeError, "dtype"),
    ("integer dtype", lambda m: m.ones(3, dtype=m.int64), RuntimeError, "dtype"),
    ("not a tensor", lambda m: 3, TypeError, "expected to be a Tensor or None but got grad of type int"),
]


@pytest.mark.parametrize("what,make,exc,text", BAD, ids=[b[0] for b in BAD])
def test_bad_grad_is_refused_like_torch(what, make, exc, text):
    w = torch.zeros(3, requires_grad=True)
    with pytest.raises(exc):
        w.grad = make(torch)
    p = tl.zeros(3, requires_grad=True)
    with pytest.raises(exc, match=text.replace("[", r"\[").replace("]", r"\]")):
        p.grad = make(tl)
    assert p.grad is None   # the refused value was not kept


def test_good_grad_and_none_are_accepted_and_used_by_the_optimizer():
    p = tl.nn.Parameter(tl.zeros(3))
    p.grad = tl.ones(3)
    tl.optim.SGD([p], lr=0.5).step()
    np.testing.assert_allclose(p.detach().numpy(), [-0.5, -0.5, -0.5])
    p.grad = None
    assert p.grad is None


def test_a_device_mismatch_is_refused():
    from tapelab._backend import simulated_cuda
    with simulated_cuda():
        p = tl.zeros(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="same device"):
            p.grad = tl.ones(3, device="cuda")


def test_backward_casts_a_gradient_of_another_dtype_to_the_output_dtype_like_torch():
    for m in (torch, tl):
        x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
        (x * 2).backward(m.ones(3))          # a float32 gradient for a float64 output
        assert x.grad.dtype == m.float64
        np.testing.assert_array_equal(x.grad.detach().numpy(), [2.0, 2.0, 2.0])
