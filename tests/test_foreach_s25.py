"""``torch._foreach_*`` through the array loop (``engine/_foreach.py: _loop``) against PyTorch: every name
PyTorch has on a list of float32 (and float64) parameters of mixed sizes, bit for bit where the float32
kernel rounds once, version counters, the cases the loop leaves to the Tensor methods (views, promotion,
0-d operands of another dtype, grad), errors and autograd."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl

SHAPES = [(40, 200), (200,), (3, 4, 5), (1, 7), (16,), (2, 1, 3), ()]
UNARY = sorted(n[len("_foreach_"):] for n in dir(torch) if n.startswith("_foreach_") and not n.endswith("_")
               and hasattr(torch, n + "_") and n[len("_foreach_"):] not in
               ("add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max", "maximum", "minimum", "addcmul",
                "addcdiv", "lerp", "copy", "zero"))
POSITIVE = {"acos", "asin", "log", "log10", "log1p", "log2", "rsqrt", "sqrt", "lgamma", "reciprocal"}
# float32 kernels that are not one rounding of the exact value (libm/Sleef/VML approximations): rtol 1e-6
APPROX = {"acos", "asin", "atan", "cos", "cosh", "erf", "erfc", "exp", "expm1", "lgamma", "log", "log10",
          "log1p", "log2", "sigmoid", "sin", "sinh", "tan", "tanh", "pow", "rsqrt"}


def _arrays(seed, dtype=np.float32, positive=False, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    out = [rng.uniform(0.1, 0.9, s) * np.where(rng.random(s) < 0.5, -1, 1) for s in shapes]
    return [(np.abs(a) if positive else a).astype(dtype) for a in out]


def _both(arrays, requires_grad=False):
    return ([torch.tensor(a, requires_grad=requires_grad) for a in arrays],
            [tl.tensor(a, requires_grad=requires_grad) for a in arrays])


def _same(ours, theirs, exact=True):
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert type(o) is tl.Tensor
        assert str(o.dtype) == str(t.dtype).replace("torch", "tapelab")
        assert tuple(o.shape) == tuple(t.shape) and o.stride() == t.stride()
        a, b = o.detach().numpy(), t.detach().numpy()
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)


def _versions(tensors):
    return [t._version for t in tensors]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_values_versions(name, dtype):
    arrays = _arrays(0, dtype, name in POSITIVE)
    t, o = _both(arrays)
    f, g = getattr(torch, f"_foreach_{name}"), getattr(tl, f"_foreach_{name}")
    _same(g(o), f(t), name not in APPROX)
    if hasattr(torch, f"_foreach_{name}_"):
        assert getattr(tl, f"_foreach_{name}_")(o) is o
        getattr(torch, f"_foreach_{name}_")(t)
        _same(o, t, name not in APPROX)
        assert _versions(o) == _versions(t)


def _operand(lib, form, dtype=np.float32):
    return {"list": lambda: [lib.tensor(a) for a in _arrays(1, dtype, True)],
            "number": lambda: 0.75, "int": lambda: 2, "numbers": lambda: [0.5 + i / 10 for i in range(len(SHAPES))],
            "0-d": lambda: lib.tensor(0.75, dtype=lib.float32 if dtype == np.float32 else lib.float64)}[form]()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", ["list", "number", "int", "numbers", "0-d"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max", "maximum", "minimum"])
def test_binary_forms(name, form, dtype):
    arrays = _arrays(0, dtype, name == "pow")
    t, o = _both(arrays)
    f, g = getattr(torch, f"_foreach_{name}"), getattr(tl, f"_foreach_{name}")
    _same(g(o, _operand(tl, form, dtype)), f(t, _operand(torch, form, dtype)), name != "pow")
    getattr(torch, f"_foreach_{name}_")(t, _operand(torch, form, dtype))
    assert getattr(tl, f"_foreach_{name}_")(o, _operand(tl, form, dtype)) is o
    _same(o, t, name != "pow")
    assert _versions(o) == _versions(t)


@pytest.mark.parametrize("dtype", [np.float32])   # float64 add(alpha=): Tensor.add's two roundings, not the loop's
@pytest.mark.parametrize("alpha", [0.1, -3, 1])
@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha(name, alpha, dtype):
    t, o = _both(_arrays(0, dtype))
    _same(getattr(tl, f"_foreach_{name}")(o, _operand(tl, "list", dtype), alpha=alpha),
          getattr(torch, f"_foreach_{name}")(t, _operand(torch, "list", dtype), alpha=alpha))
    getattr(torch, f"_foreach_{name}_")(t, _operand(torch, "list", dtype), alpha=alpha)
    getattr(tl, f"_foreach_{name}_")(o, _operand(tl, "list", dtype), alpha=alpha)
    _same(o, t)


@pytest.mark.parametrize("value", [{}, {"value": 0.3}, {"value": -2}, {"scalars": [0.1 * i for i in range(len(SHAPES))]}])
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_pointwise3(name, value):
    t, o = _both(_arrays(0))
    t1, o1 = _both(_arrays(1))
    t2, o2 = _both(_arrays(2, positive=True))
    _same(getattr(tl, f"_foreach_{name}")(o, o1, o2, **value), getattr(torch, f"_foreach_{name}")(t, t1, t2, **value))
    getattr(torch, f"_foreach_{name}_")(t, t1, t2, **value)
    getattr(tl, f"_foreach_{name}_")(o, o1, o2, **value)
    _same(o, t)
    assert _versions(o) == _versions(t)


@pytest.mark.parametrize("weight", ["number", "numbers", "tensors", "0-d"])
def test_lerp(weight):
    def w(lib):
        return {"number": 0.3, "numbers": [0.1 * i for i in range(len(SHAPES))], "0-d": lib.tensor(0.7),
                "tensors": [lib.tensor(a) for a in _arrays(3, positive=True)]}[weight]
    t, o = _both(_arrays(0))
    te, oe = _both(_arrays(1))
    _same(tl._foreach_lerp(o, oe, w(tl)), torch._foreach_lerp(t, te, w(torch)))
    torch._foreach_lerp_(t, te, w(torch))
    tl._foreach_lerp_(o, oe, w(tl))
    _same(o, t)
    assert _versions(o) == _versions(t)


def test_clone_copy_zero():
    t, o = _both(_arrays(0))
    ts, os_ = _both(_arrays(1))
    _same(tl._foreach_clone(o), torch._foreach_clone(t))
    assert all(c.data_ptr() != x.data_ptr() for c, x in zip(tl._foreach_clone(o), o))
    torch._foreach_copy_(t, ts)
    tl._foreach_copy_(o, os_)
    _same(o, t)
    torch._foreach_zero_(t)
    tl._foreach_zero_(o)
    _same(o, t)
    assert _versions(o) == _versions(t)


def test_views_and_strided_shapes_keep_the_methods_semantics():
    """A view in the list (a slice of a bigger tensor), a transposed operand, a one-element dimension with
    strides of its own: values and the base's memory as PyTorch's."""
    for lib in (torch, tl):
        base = lib.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
        tensors = [base[1:3], lib.ones(6, 4).t(), lib.ones(3, 1)[:, :1]]
        lib._foreach_mul_(tensors, 2.0)
        lib._foreach_add_(tensors, [lib.ones(2, 6), lib.ones(4, 6).contiguous(), lib.ones(3, 1)])
        if lib is torch:
            want = [base.numpy().copy()] + [x.numpy().copy() for x in tensors]
    np.testing.assert_array_equal(base.numpy(), want[0])
    for x, w in zip(tensors, want[1:]):
        np.testing.assert_array_equal(x.numpy(), w)
    made = []
    for lib in (torch, tl):
        base = lib.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
        views = [base[1:3], base.t(), base[:, 2:], base.reshape(2, 1, 12)]
        made.append([lib._foreach_exp(views), lib._foreach_add(views, [v.contiguous() for v in views]),
                     lib._foreach_mul(views, 0.5)])
    for ours, theirs in zip(made[1], made[0]):
        _same(ours, theirs, exact=False)


def test_promotion_and_mixed_dtypes():
    """float32 with float64 operands, a float64 0-d operand, integer lists: PyTorch's dtypes or errors."""
    cases = [("add", lambda lib: ([lib.ones(3)], [lib.ones(3, dtype=lib.float64)])),
             ("mul", lambda lib: ([lib.ones(3)], lib.tensor(2.0, dtype=lib.float64))),
             ("div", lambda lib: ([lib.arange(3)], 2)),
             ("maximum", lambda lib: ([lib.ones(3), lib.ones(2, dtype=lib.float64)], [lib.zeros(3), lib.zeros(2)])),
             ("add", lambda lib: ([lib.arange(3)], 0.5))]
    for name, args in cases:
        results = []
        for lib in (torch, tl):
            try:
                out = getattr(lib, f"_foreach_{name}")(*args(lib))
                results.append([(str(x.dtype).split(".")[1], x.numpy().tolist()) for x in out])
            except Exception as e:   # noqa: BLE001 - compared with PyTorch's
                results.append(type(e))
        assert results[0] == results[1], name
        for lib in (torch, tl):
            want = None
            try:
                getattr(lib, f"_foreach_{name}_")(*args(lib))
            except Exception as e:   # noqa: BLE001
                want = type(e)
            if lib is torch:
                theirs = want
        assert want == theirs, name


