"""The two-gradient loop (``kernels/winograd.py`` ``grads_f23_f43``, session 30) gives the weight's thread the
input gradient's last image in twelve: batches that move one and two images keep the floats of each gradient
as its own op, at two threads and at one."""
from __future__ import annotations

import numpy as np
import pytest

import tapelab
from tapelab import kernels
from tapelab.kernels.switch import enabled

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")
RNG = np.random.default_rng(30)


def _grads(x, w, g, need_x=True, need_w=True):
    xs, ws = tapelab.tensor(x, requires_grad=need_x), tapelab.tensor(w, requires_grad=need_w)
    tapelab.nn.functional.conv2d(xs, ws, padding=1).backward(tapelab.tensor(g))
    return xs.grad.numpy() if need_x else None, ws.grad.numpy() if need_w else None


@pytest.mark.parametrize("n", [12, 16, 25])
def test_images_moved_to_the_weight_thread_keep_each_gradients_floats(n):
    x = RNG.standard_normal((n, 32, 16, 16)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    g = RNG.standard_normal((n, 32, 16, 16)).astype(np.float32)
    tapelab.set_num_threads(2)
    gx, gw = _grads(x, w, g)
    np.testing.assert_array_equal(gx, _grads(x, w, g, need_w=False)[0])
    np.testing.assert_array_equal(gw, _grads(x, w, g, need_x=False)[1])
    tapelab.set_num_threads(1)
    gx1, gw1 = _grads(x, w, g)
    np.testing.assert_array_equal(gx, gx1)
    np.testing.assert_array_equal(gw, gw1)


@pytest.mark.parametrize("n", [1, 12, 13, 25])
def test_the_loop_called_directly_fills_every_image(n):
    """Every image of the input gradient is written (an empty output's garbage would show)."""
    loops = kernels.loops("winograd")
    from tapelab.nn import _winograd
    g = RNG.standard_normal((n, 32, 8, 8)).astype(np.float32)
    x = RNG.standard_normal((n, 32, 8, 8)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    ut = _winograd._forward_taps(np, np.float32, w, 2)
    gx = np.full((n, 32, 8, 8), np.nan, np.float32)
    du = np.zeros((36, 32, 32), np.float32)
    tapelab.set_num_threads(2)
    loops.grads_f23_f43(g, ut, gx, 1, 1, x, du, 1, 1)
    alone = np.full_like(gx, np.nan)
    loops.conv_f23(g, ut, alone, 1, 1, 0, n)
    np.testing.assert_array_equal(gx, alone)
    du_alone = np.zeros_like(du)
    loops.weight_f43(x, g, 1, 1, du_alone, 0, 36)
    np.testing.assert_array_equal(du, du_alone)
