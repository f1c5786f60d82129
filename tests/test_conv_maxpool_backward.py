"""2x2 block max-pool's backward from the forward's maxima (``kernels/pool.py`` ``max2x2_put``): the
gradient lands on each window's first maximum (its first NaN when it holds one), as the general
loop, the numpy block path and PyTorch put it, and every other element is +0.0."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab import kernels

pytest.importorskip("numba")


def _grad(x, g, loops=True):
    old = kernels.set_enabled(loops)
    try:
        tx = tl.tensor(x, requires_grad=True)
        tl.nn.functional.max_pool2d(tx, 2).backward(tl.tensor(g))
        return tx.grad.numpy()
    finally:
        kernels.set_enabled(old)


def _data(seed, shape=(3, 4, 10, 12)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, :4, :4] = 0                                  # all-tie windows
    x[0, 0, 0, 1] = -0.0                                 # a signed zero tying with +0.0
    x[1, 1, 2, 3] = x[1, 1, 3, 2] = np.nan               # NaN in the second and third slot
    x[1, 2, 5, 5] = np.nan                               # NaN in the last slot of its window
    x[0, 1, 0, 0], x[0, 2, 1, 1] = np.inf, -np.inf
    x[2, 3, 4, 4:6] = 7.0                                # a tie at the maximum
    g = rng.standard_normal(shape[:2] + (shape[2] // 2, shape[3] // 2)).astype(np.float32)
    g[2, 0, 0, 0] = -1.5                                 # a negative gradient: the other slots stay +0.0
    return x, g


def test_equals_numpy_path_and_takes_the_2x2_loop(monkeypatch):
    x, g = _data(0)
    loops = kernels.loops("pool")
    calls = []
    monkeypatch.setattr(loops, "max2x2_put", lambda *a, _f=loops.max2x2_put: calls.append(1) or _f(*a))
    got = _grad(x, g)
    assert calls
    want = _grad(x, g, loops=False)
    assert np.array_equal(got, want) and not np.signbit(got[got == 0]).any()


def test_matches_torch_after_relu():
    rng = np.random.default_rng(1)
    x = np.maximum(rng.standard_normal((4, 8, 14, 14)).astype(np.float32), 0)
    g = rng.standard_normal((4, 8, 7, 7)).astype(np.float32)
    px = torch.tensor(x, requires_grad=True)
    torch.nn.functional.max_pool2d(px, 2).backward(torch.tensor(g))
    assert np.array_equal(_grad(x, g), px.grad.numpy())


def test_image_blocks_over_threads_equal_one_thread(monkeypatch):
    monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    x, g = _data(2, (5, 4, 8, 6))
    results = []
    for n in (1, 2, 3):
        tl.set_num_threads(n)
        results.append(_grad(x, g))
    for got in results[1:]:
        assert np.array_equal(got, results[0])
