"""embedding's backward equals ``np.add.at`` (and PyTorch) bit for bit, in the scatter loop and,
without the loops, in the sorted segment sum (which falls back to ``add.at`` for small gradients and
very skewed ids)."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.ops import indexing


@pytest.mark.parametrize("shape, num, pad", [((16, 64, 128), 65, None), ((8, 64, 96), 65, 3),
                                             ((2, 300, 16), 5000, None), ((4, 2048, 8), 2, None),
                                             ((3, 5, 4), 7, None)])
@pytest.mark.parametrize("loops", [True, False], ids=["loops", "numpy"])
def test_embedding_grad_bit_identical(shape, num, pad, loops):
    rng = np.random.default_rng(sum(shape) + num)
    idx = rng.integers(0, num, shape[:-1])
    w = rng.standard_normal((num, shape[-1])).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    tw = tapelab.tensor(w, requires_grad=True)
    kernels.set_enabled(loops)
    tapelab.nn.functional.embedding(tapelab.tensor(idx), tw, padding_idx=pad).backward(tapelab.tensor(g))
    pw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx), pw, padding_idx=pad).backward(torch.tensor(g))
    ref = np.zeros_like(w)
    np.add.at(ref, idx.ravel(), g.reshape(-1, shape[-1]))
    if pad is not None:
        ref[pad] = 0
    assert np.array_equal(tw.grad.numpy(), ref)
    assert np.array_equal(tw.grad.numpy(), pw.grad.numpy())


def test_segment_sum_declines_skewed_ids():
    flat = np.zeros(5000, np.int64)
    flat[:10] = np.arange(10)
    g = np.ones((5000, 2), np.float32)
    res = np.zeros((10, 2), np.float32)
    assert not indexing._segment_sum(np, res, flat, g)
    assert not res.any()


@pytest.mark.parametrize("padding_idx", [None, 0])
def test_scale_grad_by_freq_divides_each_rows_gradient_by_its_count_as_pytorch(padding_idx):
    """Each looked-up row's gradient is divided by how often its index occurs in the batch
    (word-frequency scaling in language models); the module form passes the flag through."""
    rng = np.random.default_rng(3)
    w, idx, up = rng.standard_normal((7, 4)), np.array([[1, 2, 1], [4, 1, 0]]), rng.standard_normal((2, 3, 4))
    grads = []
    for lib in (torch, tapelab):
        weight = lib.tensor(w, requires_grad=True)
        emb = lib.nn.Embedding.from_pretrained(weight, freeze=False, padding_idx=padding_idx, scale_grad_by_freq=True)
        (emb(lib.tensor(idx)) * lib.tensor(up)).sum().backward()
        grads.append(emb.weight.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
    # the second derivative (through the upstream gradient) by finite differences: PyTorch's own
    # double backward of embedding_dense_backward leaves the 1/count factor out, so gradcheck is the reference
    W = tapelab.tensor(w, requires_grad=True)

    def first(V):
        out = tapelab.nn.functional.embedding(tapelab.tensor(idx), W, padding_idx=padding_idx, scale_grad_by_freq=True)
        return tapelab.autograd.grad((out * V).sum(), W, create_graph=True)[0]
    assert tapelab.autograd.gradcheck(first, (tapelab.tensor(up, requires_grad=True),))


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    """Each row's gradient divided by its index's count over the whole input, as the documentation
    of both libraries says (PyTorch 2.13's CPU embedding_bag divides rows that occur once by the
    largest count instead, so the reference here is numpy); max mode refuses, as PyTorch's does."""
    w, idx, off = np.random.default_rng(0).standard_normal((6, 3)), np.array([1, 2, 1, 4, 1, 0]), np.array([0, 2, 4])
    up = np.arange(9.0).reshape(3, 3) + 1
    weight = tapelab.tensor(w, requires_grad=True)
    out = tapelab.nn.functional.embedding_bag(tapelab.tensor(idx), weight, tapelab.tensor(off), mode=mode,
                                              scale_grad_by_freq=True)
    (out * tapelab.tensor(up)).sum().backward()
    sizes = np.diff(np.append(off, len(idx)))
    bag_of = np.repeat(np.arange(3), sizes)
    per_entry = up[bag_of] / (sizes[bag_of][:, None] if mode == "mean" else 1)
    want = np.zeros_like(w)
    np.add.at(want, idx, per_entry / np.bincount(idx)[idx][:, None])
    np.testing.assert_allclose(weight.grad.numpy(), want, rtol=1e-12)
    with pytest.raises(ValueError, match="max mode does not support scaling"):
        tapelab.nn.functional.embedding_bag(tapelab.tensor(idx), weight, tapelab.tensor(off), mode="max",
                                            scale_grad_by_freq=True)
