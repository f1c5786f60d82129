"""The float32 approximations compiled kernels use (tapelab.kernels.fastmath) hold their stated
ulp bounds over the whole float32 range: 2^22 sampled points per function (2^24 with --long: every exponent, uniformly
drawn bit patterns, plus a dense sweep of the interesting interval) and the edges (+-0, denormals,
the overflow and underflow thresholds, +-inf, nan). The reference is float64 (numpy/scipy) rounded
to float32. sigmoid and gelu are checked as the compiler generates them from the ops' forwards."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import special

pytest.importorskip("numba")   # the approximations exist only for numba's loops (the [jit] extra)

from numba import njit  # noqa: E402

from tapelab.compiler import cpu  # noqa: E402
from tapelab.kernels import fastmath  # noqa: E402
from tapelab.compiler.kernel import Kernel  # noqa: E402
from tapelab.compiler.symbolic import input_sym, trace_op  # noqa: E402
from tapelab.core.registry import REGISTRY  # noqa: E402

N = 1 << 21        # per half: 2^22 points and the edges by default, 2^24 with --long
EDGES = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38, -1.1754944e-38, 88.72283, 88.72284,
                  89.0, 9.5, -9.5, 9.01, 16.0, -87.33654, -103.97207, -103.97208, -104.0, 3.4028235e38, -3.4028235e38, np.inf, -np.inf,
                  np.nan, 1.0, -1.0, 0.625, -0.625, 9.0, -9.0, 4.0, -4.0, 3.92, 0.5, 2.0], np.float32)


@pytest.fixture
def n(request) -> int:
    return N * 4 if request.config.getoption("--long") else N


def _points(lo: float, hi: float, seed: int, n: int = N) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([bits, rng.uniform(lo, hi, n).astype(np.float32), EDGES])


def _ulps(got: np.ndarray, want64: np.ndarray) -> np.ndarray:
    """Distance in float32 steps (nan equals nan; a nan on one side only is 2^40)."""
    with np.errstate(over="ignore", invalid="ignore"):
        want = want64.astype(np.float32)
    a, b = (v.view(np.int32).astype(np.int64) for v in (got, want))
    a, b = (np.where(v < 0, -(v & 0x7FFFFFFF), v) for v in (a, b))
    d = np.abs(a - b)
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    d[nan_g & nan_w] = 0
    d[nan_g != nan_w] = 1 << 40
    return d


def _vectorised(f):
    @njit(error_model="numpy")
    def run(x, out):
        for i in range(x.size):
            out[i] = f(x[i])
    return run


@pytest.mark.parametrize("name, reference, lo, hi, bound", [
    ("exp32", np.exp, -110.0, 90.0, 2),
    ("log32", np.log, 0.0, 100.0, 2),
    ("tanh32", np.tanh, -12.0, 12.0, 3),
    ("erf32", special.erf, -5.0, 5.0, 3),
])
def test_ulp_bound_over_the_float32_range(name, reference, lo, hi, bound, n):
    x = _points(lo, hi, seed=len(name), n=n)
    out = np.empty_like(x)
    _vectorised(getattr(fastmath, name))(x, out)
    with np.errstate(all="ignore"):
        d = _ulps(out, reference(x.astype(np.float64)))
    worst = int(np.argmax(d))
    assert d.max() <= bound, f"{name}({x[worst]!r}) = {out[worst]!r}, want {reference(np.float64(x[worst]))!r}"


def test_edges_exactly():
    e = np.array([np.inf, -np.inf, np.nan, 0.0, 89.0, -104.0], np.float32)
    out = np.empty_like(e)
    _vectorised(fastmath.exp32)(e, out)
    assert out[0] == np.inf and out[1] == 0 and np.isnan(out[2]) and out[3] == 1 and out[4] == np.inf and out[5] == 0
    l = np.array([0.0, -1.0, np.inf, np.nan, 1e-45], np.float32)
    out = np.empty_like(l)
    _vectorised(fastmath.log32)(l, out)
    assert out[0] == -np.inf and np.isnan(out[1]) and out[2] == np.inf and np.isnan(out[3])
    assert out[4] == np.float32(np.log(np.float64(np.float32(1e-45))))
    for f, ref in ((fastmath.tanh32, np.tanh), (fastmath.erf32, special.erf)):
        v = np.array([np.inf, -np.inf, np.nan, -0.0], np.float32)
        out = np.empty_like(v)
        _vectorised(f)(v, out)
        assert out[0] == 1 and out[1] == -1 and np.isnan(out[2]) and out[3] == 0 and np.signbit(out[3])


def test_tanh_and_erf_past_their_clamps():
    """tanh32 computes e^2|x| only up to |x| = 9.5 and erf32 e^-x^2 only up to x^2 = 16 (one normal
    scale factor, no overflow test): beyond, the float32 answer is already +-1, and nan stays nan."""
    v = np.array([8.9, 9.01, 9.4999, 9.5, 9.5001, 12.0, 3.9999, 4.0, 1e30, np.inf], np.float32)
    v = np.concatenate([v, -v, np.array([np.nan, -np.nan], np.float32)])
    for f, ref in ((fastmath.tanh32, np.tanh), (fastmath.erf32, special.erf)):
        out = np.empty_like(v)
        _vectorised(f)(v, out)
        assert _ulps(out, ref(v.astype(np.float64))).max() <= 1


def _op_kernel(name: str, x: np.ndarray, **params):
    """The compiler's own kernel for one op, as lower() builds it."""
    sym = trace_op(REGISTRY[name], (input_sym(0, np.float32),), params)
    return cpu.load(Kernel(f"fused({name})", [("float32", x.shape)], [sym], x.shape, [name]), True)


def test_sigmoid_as_generated_from_its_forward(n):
    x = _points(-110.0, 90.0, seed=7, n=n)
    (out,) = _op_kernel("sigmoid", x)(x)
    with np.errstate(all="ignore"):
        d = _ulps(out, 1.0 / (1.0 + np.exp(-x.astype(np.float64))))
        eager = REGISTRY["sigmoid"].fwd(np, x)
    normal = ~(x <= -87.3)                       # nan included
    assert d[normal].max() <= 3
    np.testing.assert_array_equal(out[x < -88.8], eager[x < -88.8])   # 0, as eager float32


def test_gelu_as_generated_from_its_forward(n):
    """gelu(x) = x/2 (1 + erf(x/sqrt 2)) in float32 cancels for x < -1 (eager numpy does the same):
    the bound is 4 ulp for x >= -1 and, below, the error of eager's float32 formula plus 2 ulp of 1."""
    x = _points(-10.0, 10.0, seed=8, n=n)
    (out,) = _op_kernel("gelu", x, approximate="none")(x)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = x64 * 0.5 * (1.0 + special.erf(x64 / np.sqrt(2.0)))
        eager = REGISTRY["gelu"].fwd(np, x, approximate="none")
        d = _ulps(out, exact)
    pos = ~(x < -1.0)
    assert d[pos].max() <= 4
    neg = (x < -1.0) & np.isfinite(x)
    err, err_eager = np.abs(out[neg] - exact[neg]), np.abs(eager[neg] - exact[neg])
    assert np.all(err <= err_eager + 2 * np.abs(x64[neg]) * 2.0 ** -24)
