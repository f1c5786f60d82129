"""The special functions' cuda path without a GPU (an H200 run found these): cupy 14 has no
``cupyx.scipy.special.airy``, and its Bessel kernels (CUDA's libdevice j0/y0/cyl_bessel_i0, and
``exp(-|x|) * i0(x)``, ``exp(x) * k0(x)`` for the scaled ones) differ from scipy at +-inf and for
large arguments.

- the special functions the cuda path may take from cupy are a declared table
  (``backend.CUPY_SPECIAL``, cupy 14's names), checked against an installed cupy and against every
  name engine code asks for; the simulated cuda device refuses the others as cupy does, and
  computes ``HOST_SPECIAL`` (airy) on the host;
- the Bessel forwards (engine/ops/special_limits.py) with numpy as ``xp`` against scipy and PyTorch
  on the edges and large arguments, float32 and float64;
- the same forwards on a stand-in for cupy's kernels (their formulas, CUDA's documented limits):
  scipy's values come out.
"""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
import scipy.special as sps
import torch

import tapelab
from tapelab.base import backend
from tapelab.ops import special_limits
from tapelab.ops.special_limits import BESSEL, scipy_bessel

ENGINE = pathlib.Path(tapelab.__file__).parent
# tests/opdb/special.py's edges, and the large arguments where cupy's products over/underflow
EDGES = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -3.7, 10.0, -10.0, 30.0, np.nan, np.inf, -np.inf])
LARGE = np.array([499.9, 500.0, -500.0, 600.0, -650.0, 700.0, 705.0, 708.0, 709.7, 709.8, -709.8, 712.0, 714.0,
                  720.0, 800.0, 1e4, -1e6, 1e30, 1e300, -1e300])
X = np.concatenate([EDGES, LARGE])
TORCH = {"i0": "i0", "i1": "i1", "i0e": "i0e", "i1e": "i1e", "k0": "modified_bessel_k0", "k1": "modified_bessel_k1",
         "k0e": "scaled_modified_bessel_k0", "k1e": "scaled_modified_bessel_k1", "j0": "bessel_j0",
         "j1": "bessel_j1", "y0": "bessel_y0", "y1": "bessel_y1"}
DTYPES = ("float32", "float64")


# ---------------------------------------------------------------- the declared table
def _requested_names() -> set:
    """Every special-function name engine code takes from ``backend.special(xp)``."""
    pats = [r"special\(xp\)\.(\w+)", r"\bsp\.(\w+)\(", r"_sp\(\"(\w+)\"\)", r"_bessel\(\"(\w+)\"\)",
            r"scipy_bessel\(\"(\w+)\"\)"]
    names = set()
    for path in ENGINE.rglob("*.py"):
        text = path.read_text()
        if "special" not in text:
            continue
        for p in pats:
            names.update(re.findall(p, text))
    return names - {"_data", "bsr_matrix", "coo_matrix", "csc_matrix", "csr_matrix"}   # scipy.sparse's ``sp``


def test_every_requested_name_is_declared():
    names = _requested_names() | set(BESSEL)
    assert {"airy", "i0e", "k1e", "erf", "zeta", "betainc"} <= names     # the scan sees the call sites
    assert sorted(names - backend.CUPY_SPECIAL - backend.HOST_SPECIAL) == []
    assert not backend.CUPY_SPECIAL & backend.HOST_SPECIAL
    assert [n for n in names if not hasattr(sps, n)] == []


def test_table_against_installed_cupy():
    special = pytest.importorskip("cupyx.scipy.special", reason="cupy is not installed")
    have = {n for n in dir(special) if not n.startswith("_")}
    assert sorted(backend.CUPY_SPECIAL - have) == []
    assert sorted(backend.HOST_SPECIAL & have) == [], "cupy has these now: move them to CUPY_SPECIAL"


def test_simulated_device_takes_only_the_table():
    with backend.simulated_cuda() as dev:
        sp = backend.special(dev.xp)
        assert sp.i0e is sps.i0e
        with pytest.raises(AttributeError, match="CUPY_SPECIAL"):
            sp.hyp2f1          # noqa: B018 - scipy has it, cupy 14 does not
        a = dev.xp.asarray(np.array([-1.0, 0.5, 2.0]))
        ai = sp.airy(a)[0]     # HOST_SPECIAL: on the host, back on the device
        assert type(ai) is type(a)
        np.testing.assert_array_equal(ai.get(), sps.airy(np.array([-1.0, 0.5, 2.0]))[0])
    assert backend.special(np) is sps


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", [*TORCH.values(), "modified_bessel_i0", "modified_bessel_i1", "airy_ai"])
def test_simulated_cuda_against_cpu(name, dtype):
    fn = getattr(tapelab.special, name)
    want = fn(tapelab.tensor(X, dtype=getattr(tapelab, dtype))).numpy()
    with backend.simulated_cuda() as dev:
        got = fn(tapelab.tensor(X, dtype=getattr(tapelab, dtype), device=dev))
        assert got.device == dev
        got = got.cpu().numpy()
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- the forwards against scipy and PyTorch
def _scipy(fname, x, dtype):
    """scipy's value in float64, rounded to ``dtype`` (tapelab computes float32 in float64 too)."""
    with np.errstate(all="ignore"):
        return getattr(sps, fname)(x.astype(dtype).astype("float64")).astype(dtype)


def _check(got, want, dtype, rtol=4e-15):
    np.testing.assert_allclose(got, want, rtol=rtol if dtype == "float64" else 0, atol=0)
    real = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got)[real], np.signbit(want)[real])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fname", BESSEL)
