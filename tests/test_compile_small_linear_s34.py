"""The generated step's small linear products (session 34): ``plans.linear``/``linear_backward`` call
``gemm._small`` directly under MKL_MIN. Same floats as linear's own forward and backward (bit for bit,
at one and two threads), PyTorch's values, and the op's own route for what they do not take."""
import importlib

import numpy as np
import pytest
import torch

import tapelab as T
from tapelab.compiler import plans
from tapelab.core.registry import REGISTRY

from _threads import thread_counts

gemm_module = importlib.import_module("tapelab.kernels.gemm")
SHAPES = [(8, 32, 64), (8, 64, 64), (8, 64, 10), (1, 16, 16), (33, 17, 5), (64, 128, 96)]


def _arrays(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32))


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32).tobytes()


threads = thread_counts([1, 2])


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_forward_bit_equal_to_the_op_and_torch(m, k, n, threads):
    x, w, b, _ = _arrays(m, k, n)
    op_fwd = REGISTRY["linear"].fwd
    got = plans.linear(op_fwd)(np, x, w, b)
    assert _bits(got) == _bits(op_fwd(np, x, w, b))
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("needs", [(True, True, True), (False, True, True), (True, False, False), (True, True, False)])
def test_backward_bit_equal_to_the_op_and_torch(m, k, n, needs, threads):
    x, w, _, g = _arrays(m, k, n, seed=1)
    op_fwd = REGISTRY["linear_backward"].fwd
    got = plans.linear_backward(op_fwd)(np, g, x, w, needs=needs)
    ref = op_fwd(np, g, x, w, needs=needs)
    for a, r, need in zip(got, ref, needs):
        assert a.shape == r.shape
        if need:
            assert _bits(a) == _bits(r)
    tx, tw, tb = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, np.zeros(n, np.float32)))
    torch.nn.functional.linear(tx, tw, tb).backward(torch.from_numpy(g))
    for a, t, need in zip(got, (tx, tw, tb), needs):
        if need:
            np.testing.assert_allclose(a, t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_large_products_and_other_layouts_take_the_op_route():
    x, w, b, g = _arrays(512, 784, 512)
    assert x.size * w.shape[0] >= gemm_module.MKL_MIN
    op_fwd = REGISTRY["linear"].fwd
    assert _bits(plans.linear(op_fwd)(np, x, w, b)) == _bits(op_fwd(np, x, w, b))
    x3 = np.random.default_rng(2).standard_normal((2, 4, 16)).astype(np.float32)
    w3, b3 = w[:8, :16].copy(), b[:8].copy()
    assert _bits(plans.linear(op_fwd)(np, x3, w3, b3)) == _bits(op_fwd(np, x3, w3, b3))
    xt = np.asfortranarray(x[:8, :16])        # not C-contiguous: the op's own route
    assert _bits(plans.linear(op_fwd)(np, xt, w3, b3)) == _bits(op_fwd(np, xt, w3, b3))


def test_compiled_mlp_step_equals_eager_bit_for_bit():
    """Small linear layers (the bench's tiny_mlp shapes, without its fused activations, whose loops round
    otherwise than eager's ops) compiled: loss and every gradient as eager's."""
    T.manual_seed(0)
    net = T.nn.Sequential(T.nn.Linear(32, 64), T.nn.Linear(64, 64), T.nn.LayerNorm(64), T.nn.Linear(64, 10))
    x = T.tensor(np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32))

    def loss_of(f):
        for p in net.parameters():
            p.grad = None
        y = f(x)
        loss = (y * y).mean()
        loss.backward()
        return [_bits(loss.detach()._data)] + [_bits(p.grad._data) for p in net.parameters()]
    compiled = T.compile(net)
    for _ in range(2):
        got = loss_of(compiled)
    assert got == loss_of(net)
