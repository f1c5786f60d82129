"""Issue 18, session 29: the one-node step's backward computes cheap elementwise forward values again
instead of reading them saved (``step._recomputed``): fewer arrays written by the forward's fused
kernels, the same floats; a cat copies its inputs' reshape sources straight into its output
(``plans.cat_copying``): one copy where the reshape and the cat made two, the same elements."""
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


# ---------------------------------------------------------------- a cat copying its inputs' sources
@pytest.mark.parametrize("a,b,want", [((64, 32, 32), (64, 8, 128), (64, 8, 4, 32)), ((6,), (2, 3), (2, 3)),
                                      ((2, 3), (6,), (2, 3)), ((4, 6), (6, 4), None), ((4,), (4, 1), None),
                                      ((0, 3), (3, 0), None), ((8, 4, 64, 32), (32, 64, 32), (8, 4, 64, 32))])
def test_refined_shape(a, b, want):
    from tapelab.compiler.plans import refined
    assert refined(a, b) == want
    if want is not None:
        assert refined(b, a) == want
        x = np.arange(np.prod(a)).reshape(a)
        np.testing.assert_array_equal(x.reshape(want).reshape(b), x.reshape(b))


def test_cat_copying_equals_cat_of_reshapes():
    """Attention's head gradients (8, 4, 64, 32), each seen as (64, 8, 128) through a permute and a
    reshape, copied straight into the (64, 8, 384) result: the same array as the two ops' own; an input
    left as it is and a dtype the fast path does not take give the ops' own too."""
    from tapelab.compiler.plans import cat_copying, refined
    from tapelab.core.registry import REGISTRY
    cat = REGISTRY["cat"].fwd
    rng = np.random.default_rng(1)
    heads = [rng.standard_normal((8, 4, 64, 32)).astype(np.float32) for _ in range(3)]
    srcs = [h.reshape(32, 64, 32).transpose(1, 0, 2) for h in heads]        # (64, 32, 32), not contiguous
    part = ((64, 8, 128), refined((64, 32, 32), (64, 8, 128)))
    want = cat(np, *[s.reshape(64, 8, 128) for s in srcs], dim=2, skip=False)
    got = cat_copying(cat, (part,) * 3)(np, *srcs, dim=2, skip=False)
    assert got.flags.c_contiguous and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    plain = rng.standard_normal((64, 8, 128)).astype(np.float32)
    got = cat_copying(cat, (part, None, part))(np, srcs[0], plain, srcs[2], dim=-1, skip=False)
    np.testing.assert_array_equal(got, cat(np, srcs[0].reshape(64, 8, 128), plain, srcs[2].reshape(64, 8, 128),
                                           dim=2, skip=False))
    mixed = cat_copying(cat, (part, None))(np, srcs[0], plain.astype(np.float64), dim=2, skip=False)
    assert mixed.dtype == np.float64


class _Heads(T.nn.Module):
    """A fused qkv projection split into heads, attention, heads merged: the backward's head
    gradients go back through reshapes into one cat."""

    def __init__(self, d: int = 64, heads: int = 4):
        super().__init__()
        self.qkv, self.heads = T.nn.Linear(d, 3 * d), heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2).reshape(b * self.heads, t, -1)
                   for z in self.qkv(x).split(d, dim=2))
        y = T.nn.functional.scaled_dot_product_attention(q, k, v)
        return y.reshape(b, self.heads, t, -1).transpose(1, 2).reshape(b, t, d).square().sum()


def test_compiled_heads_backward_copies_into_the_cat():
    """The generated backward's cat takes the attention's head gradients with no reshape before it, and
    every gradient equals eager's bit for bit."""
    T.manual_seed(0)
    net = _Heads()
    x = T.tensor(np.random.default_rng(2).standard_normal((2, 16, 64)).astype(np.float32), requires_grad=True)
    compiled = T.compile(net)
    eager = _run(net, net, x)
    for _ in range(2):
        for a, e in zip(_run(compiled, net, x), eager):
            np.testing.assert_array_equal(a, e)
    step = next(iter(compiled._compiled.cache.values())).step
    fn = step.bwd_fn.fn
    fn = next((c.cell_contents for c in (fn.__closure__ or ()) if callable(c.cell_contents)), fn)
    names = {getattr(v, "__name__", "") for v in fn.__globals__.values()}
    assert "planned_cat" in names, step.sources[1]
