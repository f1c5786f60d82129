"""Small, high-traffic gaps of the PyTorch surface (issue 14), each checked against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

LEGACY = ("FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
          "ByteTensor", "BoolTensor")


# ---------------------------------------------------------------- 1. legacy typed constructors
@pytest.mark.parametrize("name", LEGACY)
def test_legacy_constructor_dtype_shape_and_isinstance(name):
    for m in (torch, tapelab):
        T = getattr(m, name)
        data = T([1, 0, 2])
        want = getattr(torch, name)([1, 0, 2])
        assert str(data.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        assert data.tolist() == want.tolist()
        assert tuple(T(2, 3).shape) == (2, 3) and tuple(T().shape) == (0,)
        assert tuple(T(m.Size([4])).shape) == (4,)
        assert not issubclass(T, m.Tensor)
        assert isinstance(data, T) and isinstance(data, m.Tensor)
        others = [n for n in LEGACY if n != name]
        assert not any(isinstance(data, getattr(m, o)) for o in others)
        assert T.dtype == getattr(m, str(want.dtype).split(".")[-1])


def test_legacy_constructor_semantics_match_torch():
    assert tapelab.LongTensor([1.5, 2.7]).tolist() == torch.LongTensor([1.5, 2.7]).tolist() == [1, 2]
    assert isinstance(tapelab.ones(2), tapelab.FloatTensor) and not isinstance(tapelab.ones(2), tapelab.LongTensor)
    assert isinstance(tapelab.nn.Parameter(tapelab.ones(2)), tapelab.FloatTensor)
    assert isinstance(tapelab.arange(3), tapelab.LongTensor)
    assert not isinstance(tapelab.ones(2, device="meta"), tapelab.FloatTensor)
    x = tapelab.ones(2)
    y = tapelab.FloatTensor(x)
    assert y.data_ptr() == x.data_ptr()
    for m in (torch, tapelab):
        with pytest.raises(TypeError):
            m.FloatTensor(m.ones(2, dtype=m.long))
        with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
            m.FloatTensor([1.0], device="meta")
    assert repr(tapelab.FloatTensor) == "<class 'tapelab.FloatTensor'>"
    assert tapelab.FloatTensor(np.array([1, 2])).dtype == tapelab.float32


# ---------------------------------------------------------------- 2. in-place random draws
N = 200_000


def _draw(method, *args, dtype=tapelab.float32, **kw):
    t = tapelab.empty(N, dtype=dtype)
    out = getattr(t, method)(*args, **kw)
    assert out is t and t.shape == (N,) and t.dtype == dtype
    return t.numpy().astype(np.float64)


def test_inplace_draws_have_the_distributions_moments():
    u = _draw("uniform_", -2, 3)
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 25 / 12) < 0.03
    n = _draw("normal_", 1.0, 2.0)
    assert abs(n.mean() - 1) < 0.02 and abs(n.std() - 2) < 0.02
    b = _draw("bernoulli_", 0.3)
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
    e = _draw("exponential_", 4.0)
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005
    ln = _draw("log_normal_", 0.0, 0.5)
    assert abs(np.log(ln).mean()) < 0.01 and abs(np.log(ln).std() - 0.5) < 0.01
    c = _draw("cauchy_", 1.0, 2.0)
    assert abs(np.median(c) - 1) < 0.05 and abs(np.subtract(*np.percentile(c, [75, 25])) - 4) < 0.1
    g = _draw("geometric_", 0.25)
    assert g.min() >= 1 and abs(g.mean() - 4) < 0.05 and np.all(g == np.round(g))
    r = _draw("random_", 3, 7, dtype=tapelab.int64)
    assert set(np.unique(r)) == {3, 4, 5, 6}
    r = _draw("random_", 5, dtype=tapelab.int32)
    assert set(np.unique(r)) == {0, 1, 2, 3, 4}
    p = tapelab.tensor([0.0, 1.0, 0.0, 1.0])
    assert tapelab.empty(4).bernoulli_(p).tolist() == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int8", "uint8", "bool", "int64"])
def test_random_default_range_is_torchs(dtype):
    t, tt = tapelab.empty(20000, dtype=getattr(tapelab, dtype)), torch.empty(20000, dtype=getattr(torch, dtype))
    got, want = t.random_().numpy().astype(float), tt.random_().numpy().astype(float)
    assert got.min() >= 0
    top = {"float32": 2 ** 24, "float64": 2 ** 53, "float16": 2 ** 11, "int32": 2 ** 31 - 1, "int8": 127,
           "uint8": 255, "bool": 1, "int64": 2 ** 63 - 1}[dtype]
    assert got.max() <= top and want.max() <= top and got.max() > top / 2


def test_inplace_draws_with_a_generator_are_reproducible():
    for method, args in (("uniform_", ()), ("normal_", (0, 1)), ("bernoulli_", (0.5,)), ("exponential_", ()),
                         ("random_", (0, 10)), ("cauchy_", ()), ("log_normal_", ()), ("geometric_", (0.3,))):
        g = tapelab.Generator().manual_seed(7)
        a = getattr(tapelab.empty(16), method)(*args, generator=g).tolist()
        b = getattr(tapelab.empty(16), method)(*args, generator=g).tolist()
        g.manual_seed(7)
        assert getattr(tapelab.empty(16), method)(*args, generator=g).tolist() == a != b, method
        tapelab.manual_seed(3)
        c = getattr(tapelab.empty(16), method)(*args).tolist()
        tapelab.manual_seed(3)
        assert getattr(tapelab.empty(16), method)(*args).tolist() == c, method


def test_inplace_draw_errors_match_torch():
    cases = [("uniform_", (2, 1), {}, tapelab.float32), ("normal_", (0, -1), {}, tapelab.float32),
             ("bernoulli_", (1.5,), {}, tapelab.float32), ("exponential_", (-1,), {}, tapelab.float32),
             ("geometric_", (0,), {}, tapelab.float32), ("random_", (5, 2), {}, tapelab.float32),
             ("uniform_", (), {}, tapelab.int64), ("normal_", (), {}, tapelab.int64)]
    for method, args, kw, dt in cases:
        tt = torch.empty(3, dtype=getattr(torch, dt.name))
        with pytest.raises(Exception) as want:
            getattr(tt, method)(*args, **kw)
        with pytest.raises(want.type) as got:
            getattr(tapelab.empty(3, dtype=dt), method)(*args, **kw)
        assert str(got.value) == str(want.value), method


def test_inplace_draws_in_autograd_and_on_meta():
    w = tapelab.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.uniform_()
    with tapelab.no_grad():
        w.uniform_()                                      # init under no_grad, as nn.init does
    assert w.requires_grad and w.is_leaf
    x = tapelab.ones(3, requires_grad=True)
    y = x * 2
    v = y._version
    y.normal_()
    assert y._version == v + 1 and y.grad_fn.name() == "NormalBackward0"
    (y * 3).sum().backward()
    assert x.grad is None or x.grad.tolist() == [0.0, 0.0, 0.0]   # the old value gets no gradient
    m = tapelab.empty(2, 3, device="meta").uniform_()
    assert m.is_meta and m.shape == (2, 3)


@pytest.mark.parametrize("method,args", [("uniform_", ()), ("normal_", ()), ("bernoulli_", (0.5,)),
                                         ("exponential_", ()), ("random_", (0, 4))])
def test_capture_refuses_inplace_draws(method, args):
    from tapelab.graphs import CaptureError, Graph, graph
    static = tapelab.zeros(4)
    with pytest.raises(CaptureError, match=rf"^{method}\b.*draws random numbers"):
        with graph(Graph()):
            getattr(static, method)(*args)
    with pytest.raises(CaptureError, match=r"multinomial\(\) draws random numbers"):
        with graph(Graph()):
            tapelab.multinomial(static + 1, 2)


# ---------------------------------------------------------------- multinomial
def test_multinomial_samples_and_shapes():
    p = tapelab.tensor([0.1, 0.0, 0.6, 0.3])
    s = tapelab.multinomial(p, 50_000, replacement=True)
    assert s.dtype == tapelab.int64 and s.shape == (50_000,)
    freq = np.bincount(s.numpy(), minlength=4) / 50_000
    np.testing.assert_allclose(freq, [0.1, 0.0, 0.6, 0.3], atol=0.01)
    rows = tapelab.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 5.0, 1.0]])
    s = rows.multinomial(4)
    assert s.shape == (2, 4) and sorted(s[0].tolist()) == [0, 1, 2, 3] and sorted(s[1].tolist()) == [0, 1, 2, 3]
    assert s[1, :2].tolist() in ([2, 3], [3, 2])          # non-zero categories come before zero ones
    # without replacement: first draw follows p
    firsts = [tapelab.multinomial(tapelab.tensor([1.0, 3.0]), 2)[0].item() for _ in range(2000)]
    assert abs(np.mean(firsts) - 0.75) < 0.04
    g = tapelab.Generator().manual_seed(1)
    a = tapelab.multinomial(p, 20, True, generator=g)
    g.manual_seed(1)
    assert tapelab.multinomial(p, 20, True, generator=g).tolist() == a.tolist()


def test_multinomial_errors_match_torch():
    cases = [(([0.0, 1.0, 2.0],), 0, False), (([0.0, 1.0, 2.0],), 4, False), (([0.0, -1.0],), 1, False),
             (([0.0, 0.0],), 1, False), (([[1.0, float("nan")]],), 1, False), (([1.0, 2.0], "long"), 1, False),
             ((1.0,), 1, False), (([[[1.0]]],), 1, False)]
    for (data, *dt), n, repl in cases:
        kw = {"dtype": getattr(torch, dt[0])} if dt else {}
        with pytest.raises(Exception) as want:
            torch.multinomial(torch.tensor(data, **kw), n, repl)
        kw = {"dtype": getattr(tapelab, dt[0])} if dt else {}
        with pytest.raises(want.type) as got:
            tapelab.multinomial(tapelab.tensor(data, **kw), n, repl)
        assert str(got.value) == str(want.value)


# ---------------------------------------------------------------- 3. constants, printing, predicates
def test_constants():
    for name in ("pi", "e", "inf", "nan"):
        a, b = getattr(tapelab, name), getattr(torch, name)
        assert type(a) is type(b) and (a == b or (a != a and b != b)), name


@pytest.fixture
def printoptions():
    yield
    torch.set_printoptions(profile="default")
    tapelab.set_printoptions(profile="default")


REPR_VALUES = [[1.0, 2000.0], [1e-5, 1.0], 3.0, [3.0], [1.5, -2.25, float("nan"), float("inf")], [0.0, 0.0],
               [1, 2, 300], [True, False], [[1.0, 2.0], [3.0, 4.5]], [1e9, 1.0], [0.1, 0.2], [float("nan")], [[]]]
REPR_ARRAYS = [np.random.default_rng(0).standard_normal(s).astype(np.float32)
               for s in [(2000,), (40, 50), (3, 4, 5), (1001,), (7,), (2, 3, 4, 5)]] + \
    [np.arange(2000.0), np.arange(30).reshape(5, 6), np.array([1.5, 2.5], np.float16),
     np.arange(24.0).reshape(2, 3, 4) * 1e5]


@pytest.mark.parametrize("options", [{}, dict(precision=2, threshold=5, edgeitems=1, linewidth=20),
                                     dict(profile="short"), dict(sci_mode=True), dict(sci_mode=False),
                                     dict(edgeitems=0, threshold=3), dict(profile="full"),
                                     dict(linewidth=120, precision=6)], ids=str)
def test_repr_follows_printoptions_as_torch(options, printoptions):
    torch.set_printoptions(**options)
    tapelab.set_printoptions(**options)
    for x in [np.array(v) for v in REPR_VALUES] + REPR_ARRAYS:
        # "tapelab." is two characters longer than "torch.": a dtype suffix may wrap onto its own
        # line in one and not the other
        want = repr(torch.tensor(x)).replace(",\n       dtype=", ", dtype=")
        got = repr(tapelab.tensor(x)).replace(",\n       dtype=", ", dtype=").replace("dtype=tapelab.", "dtype=torch.")
        assert got == want


def test_zero_dim_format_is_the_items():
    for v in (3.0, 2, True, 0.1):
        t, tt = tapelab.tensor(v), torch.tensor(v)
        assert f"{t}" == f"{tt}" and f"{t!s}" == str(t)
    assert f"{tapelab.tensor(3.14159):.2f}" == f"{torch.tensor(3.14159):.2f}" == "3.14"
    assert f"{tapelab.tensor([3.0])}" == "tensor([3.])"
    with pytest.raises(TypeError):
        f"{tapelab.tensor([3.0]):.2f}"
    with pytest.raises(TypeError):
        f"{torch.tensor([3.0]):.2f}"


def test_device_predicates_as_torch_reports_them_for_cpu():
    t, tt = tapelab.ones(2), torch.ones(2)
    props = [n for n in dir(torch.Tensor) if n.startswith("is_") and not callable(getattr(tt, n))]
    for n in props:
        assert getattr(t, n) == getattr(tt, n), n
    for n in ("is_conj", "is_neg", "is_inference", "is_shared", "is_signed"):
        assert getattr(t, n)() == getattr(tt, n)(), n
    assert t.is_same_size(tapelab.zeros(2)) and not t.is_same_size(tapelab.zeros(3))
    assert tapelab.tensor([2.0]).is_nonzero() and not tapelab.ones(1, dtype=tapelab.uint8).is_signed()
