"""Compile under autocast fuses (session 33, issue 18): a bfloat16 value in a generated loop is its float32
op rounded to bfloat16, as eager's ml_dtypes ufuncs compute it, so the fused groups of a bf16 autocast graph
give eager autocast's floats bit for bit. PyTorch CPU is the oracle where eager matches it."""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tapelab

sys.path.insert(0, str(Path(__file__).parent))
from _compile_models import GPTBlock  # noqa: E402

BF16 = tapelab.bfloat16
F = tapelab.nn.functional


def _fused_names(c) -> list:
    cache = c._compiled.cache if hasattr(c, "_compiled") else c.cache
    assert len(cache) == 1
    entry = next(iter(cache.values()))
    assert entry.run is not None and entry.reason is None
    return [op.name for op in getattr(entry.graph, "fused_ops", [])]


def _bits(t) -> np.ndarray:
    """A bfloat16 tensor's bit patterns, every NaN one pattern (eager and the loop both make quiet NaNs)."""
    a = t.detach().numpy().view(np.uint16).copy()
    a[np.isnan(t.detach().float().numpy())] = 0x7FC0
    return a


_EVERY_BF16 = np.arange(1 << 16, dtype=np.uint16)

_UNARY = {
    "tanh": lambda v: v.tanh(), "exp": lambda v: v.exp(), "log": lambda v: v.log(), "sqrt": lambda v: v.sqrt(),
    "cube": lambda v: v ** 3, "pow_half": lambda v: v ** 0.5, "reciprocal": lambda v: v.reciprocal(),
    "div": lambda v: v / 3, "where": lambda v: tapelab.where(v > 1, v, v * 3), "relu": F.relu,
}


@pytest.mark.parametrize("name", sorted(_UNARY))
def test_bf16_loop_equals_eager_on_every_bf16_value(name):
    """Every one of the 65536 bfloat16 inputs: the fused loop (the member between two exact scalings)
    gives eager's bits, NaNs, infinities and subnormals included."""
    x = tapelab.from_numpy(_EVERY_BF16.view(BF16.np).copy())
    op = _UNARY[name]

    def f(v):
        return op(v * 2.0) * 0.5
    c = tapelab.compile(f)
    with np.errstate(all="ignore"):
        got, want = c(x), f(x)
    assert got.dtype == want.dtype == BF16
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert any(n.startswith("fused(mul") for n in _fused_names(c))


def test_cast_to_bf16_rounds_as_eager_and_torch():
    """float32 -> bfloat16 in a loop: round to nearest even, overflow to inf, NaN quiet: eager's and
    torch's bits (random float32 bit patterns, and the edges)."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    a = np.concatenate([a, np.array([np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -0.0, 1.0000001, 1.00390625],
                                    np.float32)])
    a = a[~np.isnan(a)]            # torch keeps a NaN's payload bits where ml_dtypes makes it quiet

    def f(v):
        return (v * 1.0 + 0.0).to(tapelab.bfloat16)
    c = tapelab.compile(f)
    x = tapelab.from_numpy(a.copy())
    with np.errstate(all="ignore"):
        got, want = c(x), f(x)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    ref = (torch.from_numpy(a.copy()) * 1.0 + 0.0).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(_bits(got), ref)
    assert "fused(mul, add, cast)" in _fused_names(c)


def test_bf16_times_python_float_keeps_the_float_a_float32():
    """``h * 0.7978845608`` on bfloat16: the number stays a float32 and the product rounds once, as the
    dispatcher (and torch) compute it, where numpy would round the number to bfloat16 first."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 64)).astype(np.float32)

    def f(h):
        return (h * 0.7978845608028654 + 1.0) / 3.3
    c = tapelab.compile(f)
    x = tapelab.tensor(a).to(BF16)
    got, want = c(x), f(x)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    ref = f(torch.from_numpy(a).to(torch.bfloat16)).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(_bits(got), ref)
    assert _fused_names(c) == ["fused(mul, add, div)"]


def _step(f, params, x, lib):
    with lib.autocast("cpu", dtype=lib.bfloat16):
        y = f(x)
        loss = y.float().pow(2).mean()
    return y, loss, lib.autograd.grad(loss, params)


@pytest.mark.parametrize("model", ["gpt", "encoder"])
def test_bf16_autocast_block_fuses_and_equals_eager_autocast(model):
    """A GPT block (tanh-GELU written out, residual adds) and a Transformer encoder layer under bf16
    autocast: compiled, their elementwise groups fuse (the bf16 GELU chain, the float32 residual adds
    reading a bf16 input), and the output, loss and every gradient equal eager autocast's bit for bit."""
    tapelab.manual_seed(0)
    if model == "gpt":
        m = GPTBlock(32, 4)
    else:
        m = tapelab.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True)
    params = list(m.parameters())
    c = tapelab.compile(m)
    for seed in range(3):
        x = tapelab.randn(2, 64, 32, generator=tapelab.Generator().manual_seed(seed))
        y, loss, grads = _step(c, params, x, tapelab)
        e_y, e_loss, e_grads = _step(m, params, x, tapelab)
        assert y.dtype == e_y.dtype
        np.testing.assert_array_equal(y.float().detach().numpy(), e_y.float().detach().numpy())
        assert loss.item() == e_loss.item()
        for g, e_g in zip(grads, e_grads):
            np.testing.assert_array_equal(g.numpy(), e_g.numpy())
    names = _fused_names(c)
    assert names.count("fused(cast, add)") + names.count("fused(add)") >= 2, names
    if model == "gpt":
        assert "fused(mul, mul, mul, mul, add, mul, tanh, add, mul)" in names


def test_bf16_autocast_gpt_block_against_torch():
    """The compiled bf16 GPT block against torch's cpu autocast: within bf16 rounding."""
    tapelab.manual_seed(0)
    m = GPTBlock(32, 4)
    ref = _torch_gpt(m)
    x = np.random.default_rng(2).standard_normal((2, 16, 32)).astype(np.float32)
    c = tapelab.compile(m)
    y, loss, grads = _step(c, list(m.parameters()), tapelab.tensor(x), tapelab)
    t_y, t_loss, t_grads = _step(ref, list(ref.parameters()), torch.from_numpy(x), torch)
    np.testing.assert_allclose(y.float().detach().numpy(), t_y.float().detach().numpy(), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=2e-2)
    for g, t_g in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), t_g.numpy(), rtol=5e-2, atol=5e-3)
    assert _fused_names(c)


def _torch_gpt(m):
    """tests/_compile_models.GPTBlock written in torch, with ``m``'s weights."""
    import math

    class Block(torch.nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            h = self.fc(self.ln2(x))
            h = 0.5 * h * (1.0 + ((h + 0.044715 * h * h * h) * math.sqrt(2.0 / math.pi)).tanh())
            return x + self.out(h)
    ref = Block(32, 4)
    with torch.no_grad():
        for p, q in zip(ref.parameters(), m.parameters()):
            p.copy_(torch.from_numpy(q.detach().numpy().copy()))
    return ref


def test_float16_autocast_still_compiles_unfused():
    """float16 has no loop type: its graph compiles with no fused group and equals eager autocast."""
    tapelab.manual_seed(0)
    m = GPTBlock(32, 4)
    c = tapelab.compile(m)
    x = tapelab.randn(2, 8, 32)
    with tapelab.autocast("cpu", dtype=tapelab.float16):
        y, e_y = c(x), m(x)
    np.testing.assert_array_equal(y.float().detach().numpy(), e_y.float().detach().numpy())
    assert _fused_names(c) == []
