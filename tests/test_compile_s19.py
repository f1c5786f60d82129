"""Issue 18, session 19: a one-op lowered graph whose fused kernel recomputes two or more transcendental
members over many elements runs as the one-node step (saved intermediates) instead of the fused op."""
import numpy as np
import pytest

import tapelab as T

pytest.importorskip("numba")


def _chain6(x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid().sum()


def _cheap(x, w):
    return ((x * w + 1.0) * x - w).sum()


def _grads(fn, shape, compiled):
    rng = np.random.default_rng(0)
    x = T.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    w = T.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    f = T.compile(fn) if compiled else fn
    outs = []
    for _ in range(2):                       # the first call traces, the second runs the entry
        x.grad = w.grad = None
        y = f(x, w)
        y.backward()
        outs.append((y, x.grad.numpy().copy(), w.grad.numpy().copy()))
    return outs[-1]


def test_transcendental_chain_over_many_elements_runs_as_the_step():
    y, gx, gw = _grads(_chain6, (64, 1024), True)
    assert y.grad_fn.op.name == "compiled(_chain6)"          # the step, not fused(mul, ..., sum)
    ye, gxe, gwe = _grads(_chain6, (64, 1024), False)
    np.testing.assert_allclose(y.item(), ye.item(), rtol=1e-5)
    np.testing.assert_allclose(gx, gxe, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, gwe, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn, shape", [(_chain6, (16,)), (_chain6, (32, 1024)), (_cheap, (64, 1024))])
def test_small_or_cheap_chains_keep_the_one_fused_op(fn, shape):
    y, gx, gw = _grads(fn, shape, True)
    assert y.grad_fn.op.name.startswith("fused(")
    ye, gxe, gwe = _grads(fn, shape, False)
    np.testing.assert_allclose(y.item(), ye.item(), rtol=1e-5)
    np.testing.assert_allclose(gx, gxe, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, gwe, rtol=1e-5, atol=1e-6)
