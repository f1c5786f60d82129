"""Gaps found in session 32 (helper h7) running karpathy's minGPT (chargpt) and makemore and pytorch/examples
(regression, mnist_rnn, mnist_forward_forward, ...) unchanged under ``install_aliases()`` against real torch;
each pattern written here directly and checked against PyTorch.

pytorch/examples' regression fits ``[x, x^2, x^3, x^4]``: float32 ``x ** 4`` (and any power by a number
that ATen does not turn into products or roots) came from numpy's ``powf``, one ulp from PyTorch's Sleef
``powf`` in about one element in ten."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")   # the exact loop exists only with numba (the [jit] extra)
torch = pytest.importorskip("torch")

from _threads import loops_at_one_thread  # noqa: E402
import tapelab as tl  # noqa: E402

_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1.1754942e-38, 0.5, 2.0, -2.0, 88.0, 1e20, -1e-20,
                   3.4028235e38, np.inf, -np.inf, np.nan], np.float32)
_EXPONENTS = [4, 5, -4, 1.5, 2.5, -3.5, 0.3, 7.0, 100.0, 1e-3, -0.7, float("inf"), float("-inf"), float("nan")]


_one_thread = loops_at_one_thread()


def _values(n: int, seed: int) -> np.ndarray:
    """Normal * 3, a few of any bit pattern, and the edges."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.where(rng.random(n) < 0.05, bits, x)
    k = min(n, _EDGES.size)
    x[:k] = _EDGES[:k]
    return x


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("n", [1, 17, 31, 32, 33, 100, 4099])
@pytest.mark.parametrize("exponent", _EXPONENTS)
def test_float32_power_by_a_number_is_pytorchs_bit_for_bit(n, exponent):
    """Sleef's ``powf`` over the vector body, double ``pow`` rounded to float in the scalar tail."""
    x = _values(n, n)
    want = (torch.from_numpy(x) ** exponent).numpy()
    assert _same((tl.from_numpy(x) ** exponent).numpy(), want)
    assert _same(tl.pow(tl.from_numpy(x), exponent).numpy(), torch.pow(torch.from_numpy(x), exponent).numpy())


@pytest.mark.parametrize("view", ["transposed", "strided rows", "column"])
def test_float32_power_of_a_view_walks_as_aten(view):
    """A non-contiguous input: ATen's innermost loop (and so its scalar tail) is each row of the walk."""
    x = _values(45 * 70, 3).reshape(45, 70)
    pick = {"transposed": lambda t: t.T, "strided rows": lambda t: t[:, 3:68], "column": lambda t: t[:, 5]}[view]
    for exponent in (4, 1.5, -3.5):
        want = (pick(torch.from_numpy(x)) ** exponent).numpy()
        assert _same((pick(tl.from_numpy(x)) ** exponent).numpy(), want)


def test_power_gradients_match_pytorch_bit_for_bit():
    """``x ** 4`` and ``x ** 1.5`` backward: PyTorch's ``4 * x ** 3`` and ``1.5 * x ** 0.5`` times the
    gradient; the forward of ``x ** 2.5`` inside the vjp of ``x ** 3.5`` is the Sleef power too."""
    x = np.abs(_values(300, 7)[20:]) + np.float32(0.25)
    x = np.where(np.isfinite(x), x, np.float32(1.5)).astype(np.float32)
    for exponent in (4, 1.5, 3.5, -2.5):
        a = torch.from_numpy(x.copy()).requires_grad_()
        b = tl.from_numpy(x.copy()).requires_grad_()
        ya, yb = a ** exponent, b ** exponent
        (ya * torch.linspace(-1, 1, x.size)).sum().backward()
        (yb * tl.linspace(-1, 1, x.size)).sum().backward()
        assert _same(yb.detach().numpy(), ya.detach().numpy())
        assert _same(b.grad.numpy(), a.grad.numpy())


def test_polynomial_features_are_pytorchs():
    """pytorch/examples' regression builds ``cat([x ** i for i in 1..4], 1)`` from a seeded ``randn(32)``:
    the same features bit for bit (its losses still part in the last bit through the (32, 4) x (4, 1)
    product, which is below the size that takes MKL's GEMM)."""
    def features(lib):
        lib.manual_seed(0)
        lib.randn(5)
        r = lib.randn(32)
        return lib.cat([r.unsqueeze(1) ** i for i in range(1, 5)], 1).numpy()
    assert _same(features(tl), features(torch))


def test_float64_and_integer_powers_keep_their_dtypes():
    """Only float32 takes the loop; float64, integer and float16 powers keep numpy's results and PyTorch's dtypes."""
    for dtype in ("float64", "int64", "float16"):
        x = np.arange(1, 6).astype(dtype)
        want = torch.from_numpy(x) ** 3.5 if dtype != "int64" else torch.from_numpy(x) ** 4
        got = tl.from_numpy(x) ** 3.5 if dtype != "int64" else tl.from_numpy(x) ** 4
        assert str(got.dtype) == str(want.dtype).replace("torch.", "tapelab.")
        np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64), rtol=1e-3)


def test_in_place_and_out_powers_are_the_same_floats():
    """``pow_``, ``**=`` and ``pow(..., out=)`` write the loop's result."""
    x = _values(1000, 11)
    for exponent in (4, 1.5):
        a, b = torch.from_numpy(x.copy()), tl.from_numpy(x.copy())
        a.pow_(exponent)
        b.pow_(exponent)
        assert _same(b.numpy(), a.numpy())
        a, b = torch.from_numpy(x.copy()), tl.from_numpy(x.copy())
        a **= exponent
        b **= exponent
        assert _same(b.numpy(), a.numpy())
        oa, ob = torch.empty(1000), tl.empty(1000)
        torch.pow(torch.from_numpy(x), exponent, out=oa)
        tl.pow(tl.from_numpy(x), exponent, out=ob)
        assert _same(ob.numpy(), oa.numpy())
