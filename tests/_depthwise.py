"""The depthwise tests' oracle run: a conv2d's output and gradients in tapelab or torch, and their comparison."""
import numpy as np


def run(lib, x, w, b, g, **kw):
    xt, wt = lib.from_numpy(x.copy()).requires_grad_(), lib.from_numpy(w.copy()).requires_grad_()
    bt = lib.from_numpy(b.copy()).requires_grad_() if b is not None else None
    y = lib.nn.functional.conv2d(xt, wt, bt, **kw)
    y.backward(lib.from_numpy(g.copy()))
    out = [y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()]
    return out + ([bt.grad.numpy()] if bt is not None else [])


def close(got, want):
    for a, e in zip(got, want):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(e).max())))
