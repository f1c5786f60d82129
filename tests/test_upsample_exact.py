"""``interpolate``'s linear and bilinear modes bit for bit as PyTorch's cpu kernels in float32
(``nn/_upsample.py``, ``kernels/upsample.py``): the forward and the input gradient, up and down,
by scale factor and by size, with and without ``align_corners``. The separable matrix products
they replaced differed in the last bit in 35-50% of the outputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

CASES = [("linear", (2, 3, 9), dict(scale_factor=2.0)), ("linear", (1, 2, 16), dict(scale_factor=1.5)),
         ("linear", (2, 3, 9), dict(size=4)), ("linear", (1, 2, 16), dict(scale_factor=1.7, recompute_scale_factor=True)),
         ("bilinear", (2, 3, 9, 11), dict(scale_factor=2.0)), ("bilinear", (1, 2, 16, 16), dict(scale_factor=(3.0, 1.7))),
         ("bilinear", (2, 1, 5, 7), dict(size=(5, 13))), ("bilinear", (1, 2, 16, 16), dict(scale_factor=0.5)),
         ("bilinear", (2, 2, 7, 5), dict(scale_factor=(2.0, 1.0)))]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode,shape,kw", CASES, ids=[f"{m}-{'x'.join(map(str, s))}-{k}" for m, s, k in CASES])
def test_float32_is_pytorchs_bit_for_bit(loops, mode, shape, kw, align):
    torch.manual_seed(0)
    x = torch.randn(*shape, requires_grad=True)
    y = torch.nn.functional.interpolate(x, mode=mode, align_corners=align, **kw)
    g = torch.randn_like(y)
    y.backward(g)
    xl = tapelab.tensor(x.detach().numpy(), requires_grad=True)
    yl = tapelab.nn.functional.interpolate(xl, mode=mode, align_corners=align, **kw)
    yl.backward(tapelab.tensor(g.numpy()))
    np.testing.assert_array_equal(yl.detach().numpy(), y.detach().numpy())
    assert type(yl.grad_fn).__name__ == type(y.grad_fn).__name__
    if loops:   # the numpy form rounds each tap's product before adding it
        np.testing.assert_array_equal(xl.grad.numpy(), x.grad.numpy())
    else:
        np.testing.assert_allclose(xl.grad.numpy(), x.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_float64_and_second_order_gradients():
    """float64 within an ulp or so (ATen's double index arithmetic is not reproduced); the backward's
    own gradient is the forward again, so double backward works."""
    torch.manual_seed(1)
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64)
    want = torch.nn.functional.interpolate(x, scale_factor=3.0, mode="bilinear")
    xl = tapelab.tensor(x.numpy(), requires_grad=True)
    got = tapelab.nn.functional.interpolate(xl, scale_factor=3.0, mode="bilinear")
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert tapelab.autograd.gradcheck(lambda t: tapelab.nn.functional.interpolate(t, scale_factor=1.5, mode="bilinear"),
                                      (xl,))
    assert tapelab.autograd.gradgradcheck(lambda t: tapelab.nn.functional.interpolate(t, size=4, mode="linear")
                                          .pow(2), (tapelab.randn(1, 2, 7, dtype=tapelab.float64, requires_grad=True),))


@pytest.mark.parametrize("mode,shape,kw", [("bilinear", (1, 2, 4, 5), dict(scale_factor=1.7)),
                                           ("bilinear", (1, 2, 4, 5), dict(size=(3, 9))),
                                           ("linear", (2, 3, 7), dict(scale_factor=2.0))])
@pytest.mark.parametrize("align", [False, True])
def test_exports_to_onnx_resize(mode, shape, kw, align):
    """The op lowers to ONNX ``Resize`` (linear; PyTorch's half-pixel positions or ``align_corners``;
    the scale factors when the call gave them): onnxruntime agrees to float32 rounding."""
    ort = pytest.importorskip("onnxruntime")
    import io

    class Up(tapelab.nn.Module):
        def forward(self, x):
            return tapelab.nn.functional.interpolate(x, mode=mode, align_corners=align, **kw)
    x = tapelab.randn(*shape)
    buf = io.BytesIO()
    tapelab.onnx.export(Up(), (x,), buf)
    session = ort.InferenceSession(buf.getvalue())
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, Up()(x).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,kw,tol", [("bilinear", dict(size=(13, 31)), 0), ("bilinear", dict(size=(40, 10)), 0),
                                         ("bilinear", dict(size=(13, 31), antialias=True), 0),
                                         ("bicubic", dict(size=(13, 31), antialias=True), 0),
                                         ("bicubic", dict(size=(40, 10)), 12),
                                         ("bilinear", dict(size=(13, 31), align_corners=True), 1),
                                         ("nearest", dict(size=(13, 31)), 0)])
def test_uint8_images_resample_as_pytorchs_integer_kernel(mode, kw, tol):
    """uint8 bilinear/bicubic through PyTorch's fixed-point kernel (``nn/_resize_u8.py``; the float formula
    in uint8 overflowed, 200+ off); bicubic without antialiasing within 12 (its weights are not
    reproduced), ``align_corners`` in float32 rounded back, within 1."""
    x = np.random.default_rng(0).integers(0, 256, (1, 3, 20, 24)).astype(np.uint8)
    want = torch.nn.functional.interpolate(torch.from_numpy(x), mode=mode, **kw).numpy().astype(int)
    got = tapelab.nn.functional.interpolate(tapelab.tensor(x), mode=mode, **kw)
    assert got.dtype == tapelab.uint8
    assert np.abs(got.numpy().astype(int) - want).max() <= tol
