"""``torch._foreach_*`` against PyTorch: every name PyTorch has, each overload form (a number,
a 0-d tensor, a list of numbers, a list of tensors), in-place forms, gradients and errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab._foreach import _UNARY

SHAPES = [(3,), (2, 4), ()]
UNARY_SAFE = {"acos": 0.9, "asin": 0.9, "log": None, "log10": None, "log1p": None, "log2": None, "sqrt": None,
              "rsqrt": None, "reciprocal": None, "lgamma": None}   # domain: values in (0.1, 0.9) or positive


def _arrays(seed: int = 0, positive: bool = False) -> list:
    rng = np.random.default_rng(seed)
    out = [rng.uniform(-0.9, 0.9, s).astype(np.float32) for s in SHAPES]
    return [np.abs(a) + 0.1 for a in out] if positive else out


def _both(arrays, requires_grad=False):
    return ([torch.tensor(a, requires_grad=requires_grad) for a in arrays],
            [tl.tensor(a, requires_grad=requires_grad) for a in arrays])


def _close(ours, theirs, rtol=1e-6):
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape)
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=1e-6)


def test_every_foreach_name_pytorch_has():
    missing = [n for n in dir(torch) if n.startswith("_foreach_") and not hasattr(tl, n)]
    assert missing == []


@pytest.mark.parametrize("name", _UNARY)
def test_unary_out_of_place_and_in_place(name):
    arrays = _arrays(positive=name in UNARY_SAFE)
    (t, o) = _both(arrays)
    want = getattr(torch, f"_foreach_{name}")(t)
    got = getattr(tl, f"_foreach_{name}")(o)
    assert isinstance(got, tuple)
    _close(got, want)
    returned = getattr(tl, f"_foreach_{name}_")(o)
    getattr(torch, f"_foreach_{name}_")(t)
    assert returned is o
    _close(o, t)


OTHERS = {"number": lambda lib, a: 0.7,
          "0-d tensor": lambda lib, a: lib.tensor(0.7),
          "numbers": lambda lib, a: [0.5, 1.5, 2.0],
          "tensors": lambda lib, a: [lib.tensor(x) for x in _arrays(1, positive=True)]}


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max", "maximum", "minimum"])
@pytest.mark.parametrize("form", sorted(OTHERS))
def test_binary_forms(name, form):
    if form == "0-d tensor" and name not in ("add", "sub", "mul", "div"):
        pytest.skip("PyTorch takes a 0-d tensor operand only in add, sub, mul and div")
    arrays = _arrays(positive=name == "pow")
    t, o = _both(arrays)
    want = getattr(torch, f"_foreach_{name}")(t, OTHERS[form](torch, arrays))
    _close(getattr(tl, f"_foreach_{name}")(o, OTHERS[form](tl, arrays)), want)
    getattr(torch, f"_foreach_{name}_")(t, OTHERS[form](torch, arrays))
    assert getattr(tl, f"_foreach_{name}_")(o, OTHERS[form](tl, arrays)) is o
    _close(o, t)


def test_alpha_number_base_pow_and_gradients():
    arrays = _arrays()
    t, o = _both(arrays, requires_grad=True)
    t2, o2 = _both(_arrays(2), requires_grad=True)
    want = torch._foreach_sub(torch._foreach_mul(t, t2), t2, alpha=2.5)
    got = tl._foreach_sub(tl._foreach_mul(o, o2), o2, alpha=2.5)
    _close(got, want)
    sum(w.sum() for w in want).backward()
    sum(g.sum() for g in got).backward()
    _close([p.grad for p in o + o2], [p.grad for p in t + t2])
    _close(tl._foreach_pow(2.0, [x.detach() for x in o]), torch._foreach_pow(2.0, [x.detach() for x in t]))


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("value", ["default", "number", "numbers", "1-d tensor"])
def test_addcmul_addcdiv(name, value):
    a, b, c = _arrays(0), _arrays(1), _arrays(2, positive=True)
    values = {"default": {}, "number": {"value": 0.3}, "numbers": {"scalars": [0.1, -0.2, 0.3]}}

    def kwargs(lib):
        return {"scalars": lib.tensor([0.1, -0.2, 0.3])} if value == "1-d tensor" else values[value]
    (ta, oa), (tb, ob), (tc, oc) = _both(a), _both(b), _both(c)
    _close(getattr(tl, f"_foreach_{name}")(oa, ob, oc, **kwargs(tl)),
           getattr(torch, f"_foreach_{name}")(ta, tb, tc, **kwargs(torch)))
    getattr(torch, f"_foreach_{name}_")(ta, tb, tc, **kwargs(torch))
    assert getattr(tl, f"_foreach_{name}_")(oa, ob, oc, **kwargs(tl)) is oa
    _close(oa, ta)


@pytest.mark.parametrize("weight", ["number", "numbers", "tensors"])
def test_lerp_the_model_ema_update(weight):
    a, b = _arrays(0), _arrays(1)
    forms = {"number": lambda lib: 0.25, "numbers": lambda lib: [0.1, 0.5, 0.9],
             "tensors": lambda lib: [lib.tensor(x) for x in _arrays(3, positive=True)]}
    (ta, oa), (tb, ob) = _both(a), _both(b)
    _close(tl._foreach_lerp(oa, ob, forms[weight](tl)), torch._foreach_lerp(ta, tb, forms[weight](torch)))
    torch._foreach_lerp_(ta, tb, forms[weight](torch))
    tl._foreach_lerp_(oa, ob, forms[weight](tl))
    _close(oa, ta)


def test_reductions_copies_and_mm():
    a = _arrays()
    t, o = _both(a)
    for ord in (2, 1, float("inf")):
        _close(tl._foreach_norm(o, ord), torch._foreach_norm(t, ord))
    got = tl._foreach_norm(o, 2, dtype=tl.float64)
    assert all(g.dtype == tl.float64 for g in got)
    _close(got, torch._foreach_norm(t, 2, dtype=torch.float64))
    _close(tl._foreach_powsum(o, 3), torch._foreach_powsum(t, 3), rtol=1e-5)
    _close(tl._foreach_max(o), torch._foreach_max(t))
    clones = tl._foreach_clone(o)
    assert all(c is not x for c, x in zip(clones, o))
    _close(clones, t)
    tb, ob = _both(_arrays(5))
    assert tl._foreach_copy_(o, ob) is o
    _close(o, tb)
    assert tl._foreach_zero_(o) is o and all(not x.any() for x in o)
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    _close(tl._foreach_mm([tl.tensor(m)], [tl.tensor(m.T.copy())]), torch._foreach_mm([torch.tensor(m)], [torch.tensor(m.T.copy())]))


ERRORS = [("add", lambda lib, x: ([], 1)), ("add", lambda lib, x: (x, [1.0])),
          ("add", lambda lib, x: (x, [lib.ones(3)])), ("div", lambda lib, x: (x, lib.ones(3))),
          ("lerp", lambda lib, x: (x, [lib.ones(3)], 0.5)), ("exp", lambda lib, x: (x[0],)),
          ("sub", lambda lib, x: ([lib.tensor([True])], 1)), ("neg", lambda lib, x: ([lib.tensor([True])],))]


@pytest.mark.parametrize("name,args", ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERRORS)])
def test_errors_as_pytorch_gives_them(name, args):
    t, o = _both(_arrays())
    with pytest.raises(Exception) as theirs:
        getattr(torch, f"_foreach_{name}")(*args(torch, t))
    with pytest.raises(type(theirs.value)) as ours:
        getattr(tl, f"_foreach_{name}")(*args(tl, o))
    if type(theirs.value) is RuntimeError:
        assert str(ours.value) == str(theirs.value)


def _keras_adam_lists(m, shapes=((4, 5), (5,), (3, 1, 2), (40000,)), seed=3):
    """Keras 3's torch Adam step (its ``_parallel_update_step``): in-place foreach updates of momentums,
    velocities and variables, under no_grad as Keras runs it."""
    rng = np.random.default_rng(seed)
    def lists():
        return [m.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    P, G, M, V = lists(), lists(), lists(), [t.abs() for t in lists()]
    for p in P:
        p.requires_grad_()
    alpha = m.tensor(0.001)
    with m.no_grad():
        for _ in range(3):
            m._foreach_mul_(M, 0.9)
            m._foreach_add_(M, G, alpha=1 - 0.9)
            m._foreach_mul_(V, 0.999)
            m._foreach_add_(V, m._foreach_mul(G, G), alpha=1 - 0.999)
            m._foreach_add_(P, m._foreach_div(m._foreach_mul(M, alpha), m._foreach_add(m._foreach_sqrt(V), 1e-7)),
                            alpha=-1)
            m._foreach_sub_(G, M, alpha=0.5)
            m._foreach_div_(G, V)
            m._foreach_div_(G, 3.0)
    return [[t.detach().numpy().copy() for t in ts] for ts in (P, G, M, V)], [p._version for p in P]


def test_an_optimizers_foreach_updates_equal_torch_bit_for_bit():
    ours, ours_versions = _keras_adam_lists(tl)
    theirs, their_versions = _keras_adam_lists(torch)
    for a_list, b_list in zip(ours, theirs):
        for a, b in zip(a_list, b_list):
            np.testing.assert_array_equal(a, b)
    assert ours_versions == their_versions


def test_foreach_in_place_updates_still_refuse_a_leaf_that_requires_grad():
    for m in (torch, tl):
        p = [m.ones(3, requires_grad=True)]
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            m._foreach_add_(p, [m.ones(3)], alpha=0.5)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            m._foreach_mul_(p, 2.0)
