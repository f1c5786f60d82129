"""The fast paths of nn's conv/pool/batch_norm give PyTorch's results: non-overlapping pooling
(reshape to blocks, no indices) including ties and NaN, 1x1 and grouped convolutions, second order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from test_nn_layers import arr, close

TF = torch.nn.functional
LF = tl.nn.functional


def _run(lib, F, fn, arrays, create_graph=False):
    ins = [lib.tensor(a, requires_grad=True) for a in arrays]
    y = fn(F, *ins)
    g = np.random.default_rng(3).standard_normal(tuple(y.shape))
    grads = lib.autograd.grad(y, ins, lib.tensor(g), create_graph=create_graph)
    res = [y.detach().numpy().copy()] + [gr.detach().numpy().copy() for gr in grads]
    if create_graph:
        sum(gr.pow(2).sum() for gr in grads).backward()
        res += [a.grad.numpy().copy() if a.grad is not None else np.zeros_like(x) for a, x in zip(ins, arrays)]
    return res


def _both(fn, *arrays, create_graph=False, tol=1e-9):
    for a, b in zip(_run(tl, LF, fn, arrays, create_graph), _run(torch, TF, fn, arrays, create_graph)):
        close(a, b, tol)


def _relu_ties(*shape):
    """Post-ReLU data: many windows are all zeros, so the gradient's tie-breaking shows."""
    x = np.maximum(arr(*shape), 0)
    x[0, 0, :2, :2] = 1.5                    # an all-equal non-zero window
    return x


@pytest.mark.parametrize("kernel", [2, (2, 3), 1])
def test_block_max_pool2d_matches_torch_with_ties(kernel):
    x = _relu_ties(2, 3, 6, 6)
    _both(lambda F, t: F.max_pool2d(t, kernel), x)
    _both(lambda F, t: F.max_pool2d(t.relu() * 2, kernel, ceil_mode=True), x, create_graph=True)


def test_block_max_pool1d_and_unbatched_match_torch():
    _both(lambda F, t: F.max_pool1d(t, 3), np.maximum(arr(2, 3, 9), 0))
    _both(lambda F, t: F.max_pool2d(t, 2), _relu_ties(1, 3, 4, 4)[0])


def test_block_max_pool_nan_and_inf():
    x = arr(1, 2, 4, 4)
    x[0, 0, 0, 1] = np.nan
    x[0, 1, 2:, 2:] = -np.inf
    for lib, F in ((tl, LF), (torch, TF)):
        t = lib.tensor(x, requires_grad=True)
        y = F.max_pool2d(t, 2)
        y.sum().backward()
        res = (y.detach().numpy(), t.grad.numpy())
        if lib is tl:
            mine = res
    close(mine[0], res[0])
    assert np.isnan(mine[0][0, 0, 0, 0]) and mine[1][0, 0, 0, 1] == 1 and mine[1][0, 0, :2, :2].sum() == 1
    close(mine[1][0, 1], res[1][0, 1])
    close(mine[1][0, 0, 2:], res[1][0, 0, 2:])


def test_block_max_pool_backward_zeros_are_plain_and_nonfinite_gradients_stay_put():
    """The backward multiplies the gradient by each offset's mask: no -0.0 where a negative
    gradient meets False, and an inf/NaN gradient reaches only its window's maximum (as in torch)."""
    x = _relu_ties(2, 3, 6, 6)
    g = -np.abs(arr(2, 3, 3, 3)) - 1
    g[0, 0, 0, 0], g[1, 2, 1, 1] = np.inf, np.nan
    got = []
    for lib, F in ((tl, LF), (torch, TF)):
        t = lib.tensor(x, requires_grad=True)
        F.max_pool2d(t, 2).backward(lib.tensor(g))
        got.append(t.grad.numpy())
    np.testing.assert_array_equal(got[0], got[1])
    assert not np.signbit(got[0][got[0] == 0]).any()


def test_block_max_pool_gradcheck_and_gradgradcheck():
    x = tl.tensor(arr(1, 2, 4, 6), requires_grad=True)
    fn = lambda t: LF.max_pool2d(t, 2)
    assert tl.autograd.gradcheck(fn, (x,))
    assert tl.autograd.gradgradcheck(fn, (x,))


def test_max_pool_return_indices_still_matches_torch():
    x = _relu_ties(2, 3, 6, 6)
    a, ia = LF.max_pool2d(tl.tensor(x), 2, return_indices=True)
    b, ib = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    close(a, b)
    assert (ia.numpy() == ib.numpy()).all()


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=(2, 3), divisor_override=5),
                                    dict(kernel_size=2, ceil_mode=True, count_include_pad=False)])
def test_block_avg_pool2d_matches_torch(kwargs):
    _both(lambda F, t: F.avg_pool2d(t * t, **kwargs), arr(2, 3, 6, 6), create_graph=True)


