"""Batch norm's loops (engine/kernels/batchnorm.py) on the shapes their faster paths take, against
torch 2.13's ``native_batch_norm`` and ``native_batch_norm_backward`` bit for bit, at one and two
threads: rows of whole eight-lane vectors summed four samples at a time (``N`` a multiple of four
or not, rows of exactly one vector, rows with a partial last vector), each channel's gradient
written right after its sums, the statistics' float64 chains 16, 8 or one channel at a time (``C``
not a multiple of eight, ``L`` not of eight), the forward's output written per 16 channels, and the
split over channels at two threads (sizes over ``PARALLEL_MIN``)."""
import numpy as np
import pytest
import torch

from tapelab import kernels
from _threads import thread_counts

pytest.importorskip("numba")

SHAPES = [(16, 32, 16, 16), (5, 11, 8, 8), (7, 9, 1, 8), (6, 13, 24, 24), (3, 4, 2, 4), (9, 10, 5, 7), (6, 9, 14, 14),
          (5, 5, 1, 9), (4, 3, 1, 15), (11, 6, 7, 7), (3, 24, 5, 7), (4, 19, 3, 3), (2, 33, 4, 4)]


threads = thread_counts([1, 2], loops=True)


def _bitwise(ours, theirs) -> None:
    theirs = theirs.numpy()
    assert ours.dtype == theirs.dtype and np.array_equal(ours.view(np.int32), theirs.view(np.int32))


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_backward_loops_are_aten_bit_for_bit(threads, shape):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)          # an offset mean: centred sums matter
    g = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    bn = kernels.loops("batchnorm")
    ncl = (shape[0], c, -1)
    out, mean, var, unbiased, invstd = (np.empty(shape, np.float32),) + tuple(np.empty(c, np.float32) for _ in range(4))
    bn.forward(x.reshape(ncl), w, b, 1e-5, out.reshape(ncl), mean, var, unbiased, invstd)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    t_out, t_mean, t_invstd = torch.ops.aten.native_batch_norm(tx, tw, torch.from_numpy(b), None, None, True, 0.1, 1e-5)
    for ours, theirs in ((out, t_out), (mean, t_mean), (invstd, t_invstd)):
        _bitwise(ours, theirs)
    for saved in ((mean, invstd), (None, None)):                         # the forward's statistics, or recomputed
        gx, gw, gb = np.empty(shape, np.float32), np.empty(c, np.float32), np.empty(c, np.float32)
        bn.backward(g.reshape(ncl), x.reshape(ncl), w, 1e-5, gx.reshape(ncl), gw, gb, *saved)
        theirs = torch.ops.aten.native_batch_norm_backward(torch.from_numpy(g), tx, tw, None, None, t_mean, t_invstd,
                                                           True, 1e-5, [True, True, True])
        for ours, t in zip((gx, gw, gb), theirs):
            _bitwise(ours, t)


@pytest.mark.parametrize("shape", [(4, 24, 5, 7), (8, 16, 8, 8), (3, 9, 4, 4)])
def test_statistics_add_in_memory_order(threads, shape):
    """Values of 2^60 and -2^60 among small ones: a float64 sum that meets a small value next to a
    large one loses it, so the statistics (and what follows from them) are torch's only when every
    channel's values are added in ATen's order (ordinary data cannot tell the orders apart)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    big = x.reshape(shape[0], shape[1], -1)
    for c in range(shape[1]):
        at = rng.choice(shape[0] * big.shape[2], 4, replace=False)
        for sign, i in zip((1, -1, 1, -1), at):
            big[i // big.shape[2], c, i % big.shape[2]] = sign * np.float32(2.0 ** 60)
    c = shape[1]
    w, b = np.ones(c, np.float32), np.zeros(c, np.float32)
    ncl = (shape[0], c, -1)
    out, mean, var, unbiased, invstd = (np.empty(shape, np.float32),) + tuple(np.empty(c, np.float32) for _ in range(4))
    kernels.loops("batchnorm").forward(x.reshape(ncl), w, b, 1e-5, out.reshape(ncl), mean, var, unbiased, invstd)
    t_out, t_mean, t_invstd = torch.ops.aten.native_batch_norm(torch.from_numpy(x), torch.from_numpy(w),
                                                               torch.from_numpy(b), None, None, True, 0.1, 1e-5)
    assert len(np.unique(mean)) > 2                                     # the orders' losses differ by channel
    for ours, theirs in ((mean, t_mean), (invstd, t_invstd), (out, t_out)):
        _bitwise(ours, theirs)
