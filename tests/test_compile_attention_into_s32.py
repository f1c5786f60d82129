"""Issue 18, session 32: the compiled step's attention backward writes q's, k's and v's gradients straight
into their parts of the joined qkv gradient (``plans.written_into`` / ``writing_into``), so the cat after
it copies nothing; the step generated without it and eager give the same floats, torch the same values."""
import numpy as np
import pytest
import torch

import tapelab as T
from tapelab.compiler import cpu
from tapelab.compiler import step as S
from tapelab.compiler.plans import _places, writing_into
from tapelab.kernels import blas

from _compile_models import GPTBlock

pytestmark = pytest.mark.skipif(not cpu.numba_available(), reason="the fused kernels are numba's")


class _Loss(T.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        y = self.inner(x)
        return (y * y).mean()


def _models():
    T.manual_seed(0)
    gpt = GPTBlock(64, 4)
    T.manual_seed(1)
    enc = T.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    return {"gpt": gpt, "encoder": enc}


def _run(fn, net, x):
    net.zero_grad(set_to_none=True)
    x.grad = None
    loss = fn(x)
    loss.backward()
    return [loss.detach().numpy().copy(), x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in net.parameters()]


def _compiled_runs(net, x, calls=3):
    compiled = T.compile(net)
    runs = [_run(compiled, net, x) for _ in range(calls)]
    return runs, next(iter(compiled._compiled.cache.values())).step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["gpt", "encoder"])
def test_attention_gradients_written_into_the_qkv_gradient(monkeypatch, name, dtype):
    """The generated backward runs the cat only where the attention did not write its parts (source), and
    every call's loss and gradients equal those of the step generated without the plan bit for bit, and
    eager's within float32 rounding (the compiled loss kernel sums in another order)."""
    net = _Loss(_models()[name])
    if dtype is np.float64:
        net = net.double()
    x = T.tensor(np.random.default_rng(3).standard_normal((2, 16, 64)).astype(dtype), requires_grad=True)
    eager = _run(net, net, x)
    runs, step = _compiled_runs(net, x)
    assert "[-1] is not None:" in step.sources[1], step.sources[1]
    monkeypatch.setattr(S, "written_into", lambda *a: {})
    plain_runs, plain_step = _compiled_runs(net, x)
    assert "[-1] is not None:" not in plain_step.sources[1]
    for run, plain in zip(runs, plain_runs):
        for a, p, e in zip(run, plain, eager):
            np.testing.assert_array_equal(a, p)
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6 if dtype is np.float32 else 1e-12)


