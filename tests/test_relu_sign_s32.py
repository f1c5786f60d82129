"""relu and threshold as ATen computes them (``x < 0 ? 0 : x``, ``x <= t ? value : x``): -0.0 and NaN pass
through relu, a NaN through threshold, bool inputs refused, on every path (the small and the threaded float32
loops, numpy's path for other dtypes, in place, compiled)."""
import numpy as np
import pytest
import torch

import tapelab

VALUES = [-0.0, 0.0, 2.5, -3.0, float("nan"), float("inf"), -float("inf"), 1e-40, -1e-40]


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("n", [9, 4096, 300_000])      # the small loop, the one-call loop, the threaded loop
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_keeps_negative_zero_and_nan(n, dtype):
    x = np.resize(np.array(VALUES, dtype), n)
    _same_bits(tapelab.relu(tapelab.from_numpy(x)).numpy(), torch.relu(torch.from_numpy(x)).numpy())
    _same_bits(tapelab.relu_(tapelab.from_numpy(x.copy())).numpy(), torch.relu_(torch.from_numpy(x.copy())).numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_relu_reduced_precision_keeps_negative_zero(dtype):
    got = tapelab.relu(tapelab.tensor(VALUES, dtype=getattr(tapelab, dtype))).float().numpy()
    want = torch.relu(torch.tensor(VALUES, dtype=getattr(torch, dtype))).float().numpy()
    _same_bits(got, want)


def test_relu_of_bools_is_refused_as_torch():
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        torch.relu(torch.tensor([True, False]))
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        tapelab.relu(tapelab.tensor([True, False]))


def test_compiled_relu_keeps_negative_zero():
    """A fused kernel's relu is eager's ``x < 0 ? 0 : x``: torch's bits, -0.0 and NaN included."""
    fn = tapelab.compile(lambda t: (t * 1.0).relu() * 1.0)
    x = np.array(VALUES * 8, np.float32)
    _same_bits(fn(tapelab.from_numpy(x)).numpy(), ((torch.from_numpy(x) * 1.0).relu() * 1.0).numpy())


@pytest.mark.parametrize("inplace", [False, True])
def test_threshold_passes_nan_with_torchs_gradient(inplace):
    out = {}
    for lib in (tapelab, torch):
        x = lib.tensor(VALUES + [0.5], requires_grad=True)
        src = x * 1.0
        y = lib.nn.functional.threshold(src, 0.5, -7.0, inplace=inplace)
        y.sum().backward()
        out[lib] = (y.detach().numpy(), x.grad.numpy())
    for got, want in zip(out[tapelab], out[torch]):
        _same_bits(got, want)


def test_threshold_of_integers_as_torch():
    for fn in ("threshold", "threshold_"):
        got = getattr(tapelab.nn.functional, fn)(tapelab.tensor([1, 2, 3]), 2, 0)
        want = getattr(torch.nn.functional, fn)(torch.tensor([1, 2, 3]), 2, 0)
        _same_bits(got.numpy(), want.numpy())
