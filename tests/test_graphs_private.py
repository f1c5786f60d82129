"""A captured cpu replay keeps the intermediates nobody outside the graph can read as locals
(no copy into their pool buffers), and writes an in-place elementwise update straight into its
target; what the user holds, and what a live autograd graph saved, still updates on every
replay. Each checked against PyTorch's eager steps."""
import numpy as np
import pytest
import torch

import tapelab as T
from tapelab.optim._foreach import momentum_update_from


def _mlp(m, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    model = m.nn.Sequential(m.nn.Linear(12, 16), m.nn.ReLU(), m.nn.Linear(16, 4))
    with m.no_grad():
        for p in model.parameters():
            p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    return model


def _data(step):
    rng = np.random.default_rng(100 + step)
    return rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 4, 8)


def test_captured_sgd_momentum_step_equals_torch_eager_steps():
    model, ref = _mlp(T), _mlp(torch)
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, y = T.zeros(8, 12), T.zeros(8, dtype=T.int64)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = T.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def ref_step(xs, ys):
        ref_opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(ref(torch.tensor(xs)), torch.tensor(ys))
        loss.backward()
        ref_opt.step()
        return loss.item()

    losses, ref_losses = [], []
    for i in range(2):      # warm-up: the momentum buffers exist before capture, as PyTorch requires
        xs, ys = _data(i)
        x.copy_(T.tensor(xs)), y.copy_(T.tensor(ys))
        losses.append(step().item())
        ref_losses.append(ref_step(xs, ys))
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        static_loss = step()
    for i in range(2, 6):
        xs, ys = _data(i)
        x.copy_(T.tensor(xs)), y.copy_(T.tensor(ys))
        g.replay()
        losses.append(static_loss.item())
        ref_losses.append(ref_step(xs, ys))
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    src = g.source
    # each parameter's momentum update (buf.mul_, buf.add_, p.add_(buf, alpha=-lr)) is one fused pass in place,
    # which also makes the gradient (the zeroed .grad plus the backward's)
    fused = [n for n, v in g._program.ns.items() if v is momentum_update_from]
    assert len(fused) == 1 and sum(ln.strip().startswith(fused[0] + "(") for ln in src.splitlines()) == 4
    assert "alpha=" not in src
    # the backward's gradients reach the accumulation as the linear backward made them: no copies
    # into pool buffers (only the loss, held by the user, is copied; zero_grad's fills are folded into
    # the accumulations, which read the zero as a constant)
    copies = [ln for ln in src.splitlines() if ln.strip().startswith("_copyto(")]
    assert len(copies) == 1, src


def test_held_intermediate_and_live_graph_still_follow_the_replay():
    x = T.zeros(5)
    w = T.tensor(np.linspace(-1, 1, 5).astype(np.float32), requires_grad=True)
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        h = (x * w).tanh()        # held by the user: a static output
        z = (h * 3).sigmoid().sum()   # not backwarded: its graph keeps sigmoid's output and h
    new = np.array([0.5, -2.0, 1.0, 3.0, -0.25], np.float32)
    x.data.copy_(T.tensor(new))    # .data: no version bump, so the saved graph stays usable (as PyTorch's)
    g.replay()
    z.backward()
    xt = torch.tensor(new)
    wt = torch.tensor(np.linspace(-1, 1, 5).astype(np.float32), requires_grad=True)
    ht = (xt * wt).tanh()
    zt = (ht * 3).sigmoid().sum()
    zt.backward()
    np.testing.assert_allclose(h.detach().numpy(), ht.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(z.item(), zt.item(), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5)


def test_private_intermediates_keep_their_pool_accounting():
    x = T.ones(4, 3)
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        y = ((x * 2).exp() + 1).sum(0)    # x * 2 and exp are private, y is held
    kinds = {b["kind"] for b in g.buffers()}
    assert "pool" in kinds and "static_output" in kinds
    with T.no_grad():
        x.copy_(T.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) / 10))
    g.replay()
    ref = (torch.arange(12, dtype=torch.float32).reshape(4, 3) / 10 * 2).exp().add(1).sum(0)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-6)


@pytest.mark.parametrize("alpha", [1, -0.5])
def test_captured_in_place_add_and_sub_with_alpha(alpha):
    p = T.tensor(np.array([1.0, 2.0, -3.0], np.float32))
    u = T.tensor(np.array([0.5, 0.25, 4.0], np.float32))
    g = T.graphs.Graph()
    with T.no_grad(), T.graphs.graph(g):
        p.add_(u, alpha=alpha)
        p.sub_(u, alpha=alpha)
        p.add_(u, alpha=alpha)
    for _ in range(3):
        g.replay()
    ref = torch.tensor([1.0, 2.0, -3.0])
    for _ in range(3):
        ref.add_(torch.tensor([0.5, 0.25, 4.0]), alpha=alpha)
    np.testing.assert_array_equal(p.numpy(), ref.numpy())
