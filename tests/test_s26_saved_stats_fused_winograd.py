"""Issue 17, session 26: layer_norm's forward keeps its mean and 1/std for the backward (as ATen's
``native_layer_norm`` does) and the backward reads them; the Winograd F(2, 3) forward runs its three
stages an image at a time (``kernels/winograd.py`` ``conv_f23``). Both must leave every number as it was:
PyTorch's bits for the layer norm, the three passes' floats for the convolution."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.nn import _winograd

_RNG = np.random.default_rng(26)


@pytest.fixture
def one_thread():
    """Layer norm's weight and bias gradients are summed in one part per thread (ATen's cut, and ours): both on one."""
    torch.set_num_threads(1)
    tapelab.set_num_threads(1)


def _layer_norm_grads(m, x, w, b, g, shape, transpose=False):
    xt = m.tensor(x, requires_grad=True)
    weight = m.tensor(w, requires_grad=True) if w is not None else None
    bias = m.tensor(b, requires_grad=True) if b is not None else None
    inp = xt.transpose(0, 1) if transpose else xt
    out = m.nn.functional.layer_norm(inp, shape, weight, bias)
    out.backward(m.tensor(g))
    return [out.detach().numpy()] + [t.grad.numpy() for t in (xt, weight, bias) if t is not None]


@pytest.mark.parametrize("cols", [4, 8, 13, 128, 200])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_saved_statistics_backward_is_torchs_bit_for_bit(cols, affine, one_thread):
    """The backward from the forward's kept statistics (short rows, whole 8-lane vectors and tails)."""
    x = (_RNG.standard_normal((37, cols)) * 3 - 1).astype(np.float32)
    w = _RNG.standard_normal(cols).astype(np.float32) if affine != "none" else None
    b = _RNG.standard_normal(cols).astype(np.float32) if affine == "both" else None
    g = _RNG.standard_normal((37, cols)).astype(np.float32)
    for t, lab in zip(_layer_norm_grads(torch, x, w, b, g, (cols,)), _layer_norm_grads(tapelab, x, w, b, g, (cols,))):
        np.testing.assert_array_equal(lab, t)


def test_layer_norm_saved_statistics_of_a_transposed_input_over_two_dims(one_thread):
    """A non-contiguous input normalised over its two trailing dims: the kept statistics are the row-major
    copy's, as ATen's ``input.contiguous()``."""
    x = _RNG.standard_normal((6, 5, 4, 3)).astype(np.float32)
    w, b = _RNG.standard_normal((4, 3)).astype(np.float32), _RNG.standard_normal((4, 3)).astype(np.float32)
    g = _RNG.standard_normal((5, 6, 4, 3)).astype(np.float32)
    outs = [_layer_norm_grads(m, x, w, b, g, (4, 3), transpose=True) for m in (torch, tapelab)]
    for t, lab in zip(*outs):
        np.testing.assert_array_equal(lab, t)


def test_layer_norm_watched_backward_recomputes_the_same_bits(one_thread):
    """Under a tape the forward is the one named op (no kept statistics): its backward recomputes them and
    gives the kept statistics' gradients bit for bit."""
    x = _RNG.standard_normal((9, 64)).astype(np.float32)
    w, b = _RNG.standard_normal(64).astype(np.float32), _RNG.standard_normal(64).astype(np.float32)
    g = _RNG.standard_normal((9, 64)).astype(np.float32)
    plain = _layer_norm_grads(tapelab, x, w, b, g, (64,))
    with tapelab.tape() as t:
        watched = _layer_norm_grads(tapelab, x, w, b, g, (64,))
    assert [n.op for n in t.nodes].count("layer_norm") == 1
    for a, c in zip(plain, watched):
        np.testing.assert_array_equal(a, c)