def test_gpt_block_gradients_match_torch():
    """The oracle: the same GPT block in torch (copied parameters) gives the compiled step's gradients."""
    net = _Loss(_models()["gpt"])
    xn = np.random.default_rng(4).standard_normal((2, 16, 64)).astype(np.float32)
    got, _ = _compiled_runs(net, T.tensor(xn, requires_grad=True), calls=2)
    got = got[-1]
    ln1, ln2 = torch.nn.LayerNorm(64), torch.nn.LayerNorm(64)
    qkv, proj, fc, out = torch.nn.Linear(64, 192), torch.nn.Linear(64, 64), torch.nn.Linear(64, 256), torch.nn.Linear(256, 64)
    mods = [ln1, ln2, qkv, proj, fc, out]
    params = [p for m in mods for p in m.parameters()]
    with torch.no_grad():
        for p, q in zip(params, net.parameters()):
            p.copy_(torch.from_numpy(q.detach().numpy()))
    x = torch.tensor(xn, requires_grad=True)
    b, t, d = x.shape
    q, k, v = qkv(ln1(x)).split(d, dim=2)
    q, k, v = (z.reshape(b, t, 4, d // 4).transpose(1, 2) for z in (q, k, v))
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = x + proj(a.transpose(1, 2).reshape(b, t, d))
    h = fc(ln2(y))
    h = 0.5 * h * (1.0 + ((h + 0.044715 * h * h * h) * (2.0 / np.pi) ** 0.5).tanh())
    loss = ((y + out(h)) ** 2).mean()
    loss.backward()
    want = [loss.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in params]
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=2e-5, atol=2e-6)


def test_places_are_the_views_the_cat_reads():
    """Each source written through its place gives the array that the views and the cat make."""
    rng = np.random.default_rng(5)
    cases = [((8, 64, 384), 2, [((8, 4, 64, 32), [("permute", {"dims": (0, 2, 1, 3)}), ("reshape", {"shape": (8, 64, 128)})],
                                 (8, 64, 128))] * 3),
             ((64, 8, 384), 2, [((8, 4, 64, 32), [("reshape", {"shape": (32, 64, 32)}), ("permute", {"dims": (1, 0, 2)}),
                                                  ("reshape", {"shape": (64, 8, 128)})], (64, 8, 128))] * 3),
             ((6, 10), 0, [((10, 2), [("permute", {"dims": (1, 0)})], (2, 10)), ((10, 4), [("permute", {"dims": (1, 0)})],
                                                                              (4, 10))])]
    for shape, dim, parts in cases:
        places = _places(shape, dim, parts)
        assert places is not None
        out = np.empty(shape, np.float32)
        joined = []
        for (source, views, _), (src_shape, offset, strides) in zip(parts, places):
            assert src_shape == source
            x = rng.standard_normal(source).astype(np.float32)
            np.ndarray(source, np.float32, out, offset * 4, tuple(s * 4 for s in strides))[...] = x
            for name, params in views:
                x = x.transpose(params["dims"]) if name == "permute" else x.reshape(params["shape"])
            joined.append(x)
        np.testing.assert_array_equal(out, np.concatenate(joined, axis=dim))
    # a merged batch of heads (b * h) is no strided view of the joined (b, t, h * d) array
    assert _places((2, 16, 192), 2, [((8, 16, 16), [("reshape", {"shape": (2, 4, 16, 16)}),
                                                    ("permute", {"dims": (0, 2, 1, 3)}),
                                                    ("reshape", {"shape": (2, 16, 64)})], (2, 16, 64))] * 3) is None


def test_an_op_that_makes_its_own_arrays_leaves_the_cat_to_join_them():
    """``writing_into`` hands back None as its last result where the op did not write into its places
    (another dtype, or a path that allocates): the generated step then runs the views and the cat."""
    def own(xp, g, *, into=None):
        return g + 1, g + 2, g + 3, None
    places = tuple(((4,), i, (3,)) for i in range(3))
    f = writing_into(own, (4, 3), np.float32, places)
    g = np.arange(4, dtype=np.float32)
    assert f(np, g)[-1] is None
    assert f(np, g.astype(np.float64))[-1] is None

    def writes(xp, g, *, into=None):
        for i, part in enumerate(into):
            part[...] = g + i
        return (*into, None)
    got = writing_into(writes, (4, 3), np.float32, places)(np, g)
    np.testing.assert_array_equal(got[-1], np.stack([g, g + 1, g + 2], axis=1))


def test_attention_grad_into_interleaved_parts_equals_separate_arrays():
    """The region takes three outputs interleaved in one array (disjoint columns): the same floats as into
    three arrays of their own."""
    if not blas.available():
        pytest.skip("MKL's GEMM is not loaded")
    rng = np.random.default_rng(6)
    b, h, n, d = 2, 4, 16, 8
    q, k, v, g = (rng.standard_normal((b, h, n, d)).astype(np.float32) for _ in range(4))
    s = q @ k.swapaxes(-1, -2)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True)).astype(np.float32)
    own = [np.empty((b, h, n, d), np.float32) for _ in range(3)]
    ds_own = blas.attention_grad_into(g, q, k, v, p, *own, 1)
    assert ds_own is not None
    joined = np.empty((b, n, 3 * h * d), np.float32)
    parts = [joined[..., i * h * d:(i + 1) * h * d].reshape(b, n, h, d).transpose(0, 2, 1, 3) for i in range(3)]
    ds = blas.attention_grad_into(g, q, k, v, p, *parts, 1)
    assert ds is not None
    np.testing.assert_array_equal(ds, ds_own)
    for a, e in zip(parts, own):
        np.testing.assert_array_equal(a, e)
    assert blas.attention_grad_into(g, q, k, v, p, parts[0], parts[0], parts[2], 1) is None   # one array twice
