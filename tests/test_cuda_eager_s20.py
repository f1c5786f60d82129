"""Eager cuda steps without the per-parameter dispatch (session 20, from the H200 run's profile).

The multi-tensor optimizer path (``optim/_foreach.py``) now takes a group on one cuda device, where
a momentum SGD step was ten dispatched ops per parameter. On the simulated cuda device it must give
the per-parameter Tensor path's values bit for bit, and the cpu's; float32 fused multiply-adds keep
their single rounding (on cupy one ``fmaf`` kernel, ``kernels/device.py``).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab._backend import simulated_cuda
from tapelab.optim import _foreach

OPTIMIZERS = {
    "sgd_momentum": lambda m, ps, **k: m.optim.SGD(ps, lr=0.05, momentum=0.9, **k),
    "sgd_nesterov_wd": lambda m, ps, **k: m.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                      weight_decay=1e-2, **k),
    "sgd_dampening_maximize": lambda m, ps, **k: m.optim.SGD(ps, lr=0.01, momentum=0.5, dampening=0.3,
                                                             maximize=True, **k),
    "adam": lambda m, ps, **k: m.optim.Adam(ps, lr=1e-2, **k),
    "adamw_amsgrad": lambda m, ps, **k: m.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True, **k),
}


def _train(m, name, device, steps=3, **opt_kw):
    rng = np.random.default_rng(0)
    w = m.tensor(rng.standard_normal((5, 4)).astype(np.float32), device=device, requires_grad=True)
    b = m.tensor(rng.standard_normal(4).astype(np.float32), device=device, requires_grad=True)
    opt = OPTIMIZERS[name](m, [w, b], **opt_kw)
    x = m.tensor(rng.standard_normal((8, 5)).astype(np.float32), device=device)
    for _ in range(steps):
        opt.zero_grad()
        (x @ w + b).tanh().square().sum().backward()
        opt.step()
    return opt, [np.asarray(t.detach().cpu()) for t in (w, b)]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_multi_tensor_step_on_cuda_equals_the_tensor_path_torch_and_cpu(name):
    with simulated_cuda(0) as dev:
        opt, fast = _train(tapelab, name, dev)
        assert _foreach.multi_tensor(opt.param_groups[0])     # the array path took the cuda group
        _, slow = _train(tapelab, name, dev, foreach=False)
    _, cpu = _train(tapelab, name, "cpu")
    _, ref = _train(torch, name, "cpu", foreach=False)
    for a, s, c, r in zip(fast, slow, cpu, ref):
        np.testing.assert_array_equal(a, s)
        # the cpu's tanh and Adam's square root are MKL's (as PyTorch's cpu kernels), a device's its own
        np.testing.assert_allclose(a, c, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(a, r, rtol=1e-6, atol=1e-6)   # the forward's float32 sums differ


def test_mixed_device_group_takes_the_tensor_path():
    with simulated_cuda(0) as dev:
        a = tapelab.zeros(3, device=dev, requires_grad=True)
        b = tapelab.zeros(3, requires_grad=True)
        opt = tapelab.optim.SGD([a, b], lr=0.1, momentum=0.9)
        assert not _foreach.multi_tensor(opt.param_groups[0])
        (a.sum() + b.sum()).backward()
        opt.step()
        np.testing.assert_array_equal(a.detach().cpu().numpy(), np.full(3, -0.1, np.float32))
        np.testing.assert_array_equal(b.detach().numpy(), np.full(3, -0.1, np.float32))


def test_fma32_rounds_once_on_every_backend():
    """``_fma32``'s single rounding (the float64 formula where no fmaf kernel exists): the product is
    not rounded to float32 before the add, as PyTorch's CPU and CUDA fused multiply-adds."""
    from tapelab.ops.elementwise import _fma32
    rng = np.random.default_rng(1)
    x, y, z = (rng.standard_normal(4096).astype(np.float32) for _ in range(3))
    exact = (x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)).astype(np.float32)
    twice = x * y + z
    assert (exact != twice).any()          # the inputs tell one rounding from two
    np.testing.assert_array_equal(_fma32(np, x, y, z, np.float32), exact)
    with simulated_cuda(0) as dev:
        xs, ys, zs = (tapelab.tensor(a, device=dev)._data for a in (x, y, z))
        got = _fma32(dev.xp, xs, ys, zs, np.float32)
        np.testing.assert_array_equal(tapelab._backend.asnumpy(dev.xp, got), exact)


def test_cpu_scalar_tensor_joins_a_cuda_elementwise_op_and_gets_its_gradient():
    """PyTorch's exception to one device per op: a 0-d cpu tensor in an elementwise op with cuda
    tensors (``loss + torch.tensor(0.)``); its gradient comes back on the cpu. Other mixes are refused."""
    with simulated_cuda(0) as dev:
        x = tapelab.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        s = tapelab.tensor(2.0, requires_grad=True)
        y = (s * x).sum() + tapelab.tensor(1.0)
        y.backward()
        assert y.device.type == "cuda" and float(y.item()) == 13.0
        assert s.grad.device.type == "cpu" and float(s.grad) == 6.0
        np.testing.assert_array_equal(x.grad.cpu().numpy(), [2.0, 2.0, 2.0])
        with pytest.raises(RuntimeError, match="same device"):
            x + tapelab.ones(3)
        with pytest.raises(RuntimeError, match="same device"):
            x @ tapelab.ones(3, 3)



def test_cpu_scalar_tensor_fills_and_masked_fills_a_cuda_tensor():
    """``fill_``/``masked_fill`` take a 0-d cpu value tensor on cuda, as PyTorch's TensorIterator ops do."""
    with simulated_cuda(0) as dev:
        x = tapelab.zeros(3, device=dev)
        x.fill_(tapelab.tensor(2.0))
        y = x.masked_fill(tapelab.tensor([True, False, True], device=dev), tapelab.tensor(5.0))
        assert x.device.type == y.device.type == "cuda"
        np.testing.assert_array_equal(y.cpu().numpy(), [5.0, 2.0, 5.0])
