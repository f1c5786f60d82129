"""group_norm's float32 forward and gradients are PyTorch's bit for bit (issue 17, session 34): one op whose
loops (kernels/groupnorm.py) follow ATen's kernel; float64 gradcheck, double backward and the non-loop
formula against torch."""
import numpy as np
import pytest
import torch

import tapelab as tl

from _bits import differing_bits as _bits
from _threads import thread_counts

SHAPES = [((3, 8, 5), 4), ((2, 32, 7, 7), 8), ((2, 64, 1023), 32), ((4, 6), 3), ((2, 48, 7), 2), ((3, 40, 3, 3), 1),
          ((2, 20, 7), 4), ((2, 44, 5), 4), ((1, 7, 3), 1), ((2, 10, 5), 1), ((2, 12, 7), 2), ((5, 16, 9), 2)]


def _run(lib, x, groups, w, b, g):
    xs = lib.tensor(x, requires_grad=True)
    ws = None if w is None else lib.tensor(w, requires_grad=True)
    bs = None if b is None else lib.tensor(b, requires_grad=True)
    # torch's backward of a bias without a weight raises ("tensor does not have a device"): ones stand in
    # for its weight there, the same floats in ATen's kernel (its absent weight is 1 in each formula)
    stand_in = lib.ones(x.shape[1]) if lib is torch and w is None and b is not None else ws
    y = lib.nn.functional.group_norm(xs, groups, stand_in, bs)
    y.backward(lib.tensor(g))
    return [y.detach().numpy(), xs.grad.numpy()] + [t.grad.numpy() for t in (ws, bs) if t is not None]


threads = thread_counts([1, 2])


@pytest.mark.parametrize("shape,groups", SHAPES)
@pytest.mark.parametrize("affine", ["none", "both", "weight", "bias"])
def test_float32_values_and_gradients_are_torchs_bits(threads, shape, groups, affine):
    rng = np.random.default_rng(sum(shape) + groups)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, shape[1]).astype(np.float32) if affine in ("both", "weight") else None
    b = rng.standard_normal(shape[1]).astype(np.float32) if affine in ("both", "bias") else None
    want, got = _run(torch, x, groups, w, b, g), _run(tl, x, groups, w, b, g)
    assert [_bits(a, c) for a, c in zip(want, got)] == [0] * len(want)


def test_channels_last_input_gives_the_contiguous_floats():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 5, 5)).astype(np.float32)
    w, b = rng.uniform(0.5, 1.5, 8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    perm = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    y = tl.nn.functional.group_norm(tl.tensor(perm), 4, tl.tensor(w), tl.tensor(b)).numpy()
    want = torch.nn.functional.group_norm(torch.tensor(x), 4, torch.tensor(w), torch.tensor(b)).numpy()
    assert _bits(y, want) == 0


def test_float64_gradcheck_and_double_backward_against_torch():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((2, 6, 5)), rng.uniform(0.5, 1.5, 6), rng.standard_normal(6)
    args = [tl.tensor(a, requires_grad=True) for a in (x, w, b)]
    assert tl.autograd.gradcheck(lambda *t: tl.nn.functional.group_norm(t[0], 3, t[1], t[2]), args)
    assert tl.autograd.gradgradcheck(lambda *t: tl.nn.functional.group_norm(t[0], 3, t[1], t[2]), args)
    outs = []
    for lib in (torch, tl):
        xs, ws, bs = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        y = lib.nn.functional.group_norm(xs, 3, ws, bs)
        gx, gw = lib.autograd.grad((y * y.detach().sin()).sum(), (xs, ws), create_graph=True)
        (gx.pow(2).sum() + gw.sum()).backward()
        outs.append([t.detach().numpy() for t in (gx, gw, xs.grad, ws.grad)])
    for a, c in zip(*outs):
        np.testing.assert_allclose(c, a, rtol=1e-10, atol=1e-12)


def test_formula_path_matches_torch_without_the_loops():
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((3, 8, 6)).astype(np.float32), rng.standard_normal((3, 8, 6)).astype(np.float32)
    w, b = rng.uniform(0.5, 1.5, 8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    want = _run(torch, x, 2, w, b, g)
    tl.kernels.set_enabled(False)
    try:
        got = _run(tl, x, 2, w, b, g)
    finally:
        tl.kernels.set_enabled(True)
    for a, c in zip(want, got):
        np.testing.assert_allclose(c, a, rtol=2e-5, atol=2e-5)


def test_backward_node_is_pytorchs():
    y = tl.nn.functional.group_norm(tl.randn(2, 4, 3, requires_grad=True), 2)
    assert y.grad_fn.name() == torch.nn.functional.group_norm(torch.randn(2, 4, 3, requires_grad=True), 2).grad_fn.name()
