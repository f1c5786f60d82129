"""log_softmax over a middle dim, and cross-entropy / NLL with the class dim 1 of (N, C, L) and (N, C, H, W)
inputs (segmentation, sequence models), are PyTorch's float32 values and gradients bit for bit (issue 17,
session 34: ATen's blocked non-last-dim log_softmax loops in kernels/rowwise.py)."""
import numpy as np
import pytest
import torch

import tapelab as tl

from _bits import differing_bits as _bits
from _threads import thread_counts


threads = thread_counts([1, 2])


SHAPES = [(4, 10, 1), (4, 37, 7), (2, 21, 33, 17), (3, 5, 40), (2, 1000, 70), (8, 3, 16), (1, 7, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_dim_1(threads, shape, reduction, weighted):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    t = rng.integers(0, shape[1], (shape[0],) + shape[2:])
    w = rng.uniform(0.1, 2, shape[1]).astype(np.float32) if weighted else None
    out = []
    for lib in (torch, tl):
        xs = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(xs, lib.tensor(t), None if w is None else lib.tensor(w),
                                               reduction=reduction)
        loss.backward(lib.ones_like(loss) if reduction == "none" else None)
        out.append([loss.detach().numpy(), xs.grad.numpy()])
    assert [_bits(a, b) for a, b in zip(*out)] == [0, 0]


@pytest.mark.parametrize("shape,dim", [((4, 37, 7), 1), ((2, 21, 33, 17), 1), ((3, 5, 6, 40), 2), ((6, 9, 5), 0)])
def test_log_softmax_middle_dim(threads, shape, dim):
    rng = np.random.default_rng(len(shape) + dim)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    out = []
    for lib in (torch, tl):
        xs = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.log_softmax(xs, dim)
        y.backward(lib.tensor(g))
        out.append([y.detach().numpy(), xs.grad.numpy()])
    assert [_bits(a, b) for a, b in zip(*out)] == [0, 0]


def test_nll_loss_class_dim_1_of_log_softmax(threads):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 11, 19)).astype(np.float32)
    t = rng.integers(0, 11, (3, 19))
    out = []
    for lib in (torch, tl):
        xs = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.nll_loss(lib.nn.functional.log_softmax(xs, 1), lib.tensor(t))
        loss.backward()
        out.append([loss.detach().numpy(), xs.grad.numpy()])
    assert [_bits(a, b) for a, b in zip(*out)] == [0, 0]


def test_middle_dim_float64_gradcheck():
    x = tl.tensor(np.random.default_rng(4).standard_normal((2, 5, 3)), requires_grad=True)
    assert tl.autograd.gradcheck(lambda t: tl.nn.functional.log_softmax(t, 1), (x,))
    assert tl.autograd.gradgradcheck(lambda t: tl.nn.functional.log_softmax(t, 1), (x,))