def test_errors_as_pytorch():
    def err(fn):
        try:
            fn()
        except Exception as e:   # noqa: BLE001
            return type(e), str(e).split("\n")[0]
        return None
    cases = [lambda lib: lib._foreach_add([lib.ones(2)], [lib.ones(2), lib.ones(2)]),
             lambda lib: lib._foreach_mul_([lib.ones(2)], [1.0, 2.0]),
             lambda lib: lib._foreach_exp([]),
             lambda lib: lib._foreach_lerp_([lib.ones(2), lib.ones(2)], [lib.ones(2)], 0.5),
             lambda lib: lib._foreach_addcmul_([lib.ones(2)], [lib.ones(2)], [lib.ones(2)], [1.0, 2.0])]
    for case in cases:
        assert err(lambda: case(tl)) is not None
        assert err(lambda: case(tl))[0] is err(lambda: case(torch))[0]
    assert err(lambda: cases[0](tl)) == err(lambda: cases[0](torch))


def test_autograd_out_of_place_and_leaves_in_place():
    arrays = _arrays(0)
    t, o = _both(arrays, requires_grad=True)
    t2, o2 = _both(_arrays(1), requires_grad=True)
    for lib, xs, ys in ((torch, t, t2), (tl, o, o2)):
        outs = lib._foreach_mul(lib._foreach_exp(xs), ys)
        outs = lib._foreach_lerp(outs, ys, 0.3)
        outs = lib._foreach_addcmul(outs, xs, lib._foreach_add(ys, 2.0), value=0.5)
        outs = lib._foreach_div(lib._foreach_sqrt(lib._foreach_abs(outs)), lib._foreach_add(ys, 2.0))
        sum(x.sum() for x in outs).backward()
    for a, b in zip(o + o2, t + t2):   # float32 gradients through sqrt near 0: a few ulps apart
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    for lib, xs in ((torch, t), (tl, o)):
        with pytest.raises(RuntimeError):
            lib._foreach_mul_(xs, 2.0)
        with pytest.raises(RuntimeError):
            lib._foreach_exp_(xs)
    with torch.no_grad():
        torch._foreach_mul_(t, 2.0)
    with tl.no_grad():
        tl._foreach_mul_(o, 2.0)
    _same(o, t)
    assert _versions(o) == _versions(t) and all(x.requires_grad for x in o)