def test_forward_against_scipy(fname, dtype):
    x = X.astype(dtype)
    with np.errstate(divide="raise", invalid="raise"):     # the fix-ups compute no 1/0, inf - inf, 0 * inf
        got = scipy_bessel(fname)(np, x)
    assert got.dtype == np.dtype(dtype)
    _check(got, _scipy(fname, X, dtype), dtype)


@pytest.mark.parametrize("fname", ["i0e", "i1e", "k0e", "k1e"])
def test_asymptotic_range_against_scipy(fname):
    x = np.concatenate([np.linspace(500, 720, 2001), np.geomspace(500, 1e300, 2001)])
    x = np.concatenate([x, -x])
    _check(scipy_bessel(fname)(np, x), _scipy(fname, x, "float64"), "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fname", BESSEL)
def test_against_torch(fname, dtype):
    # PyTorch's j0 ... keep their phase to ~1e-6 in float32 up to x ~ 1e3, in float64 to 1e20
    x = X[np.abs(np.nan_to_num(X, nan=0.0)) < (1e20 if dtype == "float64" else 1e3)]
    got = getattr(tapelab.special, TORCH[fname])(tapelab.tensor(x, dtype=getattr(tapelab, dtype))).numpy()
    want = getattr(torch.special, TORCH[fname])(torch.tensor(x, dtype=getattr(torch, dtype))).numpy()
    # tests/opdb/special.py's tolerance for the edges (PyTorch's j0 ... are other polynomials than
    # Cephes': ~1e-10 relative); float32: PyTorch computes in float32
    tol = dict(rtol=2e-8, atol=1e-12) if dtype == "float64" else dict(rtol=2e-6, atol=3e-6)
    np.testing.assert_allclose(got, want, **tol)


def test_airy_against_scipy_and_torch():
    for dtype in DTYPES:
        got = tapelab.special.airy_ai(tapelab.tensor(X.astype(dtype))).numpy()
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(got, sps.airy(X.astype(dtype).astype("float64"))[0].astype(dtype))
        # PyTorch on the edges only: at 1e30 it gives 0 where scipy (and tapelab) give NaN
        got = tapelab.special.airy_ai(tapelab.tensor(EDGES.astype(dtype))).numpy()
        np.testing.assert_allclose(got, torch.special.airy_ai(torch.tensor(EDGES.astype(dtype))).numpy(),
                                   rtol=2e-8 if dtype == "float64" else 1e-5, atol=1e-12)


# ---------------------------------------------------------------- cupy's kernels, by their formulas
class _CupyLike:
    """cupyx.scipy.special 14's Bessel kernels as cupy writes them, with CUDA libdevice's documented
    values: j0/j1(+-inf) = +-0, y0/y1(+inf) = +0, cyl_bessel_i0/i1 the true value (finite to ~713.98,
    +-inf beyond and at +-inf: scipy's iv); i0e = exp(-|x|) * i0(x), k0e = exp(x) * k0(x); k0/k1
    scipy's (cupy's Cephes port). No airy."""

    @staticmethod
    def _true_i(order, x):
        with np.errstate(all="ignore"):
            return np.where(np.isinf(x), np.inf * np.sign(x) if order else np.inf, sps.iv(order, x))

    def i0(self, x):
        return self._true_i(0, x)

    def i1(self, x):
        return self._true_i(1, x)

    def i0e(self, x):
        with np.errstate(all="ignore"):
            return np.exp(-np.abs(x)) * self.i0(x)

    def i1e(self, x):
        with np.errstate(all="ignore"):
            return np.exp(-np.abs(x)) * self.i1(x)

    k0, k1 = staticmethod(sps.k0), staticmethod(sps.k1)

    def k0e(self, x):
        with np.errstate(all="ignore"):
            return np.exp(x) * sps.k0(x)

    def k1e(self, x):
        with np.errstate(all="ignore"):
            return np.exp(x) * sps.k1(x)

    @staticmethod
    def _cuda(fn, pos, neg):
        def f(x):
            return np.where(x == np.inf, pos, np.where(x == -np.inf, neg, fn(x)))
        return staticmethod(f)

    j0, j1 = _cuda(sps.j0, 0.0, 0.0), _cuda(sps.j1, 0.0, -0.0)
    y0, y1 = _cuda(sps.y0, 0.0, np.nan), _cuda(sps.y1, 0.0, np.nan)


def test_stand_in_differs_where_reported():
    """The stand-in reproduces the H200 failures: every reported function differs from scipy on the edges."""
    cupy_like = _CupyLike()
    for fname in ("i0", "i1", "i0e", "i1e", "k0e", "k1e", "j0", "j1", "y0", "y1"):
        with np.errstate(all="ignore"):
            same = np.allclose(getattr(cupy_like, fname)(EDGES), _scipy(fname, EDGES, "float64"), equal_nan=True)
        assert not same, fname


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fname", BESSEL)
def test_forward_repairs_cupy_kernels(fname, dtype, monkeypatch):
    cupy_like = _CupyLike()
    monkeypatch.setattr(special_limits._backend, "special", lambda xp: cupy_like)
    with np.errstate(all="ignore"):             # the stand-in computes cupy's inf * 0
        got = scipy_bessel(fname)(np, X.astype(dtype))
    _check(got, _scipy(fname, X, dtype), dtype, rtol=1e-13)   # CUDA's finite values are its own
