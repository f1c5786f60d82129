"""Issue 18, session 29: the one-node step's backward computes cheap elementwise forward values again
instead of reading them saved (``step._recomputed``): fewer arrays written by the forward's fused
kernels, the same floats."""
import math

import numpy as np
import pytest

import tapelab as T
from tapelab.compiler import cpu

pytestmark = pytest.mark.skipif(not cpu.numba_available(), reason="the fused kernels are numba's")


class _TanhGelu(T.nn.Module):
    """nanoGPT's MLP: the tanh GELU written in elementwise ops between two linear layers."""

    def __init__(self, d: int = 32, hidden: int = 128):
        super().__init__()
        self.fc, self.proj = T.nn.Linear(d, hidden), T.nn.Linear(hidden, d)

    def forward(self, x):
        h = self.fc(x)
        g = 0.5 * h * (1.0 + T.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)))
        return self.proj(g).sum()


def _saved_count(step) -> int:
    """How many values the generated forward returns beside the result (the backward's saved ones)."""
    ret = step.sources[0].strip().splitlines()[-1]
    return ret.count(", ") - 1


def _run(model, net, x):
    net.zero_grad(set_to_none=True)
    x.grad = None
    loss = model(x)
    loss.backward()
    return [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in net.parameters()]


def test_tanh_gelu_saves_only_its_tanh_and_output_and_keeps_eagers_gradients():
    """The GELU's muls and adds are computed again in the backward's kernel: the forward saves fc's
    output, the tanh (transcendental: kept) and the GELU's output (proj's input), three values where the
    GELU's fused kernel saved seven; each compiled step's gradients equal eager's within float32
    rounding (the first, traced call bit for bit; the step's fused kernels round apart from eager's
    with or without the recompute, which changes no value: bench/README.md, session 29), and torch's."""
    import torch
    T.manual_seed(0)
    net = _TanhGelu()
    x = T.tensor(np.random.default_rng(0).standard_normal((4, 16, 32)).astype(np.float32), requires_grad=True)
    compiled = T.compile(net)
    eager = _run(net, net, x)
    for i in range(3):
        for a, e in zip(_run(compiled, net, x), eager):
            if i == 0:
                np.testing.assert_array_equal(a, e)
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    step = next(iter(compiled._compiled.cache.values())).step
    assert _saved_count(step) == 3, step.sources[0]
    tx = torch.from_numpy(x.detach().numpy()).requires_grad_()
    fc, proj = torch.nn.Linear(32, 128), torch.nn.Linear(128, 32)
    with torch.no_grad():
        for tp, p in zip([*fc.parameters(), *proj.parameters()], net.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    h = fc(tx)
    proj(0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)))).sum().backward()
    for a, t in zip(eager, [tx.grad, *fc.parameters(), *proj.parameters()]):
        want = t.numpy() if t is tx.grad else t.grad.numpy()
        np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-5)
