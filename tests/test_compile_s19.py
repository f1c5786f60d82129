"""Issue 18, session 19: a one-op lowered graph whose fused kernel recomputes two or more transcendental
members over many elements runs as the one-node step (saved intermediates) instead of the fused op."""
import warnings

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


def _chain_out(x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid()


@pytest.mark.parametrize("w_shape, w_grad", [((128, 1024), True), ((1024,), True), ((128, 1024), False)])
def test_the_step_for_a_tensor_result_equals_eager(w_shape, w_grad):
    """A tensor result (no trailing sum), a broadcast second operand, an operand needing no gradient."""
    res = {}
    for compiled in (False, True):
        x = T.tensor(np.random.default_rng(1).standard_normal((128, 1024)).astype(np.float32), requires_grad=True)
        w = T.tensor(np.random.default_rng(2).standard_normal(w_shape).astype(np.float32), requires_grad=w_grad)
        f = T.compile(_chain_out) if compiled else _chain_out
        for _ in range(2):
            x.grad = w.grad = None
            y = f(x, w)
            (y * y).mean().backward()
        res[compiled] = (y, x.grad.numpy().copy(), None if w.grad is None else w.grad.numpy().copy())
    assert res[True][0].grad_fn.op.name == "compiled(_chain_out)"
    np.testing.assert_allclose(res[True][0].detach().numpy(), res[False][0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[True][1], res[False][1], rtol=1e-5, atol=1e-6)
    if w_grad:
        np.testing.assert_allclose(res[True][2], res[False][2], rtol=1e-5, atol=1e-5)
    else:
        assert res[True][2] is None


def test_the_step_under_create_graph_equals_eager():
    res = {}
    for compiled in (False, True):
        x = T.tensor(np.random.default_rng(1).standard_normal((64, 1024)).astype(np.float32), requires_grad=True)
        w = T.tensor(np.random.default_rng(2).standard_normal((64, 1024)).astype(np.float32), requires_grad=True)
        f = T.compile(_chain6) if compiled else _chain6
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # create_graph through the step: one warning
            for _ in range(2):
                x.grad = w.grad = None
                gx, = T.autograd.grad(f(x, w), [x], create_graph=True)
                (gx * gx).sum().backward()
        res[compiled] = (x.grad.numpy().copy(), w.grad.numpy().copy())
    np.testing.assert_allclose(res[True][0], res[False][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res[True][1], res[False][1], rtol=1e-4, atol=1e-5)

