"""The convolution rows' passes on two and three intra-op threads: the Winograd forward by whole image
blocks per thread, the F(4, 3) weight gradient's transforms by image ranges, batch norm by channel
ranges (engine/nn/_winograd.py, engine/kernels/winograd.py, engine/kernels/batchnorm.py). Each
gives exactly the one-thread floats, whether the pool runs the blocks split or one after another,
and whole CNN and ResNet training steps stay bitwise the same at any thread count, where MKL's
GEMM keeps to one thread: on its own threads MKL cuts a long sum as PyTorch's does at that thread
count (tests/test_blas_mkl.py), so those products differ from one thread's in the last bit."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab import kernels
from tapelab.base import pool
from tapelab.nn import _winograd

pytest.importorskip("numba")


def _each_setting(monkeypatch, fn):
    """``fn()`` at 1 thread, then at 2 and 3 threads with the pool always splitting and never (MKL's
    GEMM at one thread)."""
    monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    monkeypatch.setattr(importlib.import_module("tapelab.kernels.gemm"), "_mkl_team", lambda n: 1)
    tl.set_num_threads(1)
    results = [fn()]
    for threads in (2, 3):
        for way in (1, 0):
            monkeypatch.setattr(pool._Timings, "choose", lambda self, way=way: way)
            tl.set_num_threads(threads)
            results.append(fn())
    return results


# (x shape, output channels, padding): the ResNet block's 32 -> 32 at 16x16, the CNN's input
# gradient (32 -> 16 at 14x14, F(2, 3) with cropped tiles), odd sizes, one image
SHAPES = [((16, 32, 16, 16), 32, 1), ((32, 32, 14, 14), 16, 1), ((3, 32, 10, 9), 32, 1), ((5, 32, 13, 12), 48, 0),
          ((1, 32, 8, 8), 32, 1)]


@pytest.mark.parametrize("xshape,o,pad", SHAPES)
def test_winograd_passes_at_any_thread_count_equal_one_thread(monkeypatch, xshape, o, pad):
    """Forward and weight gradient bit for bit as at one thread, and PyTorch's to float32 rounding."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((o, xshape[1], 3, 3)).astype(np.float32)
    pads = ((pad, pad), (pad, pad))
    gy = rng.standard_normal((xshape[0], o) + _winograd.out_size(xshape[2:], pads)).astype(np.float32)
    results = _each_setting(monkeypatch, lambda: (_winograd.conv3x3(np, x, w, pads),
                                                  _winograd.weight3x3(np, x, gy, pads)))
    for y, gw in results[1:]:
        np.testing.assert_array_equal(y, results[0][0])
        np.testing.assert_array_equal(gw, results[0][1])
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, torch.tensor(w, dtype=torch.float64), padding=pad)
    scale = np.abs(yt.detach().numpy()).max()
    np.testing.assert_allclose(results[0][0], yt.detach().numpy(), rtol=1e-4, atol=1e-5 * scale)
    ref = torch.nn.grad.conv2d_weight(torch.tensor(x, dtype=torch.float64), w.shape,
                                      torch.tensor(gy, dtype=torch.float64), padding=pad).numpy()
    np.testing.assert_allclose(results[0][1], ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("n,step,threads,sizes", [(16, 8, 1, [8, 8]), (16, 8, 2, [8, 8]), (32, 10, 2, [8] * 4),
                                                  (32, 10, 3, [5, 5, 6, 5, 5, 6]), (1, 8, 2, [1]), (3, 8, 2, [1, 2])])
def test_image_blocks_give_each_thread_equal_whole_blocks(n, step, threads, sizes):
    """At most ``step`` images a block, near-equal, their count a multiple of the threads (up to one
    image a block); without the loops the batch cut by ``step`` alone."""
    tl.set_num_threads(threads)
    spans = _winograd._image_blocks(n, step, True)
    assert [hi - lo for lo, hi in spans] == sizes and spans[0][0] == 0 and spans[-1][1] == n
    assert len(_winograd._image_blocks(n, step, False)) == -(-n // step)


@pytest.mark.parametrize("shape", [(32, 16, 28, 28), (16, 32, 16, 16), (5, 7, 3)])
def test_batchnorm_loops_split_by_channels_equal_one_thread(monkeypatch, shape):
    loops = kernels.loops("batchnorm")
    rng = np.random.default_rng(1)
    x, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    c = shape[1]
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    x3, g3 = x.reshape(shape[0], c, -1), g.reshape(shape[0], c, -1)

    def both():
        out, mean, var = np.empty_like(x3), np.empty(c, np.float32), np.empty(c, np.float32)
        loops.forward(x3, w, b, 1e-5, out, mean, var)
        gx, gw, gb = np.empty_like(x3), np.empty(c, np.float32), np.empty(c, np.float32)
        loops.backward(g3, x3, w, 1e-5, gx, gw, gb)
        return out, mean, var, gx, gw, gb
    results = _each_setting(monkeypatch, both)
    for got in results[1:]:
        for a, ref in zip(got, results[0]):
            np.testing.assert_array_equal(a, ref)


def _cnn_and_resnet_losses():
    """Three SGD steps of the CNN row's model (conv-BN-ReLU-pool x2, linear) and of a ResNet basic
    block (stem, conv3x3-BN-ReLU-conv3x3-BN + identity), seeded: losses and final weights."""
    nn = tl.nn
    out = []
    for build, xshape in ((lambda: nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                                 nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
                                                 nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10)),
                           (16, 1, 28, 28)),
                          (lambda: nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                                                 nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1, bias=False),
                                                 nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                                                 nn.BatchNorm2d(32), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                                 nn.Linear(32, 10)),
                           (8, 3, 16, 16))):
        tl.manual_seed(0)
        model = build()
        opt = tl.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x, y = tl.randn(*xshape), tl.randint(0, 10, (xshape[0],))
        for _ in range(3):
            loss = tl.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        out += [p.detach().numpy().copy() for p in model.parameters()]
    return out


def test_cnn_and_resnet_steps_are_bitwise_the_same_at_any_thread_count(monkeypatch):
    results = _each_setting(monkeypatch, _cnn_and_resnet_losses)
    for got in results[1:]:
        for a, ref in zip(got, results[0]):
            np.testing.assert_array_equal(a, ref)
