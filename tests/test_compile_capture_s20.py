"""Compile, then capture: the capture records a compiled call's one-node step whole (session 20).

A ``tapelab.graphs`` capture declares ``Mode.whole_compiled_steps``: a compiled call that is one
autograd node records as two steps, its generated forward (``compiled(<Module>)``) and backward
(``CompiledFunctionBackward``, one op whose params hold the forward's saved values), so a replay
runs what the compiled call runs instead of the lowered graph (whose fused backward recomputes its
forward: chain1M captured went from 2.1x to about 1.4x JAX's jit). A mode that does not declare it
(a tracer) still sees the lowered graph's ops.
"""
from __future__ import annotations

import numpy as np
import torch

import tapelab
from tapelab.core.dispatch import Mode
from tapelab.graphs import Graph, graph

from _compile_models import MLP


def _pair(seed=0):
    tapelab.manual_seed(seed)
    model = MLP()
    ref = torch.nn.Sequential()          # torch's MLP with the same weights
    ref.fc1, ref.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)
    with torch.no_grad():
        for name in ("fc1", "fc2"):
            for p in ("weight", "bias"):
                getattr(getattr(ref, name), p).copy_(torch.tensor(getattr(getattr(model, name), p).detach().numpy()))
    return model, ref


def test_a_compiled_step_captures_as_its_forward_and_backward_and_replays_torchs_values():
    model, ref = _pair()
    compiled = tapelab.compile(model)
    opt = tapelab.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((8, 32)).astype(np.float32) for _ in range(4)]
    static = tapelab.tensor(xs[0])

    def step():
        loss = compiled(static).square().mean()
        loss.backward()
        opt.step()
        return loss

    def torch_step(x):
        ropt.zero_grad(set_to_none=True)
        r = torch.nn.functional.gelu(ref.fc1(torch.tensor(x)))
        loss = ref.fc2(r).square().mean()
        loss.backward()
        ropt.step()
        return float(loss.detach())
    for x in xs[:2]:                       # traced, then the compiled call; momentum buffers exist
        with tapelab.no_grad():
            static.copy_(tapelab.tensor(x))
        opt.zero_grad(set_to_none=True)
        step()
        torch_step(x)
    opt.zero_grad(set_to_none=True)
    g = Graph()
    with graph(g):
        loss = step()
    ops = [n["op"] for n in g.summary()["nodes"]]
    assert ops.count("compiled(MLP)") == ops.count("CompiledFunctionBackward") == 1, ops
    assert "linear" not in ops and not any(o.startswith("fused(") for o in ops)
    ropt.zero_grad(set_to_none=True)      # the capture's step changed nothing: torch skips it too
    for x in xs[2:]:
        with tapelab.no_grad():
            static.copy_(tapelab.tensor(x))
        g.replay()
        want = torch_step(x)
        np.testing.assert_allclose(float(loss.detach()), want, rtol=1e-5)
    for p, q in zip(model.parameters(), [ref.fc1.weight, ref.fc1.bias, ref.fc2.weight, ref.fc2.bias]):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


class _Ops(Mode):
    """A mode that records op names and declares nothing: it must see the lowered graph's ops."""

    def __init__(self):
        self.names = []

    def dispatch(self, op, args, params):
        self.names.append(op.name)
        return super().dispatch(op, args, params)


def test_a_mode_without_the_declaration_sees_the_lowered_graph():
    model, _ = _pair()
    compiled = tapelab.compile(model)
    x = tapelab.randn(8, 32)
    for _ in range(2):
        compiled(x).sum().backward()
    assert type(compiled(x).grad_fn).__name__ == "CompiledFunctionBackward"
    with _Ops() as m:
        out = compiled(x)
    assert "compiled(MLP)" not in m.names and any(n == "linear" or n.startswith("fused(") for n in m.names), m.names
    np.testing.assert_allclose(out.detach().numpy(), model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_the_captured_backward_writes_the_gradients_into_their_buffers():
    """The chain's backward is one fused kernel making both gradients: the replay passes their buffers
    as the kernel's ``out`` (the step's generated ``step_backward_out``), no copy, and equals eager."""
    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    f = tapelab.compile(chain6)
    rng = np.random.default_rng(0)
    x, w = (tapelab.tensor(rng.standard_normal((1024, 1024)).astype(np.float32), requires_grad=True)
            for _ in range(2))
    for _ in range(3):
        x.grad = w.grad = None
        f(x, w).backward()
    assert type(f(x, w).grad_fn).__name__ == "CompiledFunctionBackward"
    x.grad = w.grad = None
    g = Graph()
    with graph(g):
        loss = f(x, w)
        loss.backward()
    assert [n["op"] for n in g.summary()["nodes"]] == ["compiled(chain6)", "CompiledFunctionBackward"]
    (entry,) = f.cache.values()
    assert entry.step.bwd_fn.out is not None                  # one kernel makes both gradients
    src = g._program.source            # the forward's 0-d loss is copied to the tensor the user holds, once
    assert src.count("out=(") == 1 and src.count("_copyto") == 1, src
    xn, wn = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    with tapelab.no_grad():
        x.copy_(tapelab.tensor(xn))
        w.copy_(tapelab.tensor(wn))
    g.replay()
    xt, wt = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
    want = ((xt * wt + 1.0).tanh() * xt).sigmoid().sum()
    want.backward()
    np.testing.assert_allclose(float(loss.detach()), float(want.detach()), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)
