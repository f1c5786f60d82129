"""Compiled elementwise chains with members numba can only call libm for (sin, cos, tan, atan, log1p,
expm1, asinh, atanh, a general pow): those members run as numpy's vectorised ufuncs outside the fused
kernels (a numba loop calling scalar sinf was 5x slower than eager), with eager's and PyTorch's values
and gradients."""
import numpy as np
import pytest

import tapelab
from tapelab.compiler import cpu
from tapelab.compiler.symbolic import const_sym, input_sym

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not cpu.numba_available(), reason="the numba kernels are what leave these out")

MEMBERS = ["sin", "cos", "tan", "atan", "asinh", "atanh", "log1p", "expm1"]


def _chain(lib, name):
    def f(x):
        y = getattr(x * 0.5, name)() * 2.0 + 1.0
        return (y.tanh() * y).sum()
    return f


@pytest.mark.parametrize("name", [m for m in MEMBERS if m != "expm1"])   # float32 expm1 fuses (Sleef's form, s32)
def test_libm_member_runs_outside_the_fused_kernel(name):
    ops = tapelab._dynamo.explain(_chain(tapelab, name))(tapelab.randn(256)).ops_per_graph
    assert len(ops) == 1 and name in ops[0]
    fused = [o for o in ops[0] if o.startswith("fused(")]
    assert fused and all(name not in o[len("fused("):-1].split(", ") for o in fused)


@pytest.mark.parametrize("name", MEMBERS)
def test_values_and_grads_as_eager_and_torch(name):
    tapelab.manual_seed(0)
    x = tapelab.rand(5000) * 1.8 - 0.9
    c = tapelab.compile(_chain(tapelab, name))
    got = []
    for fn in (_chain(tapelab, name), c, c):
        xi = x.detach().requires_grad_()
        out = fn(xi)
        out.backward()
        got.append((out.item(), xi.grad.numpy().copy()))
    xt = torch.from_numpy(x.numpy().copy()).requires_grad_()
    ref = _chain(torch, name)(xt)
    ref.backward()
    for value, grad in got[1:]:
        np.testing.assert_allclose(value, got[0][0], rtol=1e-5)
        np.testing.assert_allclose(grad, got[0][1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value, ref.item(), rtol=1e-5)
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_h6_sin_cos_chain_as_torch():
    def f(x):
        y = (x.sin() * 2.0 + 1.0).tanh()
        y = (y.cos() * 3.0 - 1.0).sigmoid()
        return (y * y + 0.5).sum()
    tapelab.manual_seed(1)
    x = tapelab.randn(1 << 14)
    ops = tapelab._dynamo.explain(f)(x).ops_per_graph[0]
    assert "sin" in ops and "cos" in ops and any(o.startswith("fused(") and "tanh" in o for o in ops)
    xc = x.detach().requires_grad_()
    tapelab.compile(f)(xc).backward()
    xt = torch.from_numpy(x.numpy().copy()).requires_grad_()
    f(xt).backward()
    np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_calls_libm_says_which_loops_call_libm():
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    x, w = input_sym(0, f32), input_sym(1, f64)
    from tapelab.compiler.symbolic import Sym
    assert cpu.calls_libm(Sym("sin", (x,), f32))
    assert cpu.calls_libm(Sym("add", (Sym("log1p", (x,), f32), x), f32))     # found below the top
    assert not cpu.calls_libm(Sym("exp", (x,), f32))                        # fastmath's exp32
    assert cpu.calls_libm(Sym("exp", (w,), f64))                            # libm's exp
    assert not cpu.calls_libm(Sym("power", (x, const_sym(np.float32(2))), f32))
    assert not cpu.calls_libm(Sym("power", (x, const_sym(np.float32(0.5))), f32))
    assert cpu.calls_libm(Sym("power", (x, const_sym(np.float32(2.7))), f32))
    assert not cpu.calls_libm(Sym("multiply", (x, x), f32))


def test_a_fast_chain_stays_one_kernel():
    def f(x):
        return ((x * 2.0 + 1.0).tanh() * x.exp()).sum()
    ops = tapelab._dynamo.explain(f)(tapelab.randn(256)).ops_per_graph
    assert ops == [["fused(mul, add, tanh, exp, mul, sum)"]]
