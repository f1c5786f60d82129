"""The first programs people write with autograd: a cubic fitted to a curve with raw tensors
(``requires_grad=True``, updates under ``torch.no_grad()``, ``grad.zero_()``), the same model
with a custom ``torch.autograd.Function`` (``ctx.save_for_backward`` / ``saved_tensors``), a
gradient checked against ``torch.autograd.grad`` with ``create_graph=True`` (a second derivative),
``retain_graph``, hooks on a tensor, and ``torch.autograd.gradcheck`` on the custom Function."""
from __future__ import annotations

import math

import numpy as np


def main(torch, steps: int = 50):
    dtype = torch.float64

    class SoftCube(torch.autograd.Function):
        """f(x) = x^3 / (1 + x^2): a made-up odd activation with a hand-written derivative."""

        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return input ** 3 / (1 + input ** 2)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * (input ** 4 + 3 * input ** 2) / (1 + input ** 2) ** 2

    x = torch.linspace(-math.pi, math.pi, 200, dtype=dtype)
    y = torch.sin(x)
    rng = np.random.default_rng(37)
    a, b, c, d = (torch.tensor(v, dtype=dtype, requires_grad=True) for v in rng.normal(0, 0.5, 4))

    history = []
    learning_rate = 1e-5
    for t in range(steps):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        if t % 10 == 9:
            history.append(loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad.zero_()
            b.grad.zero_()
            c.grad.zero_()
            d.grad = None
    history += [a.item(), b.item(), c.item(), d.item()]

    # the same fit through the custom Function, with an optimizer this time
    w = torch.full((2,), 0.3, dtype=dtype, requires_grad=True)
    opt = torch.optim.SGD([w], lr=1e-3, momentum=0.5)
    for _ in range(steps // 5):
        opt.zero_grad()
        loss = (w[0] * SoftCube.apply(w[1] * x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        history.append(loss.item())
    history.append(bool(torch.autograd.gradcheck(SoftCube.apply, (torch.randn(5, dtype=dtype, requires_grad=True),))))

    # second derivatives, retained graphs and hooks
    z = torch.tensor([0.5, -1.0, 2.0], dtype=dtype, requires_grad=True)
    seen = []
    z.register_hook(lambda g: seen.append(g.sum().item()))
    f = (SoftCube.apply(z) * torch.tanh(z)).sum()
    (g,) = torch.autograd.grad(f, z, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), z, retain_graph=True)
    g.sum().backward()
    history += g.tolist() + h.tolist() + z.grad.tolist() + seen
    return history
