"""Convolutions of an empty batch (a detection head with no RoIs in an image) return an empty result of
the output's shape, and zero weight gradients, as PyTorch's do."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


@pytest.mark.parametrize("fn,xs,ws,kw", [
    ("conv2d", (0, 4, 5, 5), (2, 4, 3, 3), dict(padding=1)),
    ("conv2d", (0, 4, 5, 5), (2, 4, 1, 1), {}),
    ("conv2d", (0, 4, 9, 7), (6, 2, 3, 3), dict(stride=2, groups=2)),
    ("conv1d", (0, 3, 8), (5, 3, 3), dict(stride=2, dilation=2)),
    ("conv_transpose2d", (0, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, output_padding=1)),
])
def test_empty_batch_shapes_and_gradients(fn, xs, ws, kw):
    w = np.random.default_rng(0).standard_normal(ws).astype(np.float32)
    got = {}
    for m in (torch, tapelab):
        x, wt = m.zeros(xs, requires_grad=True), m.tensor(w, requires_grad=True)
        y = getattr(m.nn.functional, fn)(x, wt, **kw)
        (y * 2).sum().backward()
        got[m] = (tuple(y.shape), tuple(x.grad.shape), wt.grad.numpy())
    assert got[tapelab][:2] == got[torch][:2]
    np.testing.assert_array_equal(got[tapelab][2], got[torch][2])
