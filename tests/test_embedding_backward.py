"""embedding's backward: the sorted segment sum equals ``np.add.at`` (and PyTorch) bit for bit,
and falls back to ``add.at`` for small gradients and very skewed ids."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab.nn import _ops


@pytest.mark.parametrize("shape, num, pad", [((16, 64, 128), 65, None), ((8, 64, 96), 65, 3),
                                             ((2, 300, 16), 5000, None), ((4, 2048, 8), 2, None),
                                             ((3, 5, 4), 7, None)])
def test_embedding_grad_bit_identical(shape, num, pad):
    rng = np.random.default_rng(sum(shape) + num)
    idx = rng.integers(0, num, shape[:-1])
    w = rng.standard_normal((num, shape[-1])).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    tw = tapelab.tensor(w, requires_grad=True)
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
    assert not _ops._segment_sum(np, res, flat, g)
    assert not res.any()