def test_block_adaptive_avg_pool_matches_torch():
    _both(lambda F, t: F.adaptive_avg_pool2d(t * t, (3, 2)), arr(2, 3, 6, 6), create_graph=True)


@pytest.mark.parametrize("kwargs,shapes", [
    (dict(), [(2, 4, 5, 6), (3, 4, 1, 1)]),                           # 1x1: no copy
    (dict(stride=2), [(2, 4, 5, 6), (3, 4, 1, 1)]),                   # strided 1x1
    (dict(padding=1, groups=2), [(2, 4, 5, 6), (6, 2, 3, 3)]),
    (dict(padding=1, groups=4), [(2, 4, 5, 5), (8, 1, 3, 3)]),        # depthwise
    (dict(stride=(2, 1), dilation=(2, 1), padding=(2, 0)), [(1, 3, 7, 6), (2, 3, 3, 2)]),
])
def test_conv2d_layouts_match_torch_second_order(kwargs, shapes):
    _both(lambda F, x, w: F.conv2d(x, w, **kwargs), *(arr(*s) for s in shapes), create_graph=True)


@pytest.mark.parametrize("fn,kwargs,shapes", [
    ("conv2d", dict(padding=1), [(2, 8, 5, 6), (8, 8, 3, 3)]),            # channels-last GEMM, flipped-kernel gx
    ("conv2d", dict(padding=1), [(2, 4, 5, 6), (8, 4, 3, 3)]),            # C < O: the flat scatter gx
    ("conv2d", dict(stride=2, padding=1), [(2, 5, 7, 6), (4, 5, 3, 3)]),  # strided: col2im gx
    ("conv2d", dict(padding="same", dilation=2), [(2, 6, 7, 6), (6, 6, 2, 3)]),  # asymmetric pads
    ("conv1d", dict(padding=2, dilation=2), [(2, 6, 9), (6, 6, 3)]),
    ("conv3d", dict(padding=1), [(1, 4, 4, 5, 3), (4, 4, 3, 3, 2)]),
    ("conv_transpose2d", dict(padding=1), [(2, 6, 5, 4), (6, 4, 3, 3)]),  # stride 1: a flipped conv
    ("conv_transpose2d", dict(padding=1, dilation=2, output_padding=1), [(2, 6, 5, 4), (6, 4, 3, 3)]),
])
def test_conv_channels_last_paths_match_torch_second_order(fn, kwargs, shapes):
    """groups == 1 with >= 4 input channels runs one 2-D GEMM over a channels-last im2col; results
    stay contiguous NCHW like PyTorch's."""
    _both(lambda F, x, w: getattr(F, fn)(x, w, **kwargs), *(arr(*s) for s in shapes), create_graph=True)
    y = getattr(LF, fn)(tl.tensor(arr(*shapes[0])), tl.tensor(arr(*shapes[1])), **kwargs)
    assert y.is_contiguous()


def test_conv_transpose_groups_second_order():
    _both(lambda F, x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=2),
          arr(2, 4, 3, 3), arr(4, 3, 3, 3), create_graph=True)


def test_conv_and_pool_in_float32_match_torch():
    x, w = arr(4, 3, 8, 8).astype(np.float32), arr(5, 3, 3, 3).astype(np.float32)
    _both(lambda F, x, w: F.max_pool2d(F.conv2d(x, w, padding=1).relu(), 2), x, w, tol=1e-4)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (6, 3), (3, 2, 7)])
def test_batch_norm_primitive_second_order_matches_torch(shape):
    x, w, b = arr(*shape), arr(shape[1]) + 1.5, arr(shape[1])
    fn = lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-3) ** 2
    _both(fn, x, w, b, create_graph=True, tol=1e-8)


def test_batch_norm_gradcheck_and_gradgradcheck():
    x, w, b = (tl.tensor(a, requires_grad=True) for a in (arr(3, 2, 2, 3), arr(2) + 1, arr(2)))
    fn = lambda x, w, b: LF.batch_norm(x, None, None, w, b, training=True) ** 3
    assert tl.autograd.gradcheck(fn, (x, w, b))
    assert tl.autograd.gradgradcheck(fn, (x, w, b))


def test_batch_norm_running_stats_and_float32_match_torch():
    x = arr(8, 4, 5, 5).astype(np.float32) * 3 + 1
    stats = []
    for lib in (tl, torch):
        bn = lib.nn.BatchNorm2d(4)
        t = lib.tensor(x, requires_grad=True)
        y = bn(t)
        (y * y.detach()).sum().backward()
        stats.append([bn.running_mean.numpy().copy(), bn.running_var.numpy().copy(), y.detach().numpy().copy(),
                      t.grad.numpy().copy(), bn.weight.grad.numpy().copy(), bn.bias.grad.numpy().copy()])
    for a, b in zip(*stats):
        close(a, b, 1e-4)
