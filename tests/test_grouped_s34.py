"""Grouped (not depthwise) stride-1 convolutions as per-tap GEMMs over a flat channels-last grid
(``nn/_grouped.py``, ``kernels/grouped.py``): values and gradients against torch in float64, bias, a broadcast
output gradient, every thread count the same floats, NaN and inf reaching only the taps that meet them, and the
shapes the route leaves to im2col (width dilation, stride 2, output padding, group widths off the vector sizes)."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.nn import _grouped
from _depthwise import run as _run
from _threads import thread_counts

threads = thread_counts([1, 2], loops=True)

_CASES = [  # (N, C, O, H, W, k, groups, padding, dilation)
    (2, 24, 24, 9, 8, 3, 3, 1, 1),          # RegNetX: group width 8
    (3, 56, 56, 7, 7, 3, 7, 1, 1),
    (2, 16, 32, 6, 9, 3, 2, 1, 1),          # 8 in, 16 out a group
    (2, 64, 32, 5, 5, 3, 2, 0, 1),          # 32 in, 16 out, unpadded
    (2, 32, 16, 9, 7, 5, 2, 2, 1),          # 5x5: 16 in, 8 out
    (2, 32, 64, 8, 8, 3, 2, (2, 1), (2, 1)),  # dilated down, padded unevenly by dims
    (1, 128, 128, 4, 4, 3, 2, 1, 1),        # 64 a group
    (2, 48, 96, 5, 6, 1, 3, 0, 1),          # 1x1 grouped, 16 in, 32 out
]


def _data(case, seed=0):
    n, c, o, h, w_, k, g, p, d = case
    rng = np.random.default_rng(seed + sum(map(ord, str(case))))
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((o, c // g, k, k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    kw = dict(padding=p, dilation=d, groups=g)
    with torch.no_grad():
        shape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).shape
    return x, w, b, rng.standard_normal(tuple(shape)).astype(np.float32), kw


def _routed(x, w, kw):
    pads = tuple((p, p) for p in np.broadcast_to(kw["padding"], 2))
    return _grouped.fits(np, x, w, (1, 1), pads, tuple(np.broadcast_to(kw["dilation"], 2)), kw["groups"],
                         w.shape[0] // kw["groups"])


@pytest.mark.parametrize("case", _CASES, ids=str)
def test_matches_torch_in_float64(case, threads):
    x, w, b, gy, kw = _data(case)
    assert _routed(x, w, kw)
    got = _run(tapelab, x, w, b, gy, np.float32, **kw)
    want = _run(torch, x, w, b, gy, np.float64, **kw)
    for a, e in zip(got, want):
        assert a.dtype == np.float32 and a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-6 * float(np.abs(e).max()))


@pytest.mark.parametrize("case", _CASES[:3] + _CASES[5:6], ids=str)
def test_two_threads_give_one_threads_floats(case):
    x, w, b, gy, kw = _data(case, seed=1)
    kernels.set_enabled(True)
    before = tapelab.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            tapelab.set_num_threads(n)
            results.append(_run(tapelab, x, w, b, gy, np.float32, **kw))
    finally:
        tapelab.set_num_threads(before)
    for a, e in zip(*results):
        np.testing.assert_array_equal(a, e)


def test_a_broadcast_output_gradient(threads):
    x, w, b, _, kw = _data(_CASES[0])
    grads = []
    for lib in (tapelab, torch):
        xt, wt = lib.from_numpy(x.copy()).requires_grad_(), lib.from_numpy(w.copy()).requires_grad_()
        lib.nn.functional.conv2d(xt, wt, None, **kw).sum().backward()
        grads.append((xt.grad.numpy(), wt.grad.numpy()))
    for a, e in zip(*grads):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * float(np.abs(e).max()))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_inf_reach_only_the_taps_that_meet_them(bad, threads):
    """An inf in the input's last column meets, in the flat grid, the output rows past the output's width
    (dropped, their gradients zero): 0 * inf there must not reach the weight gradient's other taps."""
    x, w, b, gy, kw = _data(_CASES[0])
    x[0, 3, 4, -1] = bad
    got = _run(tapelab, x, w, b, gy, np.float32, **kw)
    want = _run(torch, x, w, b, gy, np.float32, **kw)
    for a, e in zip(got, want):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
        np.testing.assert_array_equal(np.isinf(a), np.isinf(e))
        fine = np.isfinite(e)
        np.testing.assert_allclose(a[fine], e[fine], rtol=1e-4, atol=1e-4 * float(np.abs(e[fine]).max()))


@pytest.mark.parametrize("kw", [dict(groups=2, padding=1, dilation=(1, 2)), dict(groups=2, padding=1, stride=2),
                                dict(groups=8, padding=1)], ids=["width-dilated", "stride-2", "width-2"])
def test_other_grouped_shapes_match_torch(kw, threads):
    """Dilated and width-2 groups (im2col's) and stride 2 (the grouped path's since session 35)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 7, 8)).astype(np.float32)
    w = rng.standard_normal((16, 16 // kw["groups"], 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    with torch.no_grad():
        shape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).shape
    gy = rng.standard_normal(tuple(shape)).astype(np.float32)
    got = _run(tapelab, x, w, b, gy, np.float32, **kw)
    want = _run(torch, x, w, b, gy, np.float64, **kw)
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-6 * float(np.abs(e).max()))


def test_a_grouped_transposed_convolution_with_output_padding(threads):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 5, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    outs = []
    for lib, dt in ((tapelab, np.float32), (torch, np.float64)):
        xt, wt = lib.from_numpy(x.astype(dt)).requires_grad_(), lib.from_numpy(w.astype(dt)).requires_grad_()
        y = lib.nn.functional.conv_transpose2d(xt, wt, None, stride=1, padding=1, groups=2)
        y.backward(lib.from_numpy(np.ones(tuple(y.shape), dt)))
        outs.append([y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    for a, e in zip(*outs):
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-6 * float(np.abs(e).max()))


def test_float64_gradcheck_keeps_its_path():
    rng = np.random.default_rng(5)
    x = tapelab.from_numpy(rng.standard_normal((1, 16, 4, 4))).requires_grad_()
    w = tapelab.from_numpy(rng.standard_normal((16, 8, 3, 3))).requires_grad_()
    assert tapelab.autograd.gradcheck(lambda a, b: tapelab.nn.functional.conv2d(a, b, padding=1, groups=2), (x, w))


@pytest.mark.parametrize("case", [(4, 56, 56, 12, 12, 3, 7, 1, 1), (2, 152, 152, 8, 8, 3, 19, 1, 1)], ids=str)
def test_group_width_8_forward_and_weight_gradient_are_torchs_floats(case):
    """RegNetX's 3x3s: each output sums its taps in order, a kernel row's taps then channels, one fused
    multiply-add each, as torch's cpu kernel does here (the input gradient differs from torch's by rounding)."""
    x, w, _, gy, kw = _data(case, seed=2)
    kernels.set_enabled(True)
    before = tapelab.get_num_threads(), torch.get_num_threads()
    tapelab.set_num_threads(1)
    torch.set_num_threads(1)
    try:
        got, want = (_run(lib, x, w, np.zeros(w.shape[0]), gy, np.float32, **kw) for lib in (tapelab, torch))
    finally:
        tapelab.set_num_threads(before[0])
        torch.set_num_threads(before[1])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[2], want[2])
