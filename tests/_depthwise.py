"""The depthwise and grouped convolution tests' oracle run: a conv2d's output and gradients in tapelab or torch,
and their comparison."""
import numpy as np


def run(lib, x, w, b, g, dtype=None, **kw):
    """Output and gradients (input, weight, bias when given) of ``conv2d`` under ``lib``, on copies of the
    arrays (cast to ``dtype`` when given: float64 for torch as the reference)."""
    def mine(a):
        return a.astype(dtype) if dtype is not None else a.copy()
    xt, wt = lib.from_numpy(mine(x)).requires_grad_(), lib.from_numpy(mine(w)).requires_grad_()
    bt = lib.from_numpy(mine(b)).requires_grad_() if b is not None else None
    y = lib.nn.functional.conv2d(xt, wt, bt, **kw)
    y.backward(lib.from_numpy(mine(g)))
    out = [y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()]
    return out + ([bt.grad.numpy()] if bt is not None else [])


def close(got, want):
    for a, e in zip(got, want):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(e).max())))
