"""Gaps met running PyTorch's own tutorials (session 34, helper h7).

The spatial transformer tutorial pools with ``nn.MaxPool2d(2, stride=2)`` and then applies
``nn.ReLU(True)`` to the pooled output. PyTorch's max-pool node keeps its input and the argmax
indices, not its output, so that in-place change is allowed; tapelab's block max pool reads its
output in the backward and must recompute it from the input rather than refuse.
"""
import numpy as np
import pytest
import torch

import tapelab


def _pool_then_inplace(lib, x0, kernel, inplace, dtype):
    x = lib.tensor(x0.astype(dtype), requires_grad=True)
    h = x * 1.5
    y = lib.nn.MaxPool2d(kernel, stride=kernel)(h)
    inplace(lib, y)
    w = lib.arange(float(y.numel()), dtype=getattr(lib, np.dtype(dtype).name)).reshape(y.shape) - y.numel() / 2
    loss = (y * w).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    x.grad = None
    loss.backward()          # the recomputed output serves a second walk too
    return y.detach().numpy(), first, x.grad.numpy()


INPLACE = {
    "relu_module": lambda lib, y: lib.nn.ReLU(True)(y),
    "mul_": lambda lib, y: y.mul_(2.0),
    "clamp_": lambda lib, y: y.clamp_(min=0.1),
}


@pytest.mark.parametrize("kernel,shape", [(2, (3, 4, 22, 22)),    # float32 2x2: the compiled loop
                                          (2, (2, 3, 8, 6)),
                                          (3, (2, 3, 9, 6))])    # a 3x3 block: numpy's passes
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_block_max_pool_output_changed_in_place_backward_is_torchs(kernel, shape, dtype, name):
    x0 = np.random.default_rng(sum(shape)).standard_normal(shape)
    ours = _pool_then_inplace(tapelab, x0, kernel, INPLACE[name], dtype)
    theirs = _pool_then_inplace(torch, x0, kernel, INPLACE[name], dtype)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    assert np.abs(ours[1]).sum() > 0


def test_block_max_pool_input_changed_in_place_still_raises():
    """PyTorch keeps the pool's input: changing it in place is still the version error."""
    for lib in (torch, tapelab):
        x = lib.randn(2, 3, 4, 4, requires_grad=True)
        h = x * 1.0
        y = lib.nn.functional.max_pool2d(h, 2)
        h.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_the_spatial_transformer_tutorials_localization_step():
    """The tutorial's localization net (conv, MaxPool2d, ReLU(True), twice) under SGD: same floats."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((4, 1, 28, 28)).astype(np.float32)

    def run(lib):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Conv2d(1, 8, kernel_size=7), lib.nn.MaxPool2d(2, stride=2),
                                lib.nn.ReLU(True), lib.nn.Conv2d(8, 10, kernel_size=5),
                                lib.nn.MaxPool2d(2, stride=2), lib.nn.ReLU(True))
        out = net(lib.tensor(x0))
        out.pow(2).mean().backward()
        return [out.detach().numpy()] + [p.grad.numpy() for p in net.parameters()]

    for a, b in zip(run(tapelab), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
