"""Small float32 loops called by their compiled code (session 29, ``kernels.entry``): sigmoid's and silu's
forward (``aten_map1``), a vector's whole sum (``_sum_fwd``'s short way, float32 and float64) and tanh's and
sigmoid's array vjps skip numba's dispatcher on aligned arrays, and keep it for the rest (unaligned,
read-only). Each must give PyTorch's floats bit for bit, the first call (which makes the entry) and the
calls after it alike, and one dtype's compiled code must never serve another's."""
import warnings

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels

SIZES = (1, 2, 7, 15, 16, 17, 31, 33, 100, 1027)
SPECIAL = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-30, -1e-30, 20.0, -20.0, 88.0], np.float32)


def _values(n: int, seed: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * (1, 4, 30)[seed % 3]).astype(dtype)
    if seed % 2 and dtype == np.float32:
        x[: min(n, SPECIAL.size)] = SPECIAL[: min(n, SPECIAL.size)]
    return x


def _same_floats(got: np.ndarray, want: np.ndarray) -> None:
    """Bit for bit, except that a NaN's payload and sign are free (PyTorch's and numpy's differ)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = np.int32 if want.dtype == np.float32 else np.int64
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


def _unaligned(x: np.ndarray) -> np.ndarray:
    """``x``'s values in memory one byte off its dtype's alignment."""
    buf = bytearray(x.nbytes + 1)
    out = np.frombuffer(buf, x.dtype, count=x.size, offset=1).reshape(x.shape)
    out[...] = x
    assert not out.flags.aligned
    return out


def _read_only(x: np.ndarray) -> np.ndarray:
    out = x.copy()
    out.flags.writeable = False
    return out


def _tensor(x: np.ndarray) -> tapelab.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # from_numpy's read-only warning, as PyTorch's
        return tapelab.from_numpy(x)


LAYOUTS = {"aligned": lambda x: x.copy(), "unaligned": _unaligned, "read-only": _read_only}


@pytest.fixture(autouse=True)
def _loops_on():
    if not kernels.enabled():
        pytest.skip("the fused loops are off (TAPELAB_EAGER_KERNELS=0 or no numba)")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("n", SIZES)
def test_sigmoid_and_silu_forward_bits(n, layout):
    x = _values(n, n)
    want_sigmoid = torch.sigmoid(torch.from_numpy(x)).numpy()
    want_silu = torch.nn.functional.silu(torch.from_numpy(x)).numpy()
    for _ in range(2):   # the call that makes the entry, then one through it
        t = _tensor(LAYOUTS[layout](x))
        _same_floats(t.sigmoid()._data, want_sigmoid)
        _same_floats(tapelab.nn.functional.silu(t)._data, want_silu)


def test_sigmoid_forward_2d_and_recorded():
    x = _values(48, 3).reshape(6, 8)
    want = torch.sigmoid(torch.from_numpy(x)).numpy()
    for _ in range(2):
        t = tapelab.tensor(x, requires_grad=True)
        y = t.sigmoid()
        _same_floats(y._data, want)
        assert y._data.base is None   # the result owns its memory


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("n", (1, 7, 16, 17, 33, 1027, 32767, 40000))
def test_vector_sum_bits(n, layout, dtype):
    x = _values(n, n + 1, dtype)
    want = torch.from_numpy(x).sum().numpy()
    want_kept = torch.from_numpy(x).sum(0, keepdim=True).numpy()
    for _ in range(2):
        t = _tensor(LAYOUTS[layout](x))
        got = t.sum()._data
        _same_floats(got, want)
        assert got.base is None and got.flags.writeable
        _same_floats(tapelab.sum(t, 0, keepdim=True)._data, want_kept)
        _same_floats(tapelab.sum(t, None, keepdim=True)._data, want.reshape(1))   # the short way's kept dim


def test_sum_entries_keep_their_dtype():
    """float64 then float32 then float64 again: each sum through its own dtype's compiled code."""
    for dtype in (np.float64, np.float32, np.float64, np.float32):
        x = _values(37, 5, dtype) * 1e3
        for _ in range(2):
            _same_floats(tapelab.tensor(x).sum()._data, torch.from_numpy(x).sum().numpy())


def test_sum_of_empty():
    got = tapelab.tensor(np.zeros(0, np.float32)).sum()._data
    assert got.shape == () and got.dtype == np.float32 and got == 0.0


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
@pytest.mark.parametrize("n", SIZES)
def test_small_backward_bits(n, name):
    """tanh's and sigmoid's array vjps through the entry (the array walk), against PyTorch's backward
    kernels on tapelab's forward output (tapelab's float32 tanh forward is VML's, not torch's)."""
    x, g = _values(n, n), _values(n, n + 7)
    aten = getattr(torch.ops.aten, f"{name}_backward")
    for _ in range(2):
        t = tapelab.tensor(x, requires_grad=True)
        y = getattr(t, name)()
        y.backward(tapelab.tensor(g))
        want = aten(torch.from_numpy(g), torch.from_numpy(y._data.copy())).numpy()
        _same_floats(t.grad._data, want)


def test_entry_matches_the_dispatcher():
    loops = kernels.loops("pointwise")
    x = _values(33, 4)
    out1, out2 = np.empty_like(x), np.empty_like(x)
    run = kernels.entry(loops.sigmoid, x, out1, 32, x.size)
    loops.sigmoid(x, out2, 32, x.size)
    out1[...] = 0
    run(x, out1, 32, x.size)
    _same_floats(out1, out2)
