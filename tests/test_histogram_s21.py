"""``histogram`` and ``histogramdd`` as PyTorch 2.13 computes them: edges from its float ``linspace`` in the
input's dtype (numpy's double edges differed in the last bit in 45 of 50 random cases), each value in
the bin whose edges hold it, weights added in order (PyTorch with one thread), density divided by the
total and then each dimension's bin lengths, and its errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


@pytest.fixture
def one_thread():
    torch.set_num_threads(1)   # weighted counts add in one order only on one thread


def _both(v):
    return torch.from_numpy(v), tapelab.tensor(v)


@pytest.mark.parametrize("bins", [7, 31, 33, 100])
@pytest.mark.parametrize("kw", ["plain", "range", "density", "weight"])
def test_histogram_is_pytorchs(one_thread, bins, kw):
    for seed in range(8):
        rng = np.random.default_rng(seed)
        t, l = _both(rng.standard_normal(1000).astype(np.float32))
        tk, lk = {}, {}
        if kw == "range":
            tk = lk = {"range": (-1.0, 2.0)}
        elif kw == "density":
            tk = lk = {"density": True}
        elif kw == "weight":
            tw, lw = _both(rng.random(1000).astype(np.float32))
            tk, lk = {"weight": tw}, {"weight": lw}
        h, e = torch.histogram(t, bins=bins, **tk)
        h2, e2 = tapelab.histogram(l, bins=bins, **lk)
        np.testing.assert_array_equal(e2.numpy(), e.numpy())
        np.testing.assert_array_equal(h2.numpy(), h.numpy())


@pytest.mark.parametrize("bins", [[3, 4, 5], 6])
def test_histogramdd_is_pytorchs(one_thread, bins):
    rng = np.random.default_rng(1)
    t, l = _both(rng.standard_normal((500, 3)).astype(np.float32))
    tw, lw = _both(rng.random(500).astype(np.float32))
    for kw in ({}, {"density": True}, {"range": [-1.0, 1.0, -2.0, 2.0, 0.0, 0.5]}):
        want = torch.histogramdd(t, bins=bins, weight=tw, **kw)
        got = tapelab.histogramdd(l, bins=bins, weight=lw, **kw)
        np.testing.assert_array_equal(got.hist.numpy(), want.hist.numpy())
        assert len(got.bin_edges) == 3
        for a, b in zip(got.bin_edges, want.bin_edges):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_given_edges_empty_data_and_one_value():
    x = np.random.default_rng(2).standard_normal((50, 2)).astype(np.float32)
    t, l = _both(x)
    want = torch.histogramdd(t, bins=[torch.tensor([0.0, 1.0]), torch.tensor([-1.0, 0.0, 1.0])])
    got = tapelab.histogramdd(l, bins=[tapelab.tensor([0.0, 1.0]), tapelab.tensor([-1.0, 0.0, 1.0])])
    np.testing.assert_array_equal(got.hist.numpy(), want.hist.numpy())
    for v in ([1.0, 1.0, 1.0], []):
        want, got = torch.histogram(torch.tensor(v), bins=2), tapelab.histogram(tapelab.tensor(v), bins=2)
        np.testing.assert_array_equal(got.hist.numpy(), want.hist.numpy())
        np.testing.assert_array_equal(got.bin_edges.numpy(), want.bin_edges.numpy())


@pytest.mark.parametrize("call", ["histogram(x, bins=3, range=(1., 0.))", "histogram(x, bins=3, range=(0., float('inf')))",
                                  "histogramdd(x.reshape(50, 2), bins=[3])", "histogram(x, bins=0)",
                                  "histogram(x.double(), bins=m.tensor([0., 1.]))",
                                  "histogramdd(x.reshape(50, 2), bins=3, range=[0., 1.])"])
def test_errors_are_pytorchs(call):
    x = torch.randn(100)
    with pytest.raises(RuntimeError) as want:
        eval("torch." + call, {"torch": torch, "x": x, "m": torch})
    with pytest.raises(RuntimeError) as got:
        eval("tapelab." + call, {"tapelab": tapelab, "x": tapelab.tensor(x.numpy()), "m": tapelab})
    assert str(got.value) == str(want.value)
