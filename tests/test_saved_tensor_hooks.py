"""``torch.autograd.graph.saved_tensors_hooks``: what an op saves for its backward goes through the
pack hook when the op runs and comes back through the unpack hook in backward, as in PyTorch
(the autograd saved-tensor hooks tutorial's offloading and compression)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

X = np.random.default_rng(0).standard_normal((3, 4))


def _run(m, pack, unpack, fn, retain=False):
    x = m.tensor(X, requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = fn(m, x)
    y.backward(retain_graph=retain)
    if retain:
        g1 = x.grad.clone()
        x.grad = None
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), g1.numpy())
    return x.grad.numpy()


CHAINS = {
    "exp_mul": lambda m, x: (x.exp() * x).sum(),
    "tanh_matmul": lambda m, x: (x.tanh() @ x.T).sigmoid().sum(),
    "softmax_ln": lambda m, x: m.nn.functional.layer_norm(m.softmax(x * 3, -1), (4,)).pow(2).sum(),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_pack_sees_what_torch_saves_and_gradients_match(name):
    shapes = {}
    grads = {}
    for m in (torch, tapelab):
        seen = shapes[m] = []

        def pack(t, seen=seen):
            seen.append(tuple(t.shape))
            return t

        grads[m] = _run(m, pack, lambda t: t, CHAINS[name])
    assert len(shapes[tapelab]) > 0
    np.testing.assert_allclose(grads[tapelab], grads[torch], rtol=1e-10)
    if name == "exp_mul":   # a chain whose saved values are the same ones in both libraries
        assert sorted(shapes[tapelab]) == sorted(shapes[torch])


def test_offload_and_compress_hooks_change_what_backward_reads_as_in_torch():
    def offload(m):
        return (lambda t: (t.device, t.detach().numpy().copy()),
                lambda p: m.tensor(p[1]).to(p[0]))

    def half(m):
        return (lambda t: t.detach().to(m.float16), lambda p: p.to(m.float64))

    for make in (offload, half):
        got = {m: _run(m, *make(m), CHAINS["tanh_matmul"], retain=True) for m in (torch, tapelab)}
        np.testing.assert_allclose(got[tapelab], got[torch], rtol=1e-12, atol=1e-14)
    exact = _run(tapelab, lambda t: t, lambda t: t, CHAINS["tanh_matmul"])
    assert not np.allclose(got[tapelab], exact, rtol=1e-9)   # the float16 round trip is really read


def test_innermost_hooks_apply_and_the_block_ends():
    calls = []
    x = tapelab.tensor(X, requires_grad=True)
    with tapelab.autograd.graph.saved_tensors_hooks(lambda t: calls.append("outer") or t, lambda t: t):
        with tapelab.autograd.graph.saved_tensors_hooks(lambda t: calls.append("inner") or t, lambda t: t):
            y = (x * x).sum()
        z = x.exp().sum()
    w = x.sin().sum()
    assert y.grad_fn.next_functions[0][0].saved_tensors[0] is x   # saved_tensors unpacks
    (y + z + w).backward()
    assert calls == ["inner", "inner", "outer"]
    np.testing.assert_allclose(x.grad.numpy(), 2 * X + np.exp(X) + np.cos(X))


def test_save_on_cpu_keeps_saved_values_in_host_memory():
    from tapelab.base.backend import simulated_cuda
    with simulated_cuda():
        x = tapelab.tensor(X, device="cuda", requires_grad=True)
        with tapelab.autograd.graph.save_on_cpu(pin_memory=True):
            y = (x.exp() * x.tanh()).sum()
        node = y.grad_fn.next_functions[0][0]
        assert [p.value[1].device.type for p in node._packed[0]] == ["cpu", "cpu"]
        y.backward()
        assert x.grad.device.type == "cuda"
        got = x.grad.cpu().numpy()
    t = torch.tensor(X, requires_grad=True)
    with torch.autograd.graph.save_on_cpu():
        (t.exp() * t.tanh()).sum().backward()
    np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-12)
