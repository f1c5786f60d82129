"""Depthwise convolutions at strides other than 1 (``kernels/depthwise.py``'s 16-plane channels-last tiles),
dilation, padding modes, channel counts that leave a partial block of 16 or make a block cross images, and
grouped (not depthwise) convolutions: values and gradients against torch; planes computed alone (the same
floats whatever block or thread they land in); NaN and inf reach only the taps that meet them."""
import numpy as np
import pytest
import torch

import tapelab
from _depthwise import close as _close, run as _run

_CASES = [  # (N, C, H, W, k, stride, padding, dilation)
    (2, 17, 15, 13, 3, 2, 1, 1), (3, 33, 9, 10, 5, 2, 2, 1), (2, 6, 16, 16, 3, (2, 1), 1, 1),
    (1, 20, 17, 14, 3, 3, 2, 2), (2, 8, 12, 12, 7, 2, 3, 1), (2, 5, 11, 9, 4, (1, 3), (0, 2), (2, 1)),
    (4, 3, 6, 6, 3, 2, 0, 1),
]


def _data(case, out_per_group=1, groups=None, seed=0):
    n, c, h, w_, k, s, p, d = case
    groups = groups or c
    rng = np.random.default_rng(seed + sum(map(ord, str(case))))
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((groups * out_per_group, c // groups, k, k)).astype(np.float32)
    kw = dict(stride=s, padding=p, dilation=d, groups=groups)
    with torch.no_grad():
        oshape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).shape
    return x, w, rng.standard_normal(tuple(oshape)).astype(np.float32), kw


def _with_threads(threads, fn):
    before = tapelab.get_num_threads()
    tapelab.set_num_threads(threads)
    try:
        return fn()
    finally:
        tapelab.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", _CASES)
def test_strided_depthwise_matches_torch(case, threads):
    x, w, g, kw = _data(case)
    b = np.linspace(-1, 1, x.shape[1], dtype=np.float32)
    got = _with_threads(threads, lambda: _run(tapelab, x, w, b, g, **kw))
    _close(got, _run(torch, x, w, b, g, **kw))


def test_a_plane_has_the_same_floats_in_any_block_and_thread():
    """Blocks of 16 planes cross images (C = 20): each image alone, the batch on one and on two threads."""
    x, w, g, kw = _data((3, 20, 13, 13, 3, 2, 1, 1))
    whole = [_with_threads(t, lambda: _run(tapelab, x, w, None, g, **kw)) for t in (1, 2)]
    for a, b in zip(*whole):
        assert np.array_equal(a, b)
    for i in range(x.shape[0]):
        alone = _run(tapelab, x[i:i + 1], w, None, g[i:i + 1], **kw)
        assert np.array_equal(alone[0], whole[0][0][i:i + 1])
        assert np.array_equal(alone[1], whole[0][1][i:i + 1])


@pytest.mark.parametrize("mode", ["reflect", "circular", "replicate"])
def test_padding_modes_stride_2(mode):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 12, 11, 10)).astype(np.float32)
    res = []
    for lib in (torch, tapelab):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(12, 12, 3, stride=2, padding=1, groups=12, padding_mode=mode)
        if lib is tapelab:
            conv.weight.data = tapelab.from_numpy(res[0][3].copy())
            conv.bias.data = tapelab.from_numpy(res[0][4].copy())
        xt = lib.from_numpy(x.copy()).requires_grad_()
        y = conv(xt)
        (y * y).sum().backward()
        res.append([y.detach().numpy(), xt.grad.numpy(), conv.weight.grad.numpy(),
                    conv.weight.detach().numpy(), conv.bias.detach().numpy()])
    _close(res[1][:3], res[0][:3])


def test_channels_last_input_stride_2():
    """A permuted (not contiguous) input and output gradient."""
    x, w, g, kw = _data((2, 16, 12, 12, 3, 2, 1, 1))
    xs, gs = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(g.transpose(0, 2, 3, 1))
    res = []
    for lib in (torch, tapelab):
        xt = lib.from_numpy(xs.copy()).permute(0, 3, 1, 2).detach().requires_grad_()
        wt = lib.from_numpy(w.copy()).requires_grad_()
        y = lib.nn.functional.conv2d(xt, wt, **kw)
        y.backward(lib.from_numpy(gs.copy()).permute(0, 3, 1, 2))
        res.append([y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    _close(res[1], res[0])


@pytest.mark.parametrize("stride,dilation,padding", [(3, 2, 2), (2, 1, 0), (1, 1, 2)])
def test_conv_transpose_depthwise(stride, dilation, padding):
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 18, 6, 7)).astype(np.float32), rng.standard_normal((18, 1, 3, 3)).astype(np.float32)
    res = []
    for lib in (torch, tapelab):
        xt, wt = lib.from_numpy(x.copy()).requires_grad_(), lib.from_numpy(w.copy()).requires_grad_()
        y = lib.nn.functional.conv_transpose2d(xt, wt, stride=stride, padding=padding, output_padding=stride - 1,
                                               dilation=dilation, groups=18)
        y.backward(lib.from_numpy(np.linspace(-1, 1, y.numel(), dtype=np.float32).reshape(tuple(y.shape))))
        res.append([y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    _close(res[1], res[0])


@pytest.mark.parametrize("stride,dilation", [(1, 1), (2, 1), (3, 2)])
def test_non_finite_inputs_reach_only_the_taps_that_meet_them(stride, dilation):
    """A NaN at a corner and an inf inside (at stride 1 the flat weight gradient's gap columns meet them:
    that channel is summed again from real products)."""
    rng = np.random.default_rng(33)
    x = rng.standard_normal((2, 18, 10, 9)).astype(np.float32)
    x[0, 1, 0, 8], x[1, 17, 4, 4], x[1, 16, 9, 0] = np.nan, np.inf, -np.inf
    w = rng.standard_normal((18, 1, 3, 3)).astype(np.float32)
    got = {}
    for lib in (tapelab, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(xt, wt, padding=2, stride=stride, dilation=dilation, groups=18)
        y.sum().backward()
        got[lib] = (y.detach().numpy(), wt.grad.numpy(), xt.grad.numpy())
    for ours, theirs in zip(got[tapelab], got[torch]):
        np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("groups,out_per_group,stride", [(2, 1, 1), (4, 2, 2), (8, 1, 2), (32, 1, 1)])
def test_grouped_convolution_matches_torch(groups, out_per_group, stride):
    x, w, g, kw = _data((2, 64, 10, 9, 3, stride, 1, 1), out_per_group, groups)
    _close(_run(tapelab, x, w, None, g, **kw), _run(torch, x, w, None, g, **kw))


@pytest.mark.parametrize("groups,stride,dilation", [(3, 2, 1), (6, 3, 2), (2, 1, 2)])
def test_float64_gradcheck(groups, stride, dilation):
    rng = np.random.default_rng(9)
    x = tapelab.from_numpy(rng.standard_normal((2, 6, 8, 7))).requires_grad_()
    w = tapelab.from_numpy(rng.standard_normal((6, 6 // groups, 3, 3))).requires_grad_()
    f = lambda a, b: tapelab.nn.functional.conv2d(a, b, stride=stride, padding=1, dilation=dilation, groups=groups)
    assert tapelab.autograd.gradcheck(f, (x, w))
