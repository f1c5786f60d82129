"""Grouped convolutions at strides over 1 (the flat grid's rows dealt into the stride's phases; the input
gradient one stride-1 product per input phase) and at group width 4 (ResNeXt 32x4d: 4-float vectors; the weight
gradient two groups a product, their diagonal blocks kept), ``nn/_grouped.py``: values and gradients against
torch in float64, every thread count the same floats, NaN and inf reaching only what they meet."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.nn import _grouped
from _depthwise import run as _run
from _threads import thread_counts

threads = thread_counts([1, 2], loops=True)

_CASES = [  # (N, C, O, H, W, k, groups, stride, padding)
    (2, 64, 64, 11, 9, 3, 8, 2, 1),         # RegNetX's first block of a stage: width 8, stride 2
    (2, 128, 128, 8, 8, 3, 8, 2, 1),        # width 16, even size
    (3, 64, 64, 7, 10, 3, 16, 2, 1),        # width 4 (ResNeXt 32x4d's stride-2 block)
    (2, 32, 64, 10, 10, 3, 4, 2, 0),        # 8 in, 16 out a group, unpadded
    (2, 48, 48, 13, 12, 5, 6, 2, 2),        # 5x5
    (2, 16, 16, 9, 11, 3, 4, 3, 1),         # stride 3: a stride as wide as the kernel
    (2, 16, 32, 9, 9, 2, 2, 3, 0),          # stride 3 over a 2x2 kernel: phases with no taps
    (2, 128, 128, 9, 9, 3, 32, 1, 1),       # width 4, stride 1, 32 groups
    (2, 12, 12, 6, 7, 3, 3, 1, 1),          # width 4, odd groups (the weight gradient one group a product)
    (2, 24, 24, 7, 7, 3, 6, (2, 1), 1),     # strides differing by dims
]


def _kw(case):
    n, c, o, h, w_, k, g, s, p = case
    return dict(stride=s, padding=p, groups=g)


def _data(case, seed=0):
    n, c, o, h, w_, k, g, s, p = case
    rng = np.random.default_rng(seed + sum(map(ord, str(case))))
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((o, c // g, k, k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    with torch.no_grad():
        shape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **_kw(case)).shape
    return x, w, b, rng.standard_normal(tuple(shape)).astype(np.float32)


def _routed(case, x, w):
    n, c, o, h, w_, k, g, s, p = case
    stride, pads = tuple(np.broadcast_to(s, 2)), ((p, p), (p, p))
    return all(_grouped.fits(np, x, w, stride, pads, (1, 1), g, lanes) for lanes in (o // g, c // g))


@pytest.mark.parametrize("case", _CASES, ids=str)
def test_matches_torch_in_float64(case, threads):
    x, w, b, gy = _data(case)
    assert _routed(case, x, w)
    got = _run(tapelab, x, w, b, gy, np.float32, **_kw(case))
    want = _run(torch, x, w, b, gy, np.float64, **_kw(case))
    for a, e in zip(got, want):
        assert a.dtype == np.float32 and a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-6 * float(np.abs(e).max()))


@pytest.mark.parametrize("case", [_CASES[i] for i in (0, 2, 6, 7)], ids=str)
def test_two_threads_give_one_threads_floats(case):
    x, w, b, gy = _data(case, seed=1)
    kernels.set_enabled(True)
    before = tapelab.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            tapelab.set_num_threads(n)
            results.append(_run(tapelab, x, w, b, gy, np.float32, **_kw(case)))
    finally:
        tapelab.set_num_threads(before)
    for a, e in zip(*results):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("case", [_CASES[0], _CASES[2], _CASES[7]], ids=str)
def test_nan_and_inf_reach_only_what_they_meet(case, bad, threads):
    """A bad value in the input's last column: at stride 2 the grid's dropped columns and the paired width-4
    weight gradient's off-diagonal blocks meet it; neither may reach the other taps or groups."""
    x, w, b, gy = _data(case)
    x[0, 5, 4, -1] = bad
    got = _run(tapelab, x, w, b, gy, np.float32, **_kw(case))
    want = _run(torch, x, w, b, gy, np.float32, **_kw(case))
    for a, e in zip(got, want):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
        np.testing.assert_array_equal(np.isinf(a), np.isinf(e))
        fine = np.isfinite(e)
        np.testing.assert_allclose(a[fine], e[fine], rtol=1e-4, atol=1e-4 * float(np.abs(e[fine]).max()))


