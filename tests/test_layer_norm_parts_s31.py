"""layer_norm's backward parts run at once (``rowwise.layer_norm_backward_chunks`` over ranges of parts,
``kernels.parallel_ranges``): any split of the parts into ranges gives the parts-in-order floats, each
part's sums lie on cache lines of their own, and at two threads above the split's minimum the op's three
gradients are torch's bit for bit."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels

pytest.importorskip("numba")


def _case(R, C, seed=5):
    rng = np.random.default_rng(seed)
    x, g = rng.standard_normal((R, C)).astype(np.float32), rng.standard_normal((R, C)).astype(np.float32)
    w = rng.standard_normal(C).astype(np.float32)
    mean, rstd = np.empty(R, np.float32), np.empty(R, np.float32)
    kernels.loops("rowwise").layer_norm_stats(x, np.float32(1e-5), mean, rstd)
    return x, g, w, mean, rstd


@pytest.mark.parametrize("R, C, chunk, ranges", [(9, 24, 3, ((0, 1), (1, 3))), (10, 5, 4, ((0, 2), (2, 3))),
                                                 (7, 40, 2, ((0, 3), (3, 4)))])
@pytest.mark.parametrize("has_w", [True, False])
def test_ranges_of_parts_are_the_parts_in_order(R, C, chunk, ranges, has_w):
    loops = kernels.loops("rowwise")
    x, g, w, mean, rstd = _case(R, C)
    w = w if has_w else np.ones(C, np.float32)
    want = np.empty_like(x), np.zeros(C, np.float32), np.zeros(C, np.float32)
    loops.layer_norm_backward_parts(g, x, w, has_w, mean, rstd, *want, chunk)
    gx, gw, gb = np.full_like(x, np.nan), np.zeros(C, np.float32), np.zeros(C, np.float32)
    sums = loops.layer_norm_part_sums(R, C, chunk)
    sums[:] = np.nan                                         # each part zeroes its own sums
    for lo, hi in reversed(ranges):                          # the ranges' order does not matter
        loops.layer_norm_backward_chunks(g, x, w, has_w, mean, rstd, gx, sums, chunk, lo, hi)
    loops.layer_norm_add_parts(sums, gw, gb)
    for got, ref in zip((gx, gw, gb), want):
        assert np.array_equal(got.view(np.int32), ref.view(np.int32))


@pytest.mark.parametrize("C", [1, 16, 24, 384])
def test_each_parts_sums_on_lines_of_their_own(C):
    """Part ``p``'s last sum ends at least 64 bytes before part ``p + 1``'s first starts."""
    sums = kernels.loops("rowwise").layer_norm_part_sums(10, C, 3)
    assert sums.shape[:2] == (4, 2) and sums.shape[2] >= C
    gap = sums.strides[0] - (sums.strides[1] + C * sums.itemsize)
    assert gap >= 64


def test_two_threads_above_the_split_are_torchs_floats():
    """512 x 384 (above ``kernels.PARALLEL_MIN``) at two threads, where the parts run at once."""
    old, was, was_torch = kernels.set_enabled(True), tapelab.get_num_threads(), torch.get_num_threads()
    try:
        tapelab.set_num_threads(2)
        torch.set_num_threads(2)
        x, g, w, _, _ = _case(512, 384, seed=11)
        b = np.random.default_rng(12).standard_normal(384).astype(np.float32)
        got = []
        for lib in (tapelab, torch):
            ts = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
            lib.nn.functional.layer_norm(ts[0], (384,), ts[1], ts[2], 1e-5).backward(lib.tensor(g))
            got.append([np.asarray(t.grad.detach().numpy() if lib is torch else t.grad.numpy()) for t in ts])
        for ours, theirs in zip(*got):
            assert np.array_equal(ours.view(np.int32), theirs.view(np.int32))
    finally:
        torch.set_num_threads(was_torch)
        tapelab.set_num_threads(was)
        kernels.set_enabled(old)
