"""split/chunk/unbind's backward writes the pieces' gradients into one tensor: each piece's columns, cut
over the threads above the grain (``pointwise.put_cols``), or numpy's assignment; PyTorch's values either way."""
import numpy as np
import pytest
import torch

import tapelab as tl


def _grads(shape, dim, split, keep, threads):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    a, b = tl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    old = tl.get_num_threads()
    tl.set_num_threads(threads)
    try:
        for t, lib in ((a, tl), (b, torch)):
            pieces = t.split(split, dim) if split else t.unbind(dim)
            total = 0
            for i, p in enumerate(pieces):
                if keep(i):
                    total = total + (p * lib.tensor(np.full(p.shape, i + 1.5, np.float32))).sum()
            total.backward()
    finally:
        tl.set_num_threads(old)
    return a.grad.numpy(), b.grad.numpy()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,dim,split", [
    ((8, 64, 1152), 2, 384),            # GPT's qkv: above the grain, split over the threads
    ((8, 64, 1152), -1, [100, 500, 552]),
    ((64, 300, 6), 1, [7, 293]),       # a middle dim
    ((6, 5), 0, 2),                    # dim 0: the pieces are whole blocks
    ((4, 6, 3), 1, None),              # unbind
])
def test_all_pieces(shape, dim, split, threads):
    ours, theirs = _grads(shape, dim, split, lambda i: True, threads)
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("shape,dim,split", [((8, 64, 1152), 2, 384), ((4, 6, 3), 1, None)])
def test_missing_piece_is_zero(shape, dim, split):
    ours, theirs = _grads(shape, dim, split, lambda i: i != 1, 2)
    assert np.array_equal(ours, theirs)


def test_float64_pieces():
    x = torch.randn(4, 10, dtype=torch.float64)
    a, b = tl.tensor(x.numpy(), requires_grad=True), x.clone().requires_grad_()
    for t in (a, b):
        q, k = t.split(5, 1)
        (q * 2 + k * 3).sum().backward()
    assert np.array_equal(a.grad.numpy(), b.grad.numpy())