def test_a_broadcast_output_gradient_at_stride_2(threads):
    x, w, _, _ = _data(_CASES[0])
    grads = []
    for lib in (tapelab, torch):
        xt, wt = lib.from_numpy(x.copy()).requires_grad_(), lib.from_numpy(w.copy()).requires_grad_()
        lib.nn.functional.conv2d(xt, wt, None, **_kw(_CASES[0])).sum().backward()
        grads.append((xt.grad.numpy(), wt.grad.numpy()))
    for a, e in zip(*grads):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * float(np.abs(e).max()))


@pytest.mark.parametrize("output_padding", [0, 1])
def test_a_strided_grouped_transposed_convolution(output_padding, threads):
    """Its forward is the strided input gradient (with output padding: rows past the last window)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 32, 5, 6)).astype(np.float32)
    w = rng.standard_normal((32, 8, 3, 3)).astype(np.float32)
    outs = []
    for lib, dt in ((tapelab, np.float32), (torch, np.float64)):
        xt, wt = lib.from_numpy(x.astype(dt)).requires_grad_(), lib.from_numpy(w.astype(dt)).requires_grad_()
        y = lib.nn.functional.conv_transpose2d(xt, wt, None, stride=2, padding=1, output_padding=output_padding,
                                               groups=4)
        y.backward(lib.from_numpy(np.ones(tuple(y.shape), dt)))
        outs.append([y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    for a, e in zip(*outs):
        assert a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-6 * float(np.abs(e).max()))


def test_dilated_strided_convolutions_are_left_to_im2col_and_match_torch(threads):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 32, 11, 11)).astype(np.float32)
    w = rng.standard_normal((32, 8, 3, 3)).astype(np.float32)
    assert not _grouped.fits(np, x, w, (2, 2), ((2, 2), (2, 2)), (2, 1), 4, 8)
    b, kw = np.zeros(32, np.float32), dict(stride=2, padding=2, dilation=(2, 1), groups=4)
    with torch.no_grad():
        shape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).shape
    gy = rng.standard_normal(tuple(shape)).astype(np.float32)
    for a, e in zip(_run(tapelab, x, w, b, gy, np.float32, **kw), _run(torch, x, w, b, gy, np.float64, **kw)):
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-6 * float(np.abs(e).max()))


@pytest.mark.parametrize("case", [(4, 64, 12, 8, 2), (2, 152, 9, 19, 2), (2, 128, 10, 8, 2), (2, 128, 9, 32, 1),
                                  (2, 128, 9, 32, 2)], ids=str)
def test_forwards_and_strided_weight_gradients_are_torchs_floats(case):
    """Each output sums a kernel row's taps then its channels, one fused multiply-add each, as torch's cpu
    kernel does here (one thread, this host): the forward at group widths 4, 8, 16 (strides 1 and 2) and the
    weight gradient at widths 8 and 16, stride 2 (the input gradient differs from torch's by rounding)."""
    n, c, size, g, s = case
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = rng.standard_normal((c, c // g, 3, 3)).astype(np.float32)
    kw = dict(stride=s, padding=1, groups=g)
    with torch.no_grad():
        shape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).shape
    gy = rng.standard_normal(tuple(shape)).astype(np.float32)
    kernels.set_enabled(True)
    before = tapelab.get_num_threads(), torch.get_num_threads()
    tapelab.set_num_threads(1)
    torch.set_num_threads(1)
    try:
        got, want = (_run(lib, x, w, np.zeros(c, np.float32), gy, np.float32, **kw) for lib in (tapelab, torch))
    finally:
        tapelab.set_num_threads(before[0])
        torch.set_num_threads(before[1])
    np.testing.assert_array_equal(got[0], want[0])
    if c // g >= 8:
        np.testing.assert_array_equal(got[2], want[2])
