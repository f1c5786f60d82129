"""float32 ``log1p`` and ``expm1`` give PyTorch's CPU floats bit for bit: ATen runs Sleef's ``log1pf_u10`` /
``expm1f_u10`` over every element (``vec::map``: the tail as a partial vector), where numpy's differed in about
one value in six (log1p) and one in twenty-four (expm1) of ``exp(2 randn)``: a printed loss's last digit
(pytorch/examples' mnist_forward_forward, ``log1p(exp(...)).mean()``)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")   # the Sleef loops exist only with numba (the [jit] extra)
torch = pytest.importorskip("torch")

import tapelab as tl  # noqa: E402
from tapelab import kernels  # noqa: E402

_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -0.99999994, -1.0000001, -2.0, 1e-45, -1e-45,
                   1e-40, -1e-40, 1.1754942e-38, 1e-8, -1e-8, 0.5, -0.5, 1.0, 9.99e37, 1e38, 1.0000001e38, 3e38,
                   3.4028235e38, -3.4028235e38, 88.72283, 88.72284, 89.0, 100.0, -16.635532, -16.63553, -17.0,
                   -104.0, -1e30], np.float32)
_OPS = ["log1p", "expm1"]


@pytest.fixture(params=[1, 2], ids=["1 thread", "2 threads"])
def threads(request):
    if not kernels.enabled():
        pytest.skip("the fused loops are off")
    torch.set_num_threads(request.param)
    tl.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(1)
    tl.set_num_threads(1)


def _values(n: int, seed: int) -> np.ndarray:
    """Normal * 3, exp(2 normal), (-1, 0), (-20, 90), any bit pattern; the edges first."""
    rng = np.random.default_rng(seed)
    k = n // 5
    parts = [(rng.standard_normal(k) * 3), np.exp(2 * rng.standard_normal(k)), -rng.random(k),
             rng.uniform(-20, 90, k)]
    x = np.concatenate([p.astype(np.float32) for p in parts]
                       + [rng.integers(0, 1 << 32, n - 4 * k, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    m = min(n, _EDGES.size)
    x[:m] = _EDGES[:m]
    return x


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("op", _OPS)
def test_200k_values_and_edges_are_pytorchs_bit_for_bit(op, threads):
    x = _values(200_000, 7)
    want = getattr(torch, op)(torch.from_numpy(x)).numpy()
    assert _same(getattr(tl, op)(tl.from_numpy(x)).numpy(), want)
    assert not _same(getattr(np, op)(x), want)    # numpy's own differs: the test can fail


@pytest.mark.parametrize("op", _OPS)
def test_edges_alone_are_pytorchs(op, threads):
    got = getattr(tl, op)(tl.from_numpy(_EDGES.copy())).numpy()
    want = getattr(torch, op)(torch.from_numpy(_EDGES.copy())).numpy()
    assert _same(got, want)
    assert got[1].tobytes() == np.float32(-0.0).tobytes()   # -0.0 keeps its sign


@pytest.mark.parametrize("n", [1, 15, 16, 17, 33, 4099, 70_000])
@pytest.mark.parametrize("op", _OPS)
def test_every_size_is_pytorchs(op, n, threads):
    """No scalar tail: a short tensor's values are the same as inside a long one."""
    x = _values(n, n)
    assert _same(getattr(tl, op)(tl.from_numpy(x)).numpy(), getattr(torch, op)(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("view", ["transposed", "strided rows", "column", "every other"])
@pytest.mark.parametrize("op", _OPS)
def test_views_are_pytorchs(op, view):
    x = _values(300 * 250, 5).reshape(300, 250)
    pick = {"transposed": lambda t: t.T, "strided rows": lambda t: t[:, 3:200], "column": lambda t: t[:, 5],
            "every other": lambda t: t[::2, ::3]}[view]
    got = getattr(tl, op)(pick(tl.from_numpy(x))).numpy()
    assert _same(got, getattr(torch, op)(pick(torch.from_numpy(x))).numpy())


@pytest.mark.parametrize("op", _OPS)
def test_in_place_and_out_are_pytorchs(op):
    x = _values(40_000, 11)
    want = getattr(torch, op)(torch.from_numpy(x)).numpy()
    t = tl.from_numpy(x.copy())
    getattr(t, op + "_")()
    assert _same(t.numpy(), want)
    out = tl.empty(x.shape)
    getattr(tl, op)(tl.from_numpy(x), out=out)
    assert _same(out.numpy(), want)


@pytest.mark.parametrize("op", _OPS)
def test_gradient_matches_pytorch(op):
    x = (np.random.default_rng(3).random(1000) * 4 - 0.9).astype(np.float32)
    a, b = tl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    getattr(tl, op)(a).sum().backward()
    getattr(torch, op)(b).sum().backward()
    assert _same(a.grad.numpy(), b.grad.numpy())


@pytest.mark.parametrize("op", _OPS)
def test_float64_gradcheck(op):
    x = tl.tensor(np.linspace(-0.5, 2.0, 7), dtype=tl.float64, requires_grad=True)
    assert tl.autograd.gradcheck(getattr(tl, op), (x,))
    want = getattr(torch, op)(torch.from_numpy(x.detach().numpy())).numpy()   # float64 stays numpy's: close
    np.testing.assert_allclose(getattr(tl, op)(x).detach().numpy(), want, rtol=1e-15)


def test_softplus_loss_of_mnist_forward_forward():
    """``log1p(exp(cat([-g_pos + t, g_neg - t]))).mean()``, the printed loss that parted in its last digit."""
    rng = np.random.default_rng(0)
    g = (rng.random((2, 256)) * 4).astype(np.float32)
    got = tl.log1p(tl.exp(tl.cat([-tl.from_numpy(g[0]) + 2.0, tl.from_numpy(g[1]) - 2.0]))).mean()
    want = torch.log1p(torch.exp(torch.cat([-torch.from_numpy(g[0]) + 2.0, torch.from_numpy(g[1]) - 2.0]))).mean()
    assert got.item() == want.item()


def test_compiled_expm1_is_fused_with_eagers_floats():
    """float32 expm1 is a fused kernel's member (Sleef's form, vectorised): the same floats as PyTorch's."""
    x = _values(50_000, 13)
    x = np.where(np.isfinite(x), np.clip(x, -30, 30), x).astype(np.float32)

    def f(a):
        return (a * 1.5 - 0.25).expm1() * 2.0

    want = torch.expm1(torch.from_numpy(x) * 1.5 - 0.25) * 2.0
    assert _same(tl.compile(f)(tl.from_numpy(x)).numpy(), want.numpy())
    assert _same(f(tl.from_numpy(x)).numpy(), want.numpy())


def test_compiled_expm1_runs_inside_the_fused_kernel():
    def f(x):
        y = (x * 0.5).expm1() * 2.0 + 1.0
        return (y.tanh() * y).sum()

    ops = tl._dynamo.explain(f)(tl.randn(256)).ops_per_graph
    fused = [o for o in ops[0] if o.startswith("fused(")]
    assert any("expm1" in o[len("fused("):-1].split(", ") for o in fused)
