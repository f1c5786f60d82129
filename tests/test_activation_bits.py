"""float32 sigmoid, silu, gelu (erf and tanh forms), softmax and log_softmax, forward and backward, equal
PyTorch's CPU results bit for bit (``kernels.fastmath``'s Sleef, ATen and oneDNN functions, ``kernels.pointwise``
and ``kernels.rowwise``'s loops): random float32 over the whole range and the edges (+-0, denormals, the
overflow and underflow thresholds, +-inf, nan), at sizes that are and are not multiples of the vector step,
contiguous and not. PyTorch runs on one thread: on more, ATen cuts an elementwise array of over 32768
elements into one chunk per thread and each chunk gets a scalar tail of its own (libm's result, which can
differ from Sleef's in the last bit, for up to 31 elements before each cut; none in 10^6 measured)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")   # the exact loops exist only with numba (the [jit] extra)
torch = pytest.importorskip("torch")

from _threads import loops_at_one_thread  # noqa: E402
import tapelab as tl  # noqa: E402
import tapelab.nn.functional as TF  # noqa: E402

EDGES = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, -1.1754944e-38, 88.72283, 88.72284, 89.0, 100.0, 100.1,
                  -87.33654, -88.7, -103.97207, -103.97208, -104.0, -104.1, 3.4028235e38, -3.4028235e38, np.inf,
                  -np.inf, np.nan, 1.0, -1.0, 9.0, -9.0, 8.664339742, -8.6643, 5.54, -5.54, 3.92, 0.5, 1e-20, -1e-20,
                  16.0, -16.0, 1e4, -1e4], np.float32)
SIZES = [1, 2, 7, 16, 17, 31, 32, 33, 100, 4099, 40_000]


_one_thread = loops_at_one_thread()


def _inputs(n: int, seed: int, scale: float = 4.0) -> np.ndarray:
    """A mix: normal * ``scale``, uniform over +-110, any float32 bit pattern, and the edges."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 4, n)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.where(kind == 0, rng.standard_normal(n) * scale, rng.uniform(-110, 110, n)).astype(np.float32)
    x = np.where(kind == 2, bits, x)
    edge = kind == 3
    x[edge] = EDGES[rng.integers(0, EDGES.size, int(edge.sum()))]
    return x


def _same(ours, theirs, what: str) -> None:
    a = np.ascontiguousarray(ours.detach().numpy() if hasattr(ours, "detach") else ours, np.float32)
    b = np.ascontiguousarray(theirs.detach().numpy(), np.float32)
    assert a.shape == b.shape, what
    bad = (a.view(np.int32) != b.view(np.int32)) & ~(np.isnan(a) & np.isnan(b))
    assert not bad.any(), f"{what}: {int(bad.sum())} of {a.size} differ, e.g. {a[bad][:4]} vs {b[bad][:4]}"


UNARY = {
    "sigmoid": (lambda t: t.sigmoid(), lambda t: torch.sigmoid(t)),
    "silu": (lambda t: TF.silu(t), lambda t: torch.nn.functional.silu(t)),
    "gelu": (lambda t: TF.gelu(t), lambda t: torch.nn.functional.gelu(t)),
    "gelu_tanh": (lambda t: TF.gelu(t, approximate="tanh"), lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("n", SIZES)
def test_unary_forward_backward(name: str, n: int):
    ours_fn, torch_fn = UNARY[name]
    x = _inputs(n, n)
    g = _inputs(n, n + 1, 1.0)
    g[~np.isfinite(g)] = 1.0
    xt, xo = torch.tensor(x, requires_grad=True), tl.tensor(x, requires_grad=True)
    yt, yo = torch_fn(xt), ours_fn(xo)
    _same(yo, yt, f"{name} forward, n={n}")
    yt.backward(torch.from_numpy(g))
    yo.backward(tl.tensor(g))
    _same(xo.grad, xt.grad, f"{name} backward, n={n}")


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("view", ["transposed", "rows_sliced", "cols_strided", "cols_cut"])
def test_unary_not_contiguous(name: str, view: str):
    ours_fn, torch_fn = UNARY[name]
    base = _inputs(70 * 90, 3).reshape(70, 90)
    pick = {"transposed": lambda a: a.T, "rows_sliced": lambda a: a[::2], "cols_strided": lambda a: a[:, ::3],
            "cols_cut": lambda a: a[:, :37]}[view]
    yt = torch_fn(pick(torch.from_numpy(base)))
    yo = ours_fn(pick(tl.tensor(base)))
    _same(yo, yt, f"{name} on {view}")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (300, 7), (100, 16), (100, 17), (64, 33), (30, 100), (8, 1000),
                                   (3, 4099), (2, 100_003)])
def test_softmax_rows(name: str, shape):
    rng = np.random.default_rng(shape[1])
    x = (rng.standard_normal(shape) * rng.choice([0.01, 1.0, 5.0, 40.0], (shape[0], 1))).astype(np.float32)
    if shape[0] > 4:    # a few rows with the edges in them: +-inf, nan, huge, tiny
        x[1, 0], x[2, -1], x[3, 0] = np.inf, -np.inf, np.nan
        x[4, :] = -np.inf if shape[1] > 3 else x[4, :]
    g = rng.standard_normal(shape).astype(np.float32)
    xt, xo = torch.tensor(x, requires_grad=True), tl.tensor(x, requires_grad=True)
    yt, yo = getattr(torch, name)(xt, -1), getattr(TF, name)(xo, -1)
    _same(yo, yt, f"{name} forward {shape}")
    yt.backward(torch.from_numpy(g))
    yo.backward(tl.tensor(g))
    _same(xo.grad, xt.grad, f"{name} backward {shape}")


@pytest.mark.parametrize("shape", [(1000, 27), (64, 16), (33, 1000), (7, 5)])
def test_cross_entropy_rows(shape):
    """cross_entropy without label smoothing: PyTorch's nll_loss(log_softmax(x)), per row and reduced."""
    rng = np.random.default_rng(shape[1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    t = rng.integers(0, shape[1], shape[0])
    t[::7] = -1
    for reduction in ("none", "mean", "sum"):
        want = torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), ignore_index=-1,
                                                 reduction=reduction)
        got = TF.cross_entropy(tl.tensor(x), tl.tensor(t), ignore_index=-1, reduction=reduction)
        _same(got, want, f"cross_entropy {shape} {reduction}")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_not_contiguous(name: str):
    x = _inputs(64 * 70, 9, 3.0).reshape(64, 70)
    x[~np.isfinite(x)] = 0.0
    yt = getattr(torch, name)(torch.from_numpy(x).T, -1)
    yo = getattr(TF, name)(tl.tensor(x).T, -1)
    _same(yo, yt, f"{name} of a transposed input")


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("view", ["transposed", "cols_cut"])
def test_unary_backward_not_contiguous(name: str, view: str):
    """The backward of an op on a view: the saved input is strided, the incoming gradient contiguous."""
    ours_fn, torch_fn = UNARY[name]
    base = _inputs(70 * 90, 4).reshape(70, 90)
    pick = {"transposed": lambda a: a.T, "cols_cut": lambda a: a[:, :37]}[view]
    xt, xo = torch.tensor(base, requires_grad=True), tl.tensor(base, requires_grad=True)
    yt, yo = torch_fn(pick(xt)), ours_fn(pick(xo))
    g = _inputs(yt.numel(), 5, 1.0).reshape(yt.shape)
    g[~np.isfinite(g)] = 1.0
    yt.backward(torch.from_numpy(g))
    yo.backward(tl.tensor(g))
    _same(xo.grad, xt.grad, f"{name} backward on {view}")
