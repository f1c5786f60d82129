"""vmap, session 18, against real ``torch.func``: jacrev/jacfwd/jvp/hessian batched inside vmap (and vmap
inside them), the batching rules of the ops researchers put under vmap (masks and index_put, attention,
convolutions with batched weights, normalisation, embedding, linalg, losses, scans, sorts), PyTorch's
errors inside vmap, and the per-sample gradients of a small CNN and Transformer."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab.core.dispatch import Mode

RNG = np.random.default_rng(18)
X = RNG.standard_normal((6, 3))


def _np(t):
    if isinstance(t, dict):
        return {k: _np(v) for k, v in sorted(t.items())}
    if isinstance(t, (tuple, list)):
        return [_np(v) for v in t]
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b, rtol=1e-7, atol=1e-9):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k], rtol, atol)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, rtol, atol)
    else:
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


class _Ops(Mode):
    """The names of the ops that reach the dispatcher below the vmap levels."""

    def __init__(self):
        self.names = []

    def dispatch(self, op, args, params):
        self.names.append(op.name)
        return super().dispatch(op, args, params)


# ---------------------------------------------------------------- 1. transforms inside vmap
def _transforms(m):
    F = m.func
    m.manual_seed(0)
    net = m.nn.Sequential(m.nn.Linear(3, 16), m.nn.Tanh(), m.nn.Linear(16, 2)).double()
    u = lambda x: net(x).sum()
    x = m.tensor(X)
    out = [F.vmap(F.jacrev(net))(x),
           F.vmap(F.jacfwd(lambda z: (z.sin() * z[0], (z ** 3).sum())))(x),
           F.vmap(F.hessian(u))(x),
           F.vmap(lambda p: m.trace(F.hessian(u)(p)))(x),   # a PINN's per-point Laplacian
           F.vmap(F.jacrev(F.jacrev(lambda z: (z ** 2).sum() * z.sin().sum())))(x),
           F.vmap(lambda p, t: F.jvp(net, (p,), (t,)))(x, x.cos()),
           F.vmap(lambda p: F.jvp(lambda z: z.exp() * z.sum(), (p,), (m.ones(3, dtype=m.float64),))[1])(x),
           F.jacrev(F.vmap(lambda z: (z * z.sum()).sin()))(x[:3]),
           F.hessian(lambda z: F.vmap(u)(z).sum())(x[:2]),
           F.vmap(F.jacrev(lambda a, b: a * b.sum(), argnums=(0, 1)))(x, x.exp()),
           F.vmap(F.jacrev(lambda w, z: (w * z).tanh()), in_dims=(None, 0))(x[0], x),
           F.vmap(F.jacrev(lambda z: (z.sin(), z.sum()), has_aux=True))(x),
           F.vmap(F.vmap(F.jacrev(lambda z: z.sin() * z.sum())))(x.reshape(2, 3, 3))]
    params = {k: v.detach() for k, v in net.named_parameters()}
    out.append(F.vmap(F.jacrev(lambda p, z: F.functional_call(net, p, (z,))), in_dims=(None, 0))(params, x))
    F.vmap(F.jacrev(net))(x).pow(2).sum().backward()   # the batched Jacobians stay on the module's graph
    out.append(net[0].weight.grad)
    return out


def test_jacobians_hessians_jvp_inside_vmap_as_torch():
    _close(_np(_transforms(tl)), _np(_transforms(torch)))


def test_hessian_inside_vmap_runs_batched():
    """vmap(hessian) differentiates every point in one pass per level: the ops run once, not once per point."""
    tl.manual_seed(0)
    net = tl.nn.Sequential(tl.nn.Linear(2, 16), tl.nn.Tanh(), tl.nn.Linear(16, 1))
    with _Ops() as seen, warnings.catch_warnings():
        warnings.simplefilter("error")
        tl.func.vmap(lambda p: tl.trace(tl.func.hessian(lambda z: net(z).sum())(p)))(tl.randn(64, 2))
    assert seen.names.count("tanh") == 1 and len(seen.names) < 120
