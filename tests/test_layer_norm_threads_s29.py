"""layer_norm's backward at one to three threads against torch 2.13's at the same count, bit for bit: ATen
cuts the rows into ``ceil(rows / threads)``-row parts, each summing the weight's and bias's gradients into
a buffer of its own, then adds the buffers in order, so at two threads those two gradients differ from one
thread's (checked below, so the test can tell the cut from no cut). Row counts even, odd, fewer than the
threads, and sizes above and below the split's minimum (``kernels.PARALLEL_MIN``); the forward's saved
statistics and the watched backward's recomputed ones; with and without the affine parameters."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from _threads import thread_counts

pytest.importorskip("numba")


threads = thread_counts([1, 2, 3], loops=True)


def _bitwise(ours, theirs) -> None:
    theirs = theirs.detach().numpy()
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert np.array_equal(ours.view(np.int32), theirs.view(np.int32))


def _grads(lib, x, g, w, b):
    """(gx, gw, gb) of ``layer_norm`` over the last dim, through ``lib``'s autograd."""
    tx = lib.tensor(x, requires_grad=True)
    tw = lib.tensor(w, requires_grad=True) if w is not None else None
    tb = lib.tensor(b, requires_grad=True) if b is not None else None
    y = lib.nn.functional.layer_norm(tx, (x.shape[-1],), tw, tb, 1e-5)
    y.backward(lib.tensor(g))
    return tx.grad, None if tw is None else tw.grad, None if tb is None else tb.grad


@pytest.mark.parametrize("shape", [(16, 64, 128), (1023, 40), (3, 5), (1, 64), (2, 9), (5, 3, 17), (301, 129)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("watched", [False, True])
def test_backward_is_torch_bit_for_bit(threads, shape, affine, watched):
    """``watched``: under the profiler the forward keeps no statistics and the backward recomputes them."""
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    c = shape[-1]
    w = rng.standard_normal(c).astype(np.float32) if affine else None
    b = rng.standard_normal(c).astype(np.float32) if affine else None
    if watched:
        with tapelab.profiler.profile() as prof:
            ours = _grads(tapelab, x, g, w, b)
        assert any(e.key == "aten::native_layer_norm_backward" for e in prof.key_averages())
    else:
        ours = _grads(tapelab, x, g, w, b)
    theirs = _grads(torch, x, g, w, b)
    for o, t in zip(ours, theirs):
        if t is not None:
            _bitwise(o.numpy(), t)


def test_the_cut_changes_torch_floats():
    """At two threads torch's weight gradient is not one thread's (so the test above can fail where the
    rows are not cut as ATen cuts them), and tapelab follows it at each count."""
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((1024, 128)).astype(np.float32), rng.standard_normal((1024, 128)).astype(np.float32)
    w, b = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    was, was_torch = tapelab.get_num_threads(), torch.get_num_threads()
    try:
        got = {}
        for n in (1, 2):
            tapelab.set_num_threads(n)
            torch.set_num_threads(n)
            got[n] = _grads(tapelab, x, g, w, b)[1].numpy(), _grads(torch, x, g, w, b)[1]
    finally:
        torch.set_num_threads(was_torch)
        tapelab.set_num_threads(was)
    assert not np.array_equal(got[1][1].numpy(), got[2][1].numpy())
    for ours, theirs in got.values():
        _bitwise(ours, theirs)


def test_loop_parts_add_each_parts_sums_in_order():
    """``layer_norm_backward_parts``: the weight and bias gradients are each part's sums (the whole loop's
    over that part's rows alone) added in order, the input's gradient the whole loop's (a row's own
    arithmetic); one part is the whole loop's floats."""
    loops = kernels.loops("rowwise")
    rng = np.random.default_rng(3)
    R, C = 7, 24
    x, g = rng.standard_normal((R, C)).astype(np.float32), rng.standard_normal((R, C)).astype(np.float32)
    w = rng.standard_normal(C).astype(np.float32)
    mean, rstd = np.empty(R, np.float32), np.empty(R, np.float32)
    loops.layer_norm_stats(x, np.float32(1e-5), mean, rstd)
    whole = np.empty_like(x), np.zeros(C, np.float32), np.zeros(C, np.float32)
    loops.layer_norm_backward(g, x, w, True, mean, rstd, *whole)
    for chunk, cuts in ((R, (0, R)), (10, (0, R)), (4, (0, 4, 7)), (3, (0, 3, 6, 7))):
        got = np.empty_like(x), np.zeros(C, np.float32), np.zeros(C, np.float32)
        loops.layer_norm_backward_parts(g, x, w, True, mean, rstd, *got, chunk)
        want_w, want_b = np.zeros(C, np.float32), np.zeros(C, np.float32)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            part = np.empty((hi - lo, C), np.float32), np.zeros(C, np.float32), np.zeros(C, np.float32)
            loops.layer_norm_backward(g[lo:hi], x[lo:hi], w, True, mean[lo:hi], rstd[lo:hi], *part)
            want_w += part[1]
            want_b += part[2]
        assert np.array_equal(got[0], whole[0])
        assert np.array_equal(got[1], want_w) and np.array_equal(got[2], want_b)
        if len(cuts) == 2:
            assert np.array_equal(got[1], whole[1]) and np.array_equal(got[2], whole[2])
        else:
            assert not np.array_equal(got[1], whole[1])
