"""torchvision.ops.deform_conv2d / DeformConv2d (ptflops maps the layer; detection code builds DCN
blocks). torchvision does not import beside this environment's PyTorch, so the references are: PyTorch's
own conv2d where the offsets make a plain convolution (zero, or whole-pixel shifts), a numpy loop of
torchvision's documented sampling rule (bilinear, zero outside, nothing read at or past one pixel beyond
the border) for fractional offsets, and gradcheck in float64."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab.vision.ops import DeformConv2d, deform_conv2d

GEOMETRIES = [dict(stride=1, padding=1, dilation=1, groups=1), dict(stride=2, padding=0, dilation=1, groups=2),
              dict(stride=1, padding=2, dilation=2, groups=1)]


def _out_hw(h, w, k, g):
    s, p, d = g["stride"], g["padding"], g["dilation"]
    return (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("geom", GEOMETRIES)
def test_zero_offsets_are_torchs_conv2d(geom):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 4 // geom["groups"], 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    ho, wo = _out_hw(7, 6, 3, geom)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), geom["stride"], geom["padding"],
                                      geom["dilation"], geom["groups"]).numpy()
    got = deform_conv2d(tapelab.tensor(x), tapelab.zeros(2, 2 * 9, ho, wo), tapelab.tensor(w), tapelab.tensor(b),
                        geom["stride"], geom["padding"], geom["dilation"])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    half = deform_conv2d(tapelab.tensor(x), tapelab.zeros(2, 2 * 9, ho, wo), tapelab.tensor(w), None,
                         geom["stride"], geom["padding"], geom["dilation"], mask=tapelab.full((2, 9, ho, wo), 0.5))
    np.testing.assert_allclose(half.numpy(), (want - b[:, None, None]) / 2, rtol=1e-5, atol=1e-5)


def test_a_whole_pixel_offset_is_a_convolution_of_the_shifted_image():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    shifted = np.zeros_like(x)
    shifted[..., :-1, :-2] = x[..., 1:, 2:]          # every tap reads one row down, two columns right
    want = torch.nn.functional.conv2d(torch.tensor(shifted), torch.tensor(w), padding=1).numpy()
    offset = np.zeros((1, 18, 6, 6), np.float32)
    offset[:, 0::2], offset[:, 1::2] = 1.0, 2.0
    got = deform_conv2d(tapelab.tensor(x), tapelab.tensor(offset), tapelab.tensor(w), padding=1)
    # (the first row and column: the plain convolution reads the zero padding there, the moved taps the image)
    np.testing.assert_allclose(got.numpy()[..., 1:, 1:], want[..., 1:, 1:], rtol=1e-5, atol=1e-5)


def _reference(x, offset, w, mask, stride, pad, dil):
    """torchvision's rule, one tap at a time."""
    B, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    og = offset.shape[1] // (2 * kh * kw)
    Ho, Wo = offset.shape[2:]
    out = np.zeros((B, O, Ho, Wo))

    def sample(img, y, xx):
        if y <= -1 or y >= H or xx <= -1 or xx >= W:
            return 0.0
        y0, x0 = int(np.floor(y)), int(np.floor(xx))
        total = 0.0
        for yy, xq, wt in ((y0, x0, (1 - (y - y0)) * (1 - (xx - x0))), (y0, x0 + 1, (1 - (y - y0)) * (xx - x0)),
                           (y0 + 1, x0, (y - y0) * (1 - (xx - x0))), (y0 + 1, x0 + 1, (y - y0) * (xx - x0))):
            if 0 <= yy < H and 0 <= xq < W:
                total += wt * img[yy, xq]
        return total
    for b in range(B):
        for o in range(O):
            g = o // (O // (C // Cg))
            for i in range(Ho):
                for j in range(Wo):
                    acc = 0.0
                    for c in range(Cg):
                        cin = g * Cg + c
                        grp = cin // (C // og)
                        for a in range(kh):
                            for e in range(kw):
                                k = a * kw + e
                                y = i * stride - pad + a * dil + offset[b, 2 * (grp * kh * kw + k), i, j]
                                xx = j * stride - pad + e * dil + offset[b, 2 * (grp * kh * kw + k) + 1, i, j]
                                m = 1.0 if mask is None else mask[b, grp * kh * kw + k, i, j]
                                acc += w[o, c, a, e] * m * sample(x[b, cin], y, xx)
                    out[b, o, i, j] = acc
    return out


@pytest.mark.parametrize("offset_groups, groups", [(1, 1), (2, 1), (2, 2)])
def test_fractional_offsets_follow_torchvisions_sampling_rule(offset_groups, groups):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 5, 5))
    w = rng.standard_normal((2, 4 // groups, 3, 3))
    offset = rng.uniform(-2.5, 2.5, (2, 2 * offset_groups * 9, 3, 3))
    mask = rng.uniform(0, 1, (2, offset_groups * 9, 3, 3))
    got = deform_conv2d(tapelab.tensor(x), tapelab.tensor(offset), tapelab.tensor(w), None, 2, 1, 1,
                        mask=tapelab.tensor(mask))
    np.testing.assert_allclose(got.numpy(), _reference(x, offset, w, mask, 2, 1, 1), rtol=1e-10, atol=1e-10)


def test_gradients_pass_gradcheck():
    rng = np.random.default_rng(3)
    x = tapelab.tensor(rng.standard_normal((1, 2, 4, 4)), requires_grad=True)
    offset = tapelab.tensor(rng.uniform(-1.3, 1.3, (1, 2 * 4, 3, 3)) + 0.37, requires_grad=True)
    mask = tapelab.tensor(rng.uniform(0.2, 1, (1, 4, 3, 3)), requires_grad=True)
    w = tapelab.tensor(rng.standard_normal((3, 2, 2, 2)), requires_grad=True)
    b = tapelab.tensor(rng.standard_normal(3), requires_grad=True)
    assert tapelab.autograd.gradcheck(lambda *a: deform_conv2d(a[0], a[1], a[3], a[4], 1, 0, 1, mask=a[2]),
                                      (x, offset, mask, w, b))


def test_the_layer_initialises_as_conv2d_and_runs():
    tapelab.manual_seed(0)
    layer = DeformConv2d(4, 6, 3, padding=1, groups=2)
    tapelab.manual_seed(0)
    conv = tapelab.nn.Conv2d(4, 6, 3, padding=1, groups=2)
    assert tapelab.equal(layer.weight, conv.weight) and tapelab.equal(layer.bias, conv.bias)
    x = tapelab.randn(2, 4, 5, 5)
    out = layer(x, tapelab.zeros(2, 18, 5, 5))
    np.testing.assert_allclose(out.detach().numpy(), conv(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert layer.weight.grad.shape == layer.weight.shape
    assert repr(layer) == "DeformConv2d(4, 6, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2)"