def test_layer_norm_double_backward_through_kept_statistics():
    """create_graph: the pass-through op's vjp takes the differentiable formulas, so second derivatives
    match PyTorch's."""
    x = _RNG.standard_normal((5, 16)).astype(np.float32)
    w, b = _RNG.standard_normal(16).astype(np.float32), _RNG.standard_normal(16).astype(np.float32)
    res = []
    for m in (torch, tapelab):
        xt, wt, bt = (m.tensor(a, requires_grad=True) for a in (x, w, b))
        y = m.nn.functional.layer_norm(xt, (16,), wt, bt)
        gx, gw = m.autograd.grad((y * y.detach().sin()).sum(), (xt, wt), create_graph=True)
        (gx.pow(2).sum() + gw.pow(2).sum()).backward()
        res.append([t.grad.numpy() for t in (xt, wt)])   # the bias does not reach gx or gw
    for t, lab in zip(*res):
        np.testing.assert_allclose(lab, t, rtol=1e-4, atol=1e-5)


def _three_passes(x, y, ut, xp, pads, m, split):
    """The F(2, 3) forward as three passes over the block (the path before ``conv_f23``)."""
    th, tw = _winograd._tiles(y.shape[2:], m)
    v = _winograd._input_transform(xp, x, pads, m, th, tw, split)
    prod = _winograd._tap_gemm(xp, v, ut, split).reshape(16, -1)
    kernels.loops("winograd").output_f23_nchw(prod, y, 0, x.shape[0])


@pytest.mark.parametrize("n,c,o,h,w,pads", [(16, 32, 32, 16, 16, ((1, 1), (1, 1))), (3, 32, 16, 15, 13, ((1, 1), (1, 1))),
                                            (2, 48, 64, 9, 11, ((0, 0), (2, 1))), (5, 32, 48, 14, 14, ((1, 1), (1, 1)))])
def test_winograd_image_at_a_time_forward_equals_three_passes(n, c, o, h, w, pads, monkeypatch):
    """Odd sizes (a cropped last tile row and column), asymmetric padding, every output width the tap loop
    takes: the same floats as the three passes, and torch's convolution within float32 rounding."""
    x = _RNG.standard_normal((n, c, h, w)).astype(np.float32)
    k = _RNG.standard_normal((o, c, 3, 3)).astype(np.float32)
    bias = _RNG.standard_normal(o).astype(np.float32)
    fused = _winograd.conv3x3(np, x, k, pads, bias)
    monkeypatch.setattr(_winograd, "_conv_images", _three_passes)
    np.testing.assert_array_equal(fused, _winograd.conv3x3(np, x, k, pads, bias))
    (pt, pb), (pl, pr) = pads
    ref = torch.nn.functional.conv2d(torch.nn.functional.pad(torch.tensor(x), (pl, pr, pt, pb)), torch.tensor(k),
                                     torch.tensor(bias)).numpy()
    np.testing.assert_allclose(fused, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,c,o,h,w", [(16, 32, 32, 16, 16), (3, 32, 16, 12, 8), (5, 16, 48, 16, 12), (2, 64, 32, 8, 8)])
def test_winograd_weight_gradient_image_at_a_time_equals_whole_batch_passes(n, c, o, h, w):
    """F(4, 3)'s weight gradient at one thread (``weight_f43``: the accumulators continued image after
    image) against the whole batch's transforms and one ``tap_gemm`` over all tiles: the same floats;
    and torch's weight gradient within float32 rounding."""
    x = _RNG.standard_normal((n, c, h, w)).astype(np.float32)
    gy = _RNG.standard_normal((n, o, h, w)).astype(np.float32)
    pads = ((1, 1), (1, 1))
    du = np.zeros((36, o, c), np.float32)
    kernels.loops("winograd").weight_f43(x, gy, 1, 1, du, 0, 36)
    v = np.empty((6, 6, n, h // 4, w // 4 * c), np.float32)
    dm = np.empty((36, n * (h // 4) * (w // 4) * o), np.float32)
    _winograd._weight_transforms(np, x, gy, pads, v, dm, 0, n)
    whole = _winograd._tap_gemm(np, dm.reshape(36, -1, o).transpose(0, 2, 1), v.reshape(36, -1, c))
    np.testing.assert_array_equal(du, whole)
    xt = torch.tensor(x, requires_grad=True)
    k = torch.zeros((o, c, 3, 3), requires_grad=True)
    torch.nn.functional.conv2d(xt, k, padding=1).backward(torch.tensor(gy))
    np.testing.assert_allclose(_winograd.weight3x3(np, x, gy, pads), k.grad.numpy(), rtol=1e-4, atol=2e-3)