def test_nonleaf_in_place_records_as_pytorch():
    t, o = _both(_arrays(0), requires_grad=True)
    for lib, xs in ((torch, t), (tl, o)):
        ys = lib._foreach_mul(xs, 1.5)
        lib._foreach_add_(ys, xs, alpha=0.5)
        lib._foreach_mul_(ys, [lib.tensor(a) for a in _arrays(1)])
        lib._foreach_neg_(ys)
        assert all(y.grad_fn is not None for y in ys)
        sum(y.sum() for y in ys).backward()
    for a, b in zip(o, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_norms_and_reductions():
    t, o = _both(_arrays(0))
    for ord_ in (2, 1, float("inf"), 3):
        _same(tl._foreach_norm(o, ord_), torch._foreach_norm(t, ord_), exact=ord_ == 2)
    _same(tl._foreach_max(o), torch._foreach_max(t))
    for ord_ in (2, 1, 3, 0.5, 0):
        _same(tl._foreach_powsum(o, ord_), torch._foreach_powsum(t, ord_), exact=False)
    t, o = _both(_arrays(0, np.float64))
    _same(tl._foreach_norm(o), torch._foreach_norm(t), exact=False)
    _same(tl._foreach_powsum(o), torch._foreach_powsum(t), exact=False)


def test_norm_gradients():
    """Inputs requiring grad keep the recorded path (PyTorch's powsum records too, and has no derivative)."""
    t, o = _both(_arrays(0), requires_grad=True)
    for lib, xs in ((torch, t), (tl, o)):
        n = lib._foreach_norm(xs)
        assert all(v.requires_grad for v in n + lib._foreach_powsum(xs, 3))
        sum(n).backward()
    for a, b in zip(o, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_in_place_writers_of_the_methods(dtype):
    """The in-place writers the loop shares with ``apply_`` (addcmul's and addcdiv's ``fwd_out``, lerp's with
    a weight tensor) and the ``out_form`` of the rounding ops and clamps, on the Tensor methods: same-shape,
    broadcast and 0-d operands, reduced dtypes."""
    rng = np.random.default_rng(5)
    def arr(*shape, lo=-2.0, hi=2.0):
        return rng.uniform(lo, hi, shape).astype(np.float32)
    a, b, c, w, row = arr(6, 33), arr(6, 33), arr(6, 33, lo=0.5), arr(6, 33, lo=-1, hi=2), arr(33, lo=0.5)
    calls = [lambda t, x: x.addcmul_(t(b), t(c), value=-0.3), lambda t, x: x.addcmul_(t(row), t(c)),
             lambda t, x: x.addcdiv_(t(b), t(c), value=0.7), lambda t, x: x.addcdiv_(t(b), t(row)),
             lambda t, x: x.addcdiv_(t(np.float32(2)), t(c), value=3),
             lambda t, x: x.lerp_(t(b), t(w)), lambda t, x: x.lerp_(t(b), t(row)),
             lambda t, x: x.mul_(7.3).floor_(), lambda t, x: x.mul_(7.3).ceil_(), lambda t, x: x.mul_(7.3).trunc_(),
             lambda t, x: x.mul_(2.5).round_(), lambda t, x: x.reciprocal_(),
             lambda t, x: x.clamp_min_(0.25), lambda t, x: x.clamp_max_(-0.25)]
    for call in calls:
        got = []
        for lib in (torch, tl):
            def t(v, lib=lib):
                return lib.tensor(v).to(getattr(lib, dtype))
            x = t(a)
            call(t, x)
            got.append((x.float().numpy(), x._version))
        np.testing.assert_array_equal(got[1][0], got[0][0])
        assert got[1][1] == got[0][1]


def test_lerp_weight_tensor_and_addcmul_bits_at_size():
    """A weight tensor per element (the numba pass), large enough to split across threads where there are any."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, 300, 257)).astype(np.float32)
    w = rng.uniform(-1, 2, (300, 257)).astype(np.float32)
    w[0, :4] = [0.5, -0.5, 0.49999997, np.nan]
    want = torch.lerp(torch.tensor(a), torch.tensor(b), torch.tensor(w)).numpy()
    np.testing.assert_array_equal(tl.lerp(tl.tensor(a), tl.tensor(b), tl.tensor(w)).numpy(), want)
    x = tl.tensor(a)
    x.lerp_(tl.tensor(b), tl.tensor(w))
    np.testing.assert_array_equal(x.numpy(), want)
    y, z = torch.tensor(a), tl.tensor(a)
    y.addcmul_(torch.tensor(b), torch.tensor(w), value=0.1)
    z.addcmul_(tl.tensor(b), tl.tensor(w), value=0.1)
    np.testing.assert_array_equal(z.numpy(), y.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_pass_forwards_special_values(dtype):
    """sign (ATen's ``(0 < x) - (x < 0)``: NaN and -0.0 give +0.0), frac, rsqrt, addcdiv on NaN, infinities,
    signed zeros and a size the loops split: values and sign bits as PyTorch's, out of place and in place."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal(40000).astype(dtype) * 3
    a[:8] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 2.5, -2.5, 1e-40]
    b, c = rng.standard_normal((2, 40000)).astype(dtype)
    c[:3] = [0.0, -0.0, np.nan]
    for name, args in (("sign", ()), ("frac", ()), ("rsqrt", ()), ("addcdiv", ("b", "c")), ("addcdiv", ("b", "c", 0.3))):
        res = []
        for lib in (torch, tl):
            ops = [lib.tensor({"b": b, "c": c}[v]) if isinstance(v, str) else v for v in args]
            kw = {"value": ops.pop()} if len(ops) == 3 else {}
            out = getattr(lib.tensor(a), name)(*ops, **kw).numpy()
            x = lib.tensor(a)
            getattr(x, name + "_")(*ops, **kw)
            res.append((out, x.numpy()))
        for got, want in zip(res[1], res[0]):
            np.testing.assert_array_equal(got, want)
            assert (np.signbit(got) == np.signbit(want)).all(), name


def test_integer_targets_refuse_float_results_as_pytorch():
    """An integer tensor's exp_/sqrt_ (ops with an in-place writer): PyTorch's RuntimeError and words (the
    writer's numpy casting error came through); int add_ with alpha and int addcmul_ still compute."""
    for name in ("exp_", "sqrt_", "sign_"):
        got = []
        for lib in (torch, tl):
            x = lib.arange(5) - 2
            try:
                getattr(x, name)()
                got.append(x.tolist())
            except Exception as e:   # noqa: BLE001 - compared with PyTorch's
                got.append((type(e), str(e)))
        assert got[1] == got[0], name
    got = []
    for lib in (torch, tl):
        x = lib.arange(5)
        x.add_(lib.arange(5), alpha=3)
        x.addcmul_(lib.arange(5), lib.arange(5), value=2)
        got.append(x.tolist())
    assert got[1] == got[0]


@pytest.mark.parametrize("bound", [0.5, 0.0, -0.0, 2, float("nan"), float("inf"), 3.3e38])
def test_clamp_by_a_number_special_values(bound):
    """clamp_min/clamp_max (and the foreach maximum/minimum by numbers) through the one-pass loop: NaN in
    either place, signed zeros, infinities, as PyTorch's, out of place and in place."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(50000).astype(np.float32)
    a[:6] = [np.nan, -0.0, 0.0, 0.5, np.inf, -np.inf]
    for name in ("clamp_min", "clamp_max"):
        res = []
        for lib in (torch, tl):
            x = lib.tensor(a)
            out = getattr(x, name)(bound).numpy()
            getattr(x, name + "_")(bound)
            fe = getattr(lib, "_foreach_" + name.replace("clamp_min", "maximum").replace("clamp_max", "minimum"))(
                [lib.tensor(a), lib.tensor(a[:100])], bound)
            res.append((out, x.numpy(), fe[0].numpy(), fe[1].numpy()))
        for got, want in zip(res[1], res[0]):
            np.testing.assert_array_equal(got, want)
            assert (np.signbit(got) == np.signbit(want)).all(), name
