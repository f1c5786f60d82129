"""``torch.autograd.forward_ad`` (dual tensors) against PyTorch's forward-mode AD: the tangents of
ops, modules, custom Functions, in-place updates and ``no_grad`` bodies, as the forward-mode AD
tutorial uses them, and the errors PyTorch raises."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

RNG = np.random.default_rng(7)


def _pair(*shape):
    a = RNG.standard_normal(shape)
    return torch.tensor(a), tapelab.tensor(a)


def _tangents(m, fn, primals, tangents, grad=True):
    """The tangent of every output of ``fn`` at the primals, along the tangents, under library ``m``."""
    fwad = m.autograd.forward_ad
    ctx = m.enable_grad() if grad else m.no_grad()
    with ctx, fwad.dual_level():
        duals = [fwad.make_dual(p, t) for p, t in zip(primals, tangents)]
        out = fn(m, *duals)
        outs = out if isinstance(out, tuple) else (out,)
        return [fwad.unpack_dual(o).tangent for o in outs], [fwad.unpack_dual(o).primal for o in outs]


def _check(fn, shapes, grad=True, atol=1e-10):
    tp, lp = zip(*[_pair(*s) for s in shapes])
    tt, lt = zip(*[_pair(*s) for s in shapes])
    t_tan, t_pri = _tangents(torch, fn, tp, tt, grad)
    l_tan, l_pri = _tangents(tapelab, fn, lp, lt, grad)
    for a, b in zip(t_pri, l_pri):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), atol=atol)
    for a, b in zip(t_tan, l_tan):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), atol=atol, rtol=1e-9)
            assert b.requires_grad == a.requires_grad


CASES = {
    "chain": (lambda m, x, w: ((x * w + 1).tanh() * x).sigmoid().sum(), [(5,), (5,)]),
    "sum_dim": (lambda m, x: (x.sin() * x).exp().sum(-1), [(3, 4)]),
    "matmul": (lambda m, a, b: a @ b, [(3, 4), (4, 2)]),
    "broadcast": (lambda m, a, b: a / (b.abs() + 1) - a.mean(0), [(3, 4), (4,)]),
    "softmax": (lambda m, x: m.softmax(x, -1), [(2, 5)]),
    "log_softmax_nll": (lambda m, x: m.nn.functional.cross_entropy(x, m.tensor([1, 0, 3])), [(3, 4)]),
    "layer_norm": (lambda m, x, w: m.nn.functional.layer_norm(x, (4,), w), [(3, 4), (4,)]),
    "conv2d": (lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1), [(1, 2, 5, 5), (3, 2, 3, 3)]),
    "reshape_cat": (lambda m, a, b: m.cat([a.reshape(2, 6), b.t()], 0)[1:, ::2], [(3, 4), (6, 2)]),
    "two_outputs": (lambda m, a: (a.max(0).values, a.pow(3)), [(3, 4)]),
    "gelu_silu": (lambda m, a: m.nn.functional.gelu(a) + m.nn.functional.silu(a), [(6,)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_tangents_match_torch(name):
    fn, shapes = CASES[name]
    _check(fn, shapes)


def test_tangents_flow_under_no_grad():
    """PyTorch's forward AD is not switched off by no_grad, and neither is tapelab's."""
    _check(lambda m, x, w: (x @ w).relu().sum(0), [(3, 4), (4, 2)], grad=False)


def test_module_through_functional_call_and_attribute_swap():
    """The tutorial's two ways of pushing tangents through a module's parameters."""
    def build(m):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(4, 5), m.nn.Tanh(), m.nn.Linear(5, 2)).double()
        with m.no_grad():
            for i, p in enumerate(net.parameters()):
                p.copy_(m.linspace(-0.5, 0.5 + i, p.numel(), dtype=m.float64).reshape(p.shape))
        return net

    x = RNG.standard_normal((3, 4))
    results = []
    for m in (torch, tapelab):
        net, fwad = build(m), m.autograd.forward_ad
        params = {k: v.detach() for k, v in net.named_parameters()}
        tangents = {k: m.ones_like(v) * 0.1 * (i + 1) for i, (k, v) in enumerate(params.items())}
        with fwad.dual_level():
            duals = {k: fwad.make_dual(v, tangents[k]) for k, v in params.items()}
            out = m.func.functional_call(net, duals, (m.tensor(x),))
            via_call = fwad.unpack_dual(out).tangent
        net2 = build(m)
        with fwad.dual_level():
            for name, p in list(net2[0].named_parameters()):
                delattr(net2[0], name)
                setattr(net2[0], name, fwad.make_dual(p.detach(), m.ones_like(p)))
            via_attr = fwad.unpack_dual(net2(m.tensor(x))).tangent
        results.append((via_call.detach().numpy(), via_attr.detach().numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def _function_classes(m):
    class ExpJvpOnly(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = m.exp(x)
            ctx.result = result
            return result

        @staticmethod
        def jvp(ctx, gx):
            return gx * ctx.result

    class CubeBackwardOnly(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g
    return ExpJvpOnly, CubeBackwardOnly


def test_custom_function_jvp_and_its_absence():
    x = RNG.standard_normal((3, 3))
    t = RNG.standard_normal((3, 3))
    got = []
    for m in (torch, tapelab):
        exp_fn, cube_fn = _function_classes(m)
        fwad = m.autograd.forward_ad
        with fwad.dual_level():
            d = fwad.make_dual(m.tensor(x), m.tensor(t))
            got.append(fwad.unpack_dual(exp_fn.apply(d)).tangent.numpy())
            with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
                cube_fn.apply(d)
    np.testing.assert_allclose(got[1], got[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], np.exp(x) * t, rtol=1e-12)


def test_gradcheck_forward_ad_on_a_jvp_only_function():
    exp_fn, _ = _function_classes(tapelab)
    x = tapelab.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    assert tapelab.autograd.gradcheck(exp_fn.apply, (x,), check_forward_ad=True, check_backward_ad=False)
    assert tapelab.autograd.gradcheck(tapelab.sin, (x,), check_forward_ad=True)

    class WrongJvp(tapelab.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.exp()

        @staticmethod
        def jvp(ctx, ga):
            return ga   # exp's derivative is exp, not 1

    with pytest.raises(tapelab.autograd.GradcheckError, match="Forward-mode Jacobian mismatch"):
        tapelab.autograd.gradcheck(WrongJvp.apply, (x,), check_forward_ad=True, check_backward_ad=False)


def test_in_place_updates_carry_tangents():
    def fn(m, x, y):
        z = x.clone()
        z.mul_(y)
        z.add_(x.sin())
        return z
    _check(fn, [(4,), (4,)])
    _check(fn, [(4,), (4,)], grad=False)


def test_lstm_and_gru_tangents():
    for cls in ("LSTM", "GRU"):
        def fn(m, x, cls=cls):
            m.manual_seed(0)
            layer = getattr(m.nn, cls)(3, 4, batch_first=True).double()
            with m.no_grad():
                for i, p in enumerate(layer.parameters()):
                    p.copy_(m.linspace(-0.3, 0.3 + 0.1 * i, p.numel(), dtype=m.float64).reshape(p.shape))
            return layer(x)[0]
        _check(fn, [(2, 5, 3)])


def test_level_lifetime_and_errors():
    fwad = tapelab.autograd.forward_ad
    x = tapelab.ones(3, dtype=tapelab.float64)
    assert fwad.unpack_dual(x).tangent is None            # no level: no tangent
    with pytest.raises(RuntimeError, match="no level exists"):
        fwad.make_dual(x, x)
    with fwad.dual_level() as level:
        assert level == fwad._current_level >= 0
        with pytest.raises(ValueError, match="Expected primal to be floating point or complex, but got"):
            fwad.make_dual(tapelab.ones(3, dtype=tapelab.int64), x)
        with pytest.raises(RuntimeError, match="different size than that of the original Tensor"):
            fwad.make_dual(x, tapelab.ones(4, dtype=tapelab.float64))
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            fwad.enter_dual_level()
        d = fwad.make_dual(x, x * 2)
        y = d * 3
        primal, tangent = fwad.unpack_dual(y)
        assert tangent.tolist() == [6.0, 6.0, 6.0] and primal.tolist() == [3.0, 3.0, 3.0]
        assert fwad.unpack_dual(primal).tangent is None     # the primal carries no tangent
        assert fwad.unpack_dual(x).tangent is None          # the tensor make_dual viewed keeps none
    assert fwad.unpack_dual(y).tangent is None              # the level's tangents went with it
    assert (x * 2).tolist() == [2.0, 2.0, 2.0]              # and ops run plainly again
    with pytest.raises(RuntimeError, match="not the last one"):
        fwad.exit_dual_level()


def test_func_jvp_agrees_with_dual_tensors():
    fwad = tapelab.autograd.forward_ad
    x = tapelab.tensor(RNG.standard_normal(5))
    t = tapelab.tensor(RNG.standard_normal(5))
    _, expected = tapelab.func.jvp(lambda a: a.tanh() * a, (x,), (t,))
    with fwad.dual_level():
        got = fwad.unpack_dual(fwad.make_dual(x, t).tanh() * fwad.make_dual(x, t)).tangent
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)


def test_reverse_mode_through_a_tangent():
    """A Hessian-vector product by reverse over forward: backward() through the tangent."""
    x = RNG.standard_normal(4)
    v = RNG.standard_normal(4)
    grads = []
    for m in (torch, tapelab):
        xt = m.tensor(x, requires_grad=True)
        fwad = m.autograd.forward_ad
        with fwad.dual_level():
            y = (fwad.make_dual(xt, m.tensor(v)).sin() ** 2).sum()
            fwad.unpack_dual(y).tangent.backward()
        grads.append(xt.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10)
    np.testing.assert_allclose(grads[1], 2 * np.cos(2 * x) * v, rtol=1e-10)
