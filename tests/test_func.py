"""``torch.func`` and ``torch.autograd.functional`` against PyTorch: per-sample gradients with
``vmap(grad(...))`` over ``functional_call``, ensembles with ``stack_module_state``, Jacobians,
Hessians, vjp/jvp, nested transforms and their errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 5))
Y = RNG.standard_normal(6)
V3 = RNG.standard_normal(3)


def _np(tree):
    if isinstance(tree, dict):
        return {k: _np(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return [_np(t) for t in tree]
    return tree.detach().numpy()


def _close(a, b, rtol=1e-6):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k], rtol)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, rtol)
    else:
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-9)


def _model(lib):
    m = lib.nn.Sequential(lib.nn.Linear(5, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1)).double()
    rng = np.random.default_rng(1)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    return m


def test_per_sample_gradients_vmap_grad_functional_call():
    def run(lib):
        model = _model(lib)
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, x, y):
            return ((lib.func.functional_call(model, p, (x.unsqueeze(0),)).squeeze() - y) ** 2)
        return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(params, lib.tensor(X), lib.tensor(Y))
    ours, theirs = run(tl), run(torch)
    assert set(ours) == set(theirs) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    _close(_np(ours), _np(theirs))
    assert tuple(ours["0.weight"].shape) == (6, 8, 5)


def test_ensemble_with_stack_module_state():
    def run(lib):
        models = [_model(lib) for _ in range(3)]
        with lib.no_grad():
            for i, m in enumerate(models):
                for p in m.parameters():
                    p.mul_(1 + 0.1 * i)
        params, buffers = lib.func.stack_module_state(models)
        base = models[0]
        out = lib.func.vmap(lambda p, b, x: lib.func.functional_call(base, (p, b), (x,)),
                            in_dims=(0, 0, None))(params, buffers, lib.tensor(X))
        out.sum().backward()
        return out, params["0.weight"].grad
    (o1, g1), (o2, g2) = run(tl), run(torch)
    _close(_np(o1), _np(o2))
    _close(_np(g1), _np(g2))


def _f(lib):
    return lambda a, b: (a.sin() * b).sum() + (a * a * b).sum()


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_grad_argnums_and_grad_and_value(argnums):
    a, b = RNG.standard_normal(3), RNG.standard_normal(3)
    ours = tl.func.grad_and_value(_f(tl), argnums)(tl.tensor(a), tl.tensor(b))
    theirs = torch.func.grad_and_value(_f(torch), argnums)(torch.tensor(a), torch.tensor(b))
    _close(_np(ours), _np(theirs))
    _close(_np(tl.func.grad(_f(tl), argnums)(tl.tensor(a), tl.tensor(b))),
           _np(torch.func.grad(_f(torch), argnums)(torch.tensor(a), torch.tensor(b))))


def test_has_aux_nested_grad_and_closure():
    def f(lib):
        return lambda x: ((x.sin()).sum(), {"mean": x.mean()})
    g, aux = tl.func.grad(f(tl), has_aux=True)(tl.tensor(V3))
    tg, taux = torch.func.grad(f(torch), has_aux=True)(torch.tensor(V3))
    _close(_np(g), _np(tg))
    _close(_np(aux), _np(taux))
    # d2/dx2 sin x = -sin x, per element through vmap(grad(grad(...)))
    second = tl.func.vmap(tl.func.grad(tl.func.grad(lambda x: x.sin())))(tl.tensor(V3))
    np.testing.assert_allclose(second.numpy(), -np.sin(V3), rtol=1e-12)


def test_jacrev_jacfwd_hessian_vjp_jvp():
    def f(lib):
        return lambda x: lib.stack([x[0] * x[1], x[1].exp(), (x * x).sum()])
    x = RNG.standard_normal(3)
    for name in ("jacrev", "jacfwd", "hessian"):
        fn = (lambda lib: lambda z: (z ** 3).sum() * z[0]) if name == "hessian" else f
        _close(_np(getattr(tl.func, name)(fn(tl))(tl.tensor(x))),
               _np(getattr(torch.func, name)(fn(torch))(torch.tensor(x))))
    out, fn = tl.func.vjp(f(tl), tl.tensor(x))
    tout, tfn = torch.func.vjp(f(torch), torch.tensor(x))
    _close(_np(out), _np(tout))
    _close(_np(fn(tl.tensor(V3))), _np(tfn(torch.tensor(V3))))
    _close(_np(tl.func.jvp(f(tl), (tl.tensor(x),), (tl.tensor(V3),))),
           _np(torch.func.jvp(f(torch), (torch.tensor(x),), (torch.tensor(V3),))))


def test_vmap_trees_and_out_dims():
    def f(d, s):
        return {"a": d["x"] * s, "b": (d["x"].sum(), d["y"] @ d["y"])}
    a, y = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 4))

    def run(lib):
        return lib.func.vmap(f, in_dims=({"x": 0, "y": 1}, None), out_dims={"a": 1, "b": (0, 0)})(
            {"x": lib.tensor(a), "y": lib.tensor(y)}, 2.0)
    _close(_np(run(tl)), _np(run(torch)))
    assert tl.vmap is tl.func.vmap


def test_errors():
    with pytest.raises(RuntimeError, match="scalar"):
        tl.func.grad(lambda x: x * 2)(tl.tensor(V3))
    with pytest.raises(ValueError, match="same size"):
        tl.func.vmap(lambda a, b: a + b)(tl.ones(3), tl.ones(4))
    with pytest.raises(RuntimeError, match="argnums"):
        tl.func.grad(lambda x: x.sum(), argnums=2)(tl.tensor(V3))


# ---------------------------------------------------------------- torch.autograd.functional
def _two(lib):
    return lambda a, b: (a.sin()[:2] * b.exp(), (a * a).sum())


@pytest.mark.parametrize("create_graph", [False, True])
def test_autograd_functional_jacobian_tuples(create_graph):
    a, b = RNG.standard_normal(3), RNG.standard_normal(2)
    ours = tl.autograd.functional.jacobian(_two(tl), (tl.tensor(a), tl.tensor(b)), create_graph=create_graph)
    theirs = torch.autograd.functional.jacobian(_two(torch), (torch.tensor(a), torch.tensor(b)),
                                                create_graph=create_graph)
    _close(_np(ours), _np(theirs))
    single = tl.autograd.functional.jacobian(lambda z: z.exp() * z[0], tl.tensor(a))
    _close(_np(single), _np(torch.autograd.functional.jacobian(lambda z: z.exp() * z[0], torch.tensor(a))))


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp", "hessian"])
def test_autograd_functional_products(name):
    def f(lib):
        return (lambda z: (z ** 3).sum() * z[0]) if name in ("hvp", "vhp", "hessian") else (lambda z: z.sin() * z.sum())
    x = RNG.standard_normal(3)
    args = () if name == "hessian" else (V3,)
    ours = getattr(tl.autograd.functional, name)(f(tl), tl.tensor(x), *map(tl.tensor, args))
    theirs = getattr(torch.autograd.functional, name)(f(torch), torch.tensor(x), *map(torch.tensor, args))
    _close(_np(ours), _np(theirs))


def test_autograd_functional_errors():
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.functional.vjp(lambda z: z * 2, torch.ones(3))
    with pytest.raises(RuntimeError) as ours:
        tl.autograd.functional.vjp(lambda z: z * 2, tl.ones(3))
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError):
        tl.autograd.functional.jacobian(lambda z: z, [1.0])
