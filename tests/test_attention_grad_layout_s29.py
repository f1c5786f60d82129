"""scaled_dot_product_attention's input gradients for GPT's heads laid out as PyTorch's. Its CPU flash
backward (4-d, no dropout, one batch shape and head dim) writes dq, dk, dv as (batch, length, heads, dim)
arrays transposed; tapelab does so where the query is laid out so too (GPT's heads cut from one projection,
``view(b, l, h, d).transpose(1, 2)``), whose gradients then go back through the views without a copy, and
keeps them contiguous elsewhere (contiguous heads, multi-head attention's (length, batch, heads, dim) ones).
The strides seen by hooks are torch's there, and the values torch's everywhere (the products write into the
strided arrays)."""
import numpy as np
import pytest
import torch

import tapelab


def _grads(lib, make, **kw):
    """The (strides, values) of q, k and v's gradients as their hooks see them, and the leaves' gradients."""
    leaves, (q, k, v) = make(lib)
    seen = {}
    for name, t in zip("qkv", (q, k, v)):
        t.register_hook(lambda g, name=name: seen.__setitem__(name, (tuple(g.stride()), g.detach().numpy().copy())))
    y = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    seen["y"] = tuple(y.stride()), y.detach().numpy().copy()
    y.backward(lib.tensor(np.random.default_rng(7).standard_normal(tuple(y.shape)).astype(np.float32)))
    return seen, [t.grad.numpy() for t in leaves]


def _contiguous(shape: tuple) -> tuple:
    return tuple(s // 4 for s in np.empty(shape, np.float32).strides)


def _separate(b=2, h=4, n=8, d=16):
    def make(lib):
        rng = np.random.default_rng(1)
        ts = [lib.tensor(rng.standard_normal((b, h, n, d)).astype(np.float32), requires_grad=True) for _ in range(3)]
        return ts, ts
    return make


def _gpt_views(b=2, h=4, n=8, d=16):
    def make(lib):
        x = lib.tensor(np.random.default_rng(2).standard_normal((b, n, 3 * h * d)).astype(np.float32), requires_grad=True)
        return [x], tuple(z.view(b, n, h, d).transpose(1, 2) for z in x.split(h * d, dim=2))
    return make


def _mha_heads(b=2, h=4, n=8, d=16):
    def make(lib):
        z = lib.tensor(np.random.default_rng(3).standard_normal((n, b, 3 * h * d)).astype(np.float32), requires_grad=True)
        heads = tuple(c.reshape(n, b * h, d).transpose(0, 1).reshape(b, h, n, d) for c in z.chunk(3, dim=-1))
        return [z], heads
    return make


# (inputs, keywords, whether the layouts are torch's)
CASES = [(_separate(), {}, False), (_separate(), {"is_causal": True}, False), (_gpt_views(), {"is_causal": True}, True),
         (_gpt_views(), {}, True), (_gpt_views(3, 2, 5, 8), {"scale": 0.3}, True), (_mha_heads(), {"is_causal": True}, False)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_gradients_are_laid_out_as_torch(case, threads):
    make, kw, as_torch = CASES[case]
    was, was_torch = tapelab.get_num_threads(), torch.get_num_threads()
    tapelab.set_num_threads(threads)
    torch.set_num_threads(threads)
    try:
        ours, our_leaves = _grads(tapelab, make, **kw)
        theirs, their_leaves = _grads(torch, make, **kw)
    finally:
        torch.set_num_threads(was_torch)
        tapelab.set_num_threads(was)
    for name in "yqkv":
        if as_torch:
            assert ours[name][0] == theirs[name][0], name
        elif name != "y":
            assert ours[name][0] == _contiguous(ours[name][1].shape), name
        np.testing.assert_allclose(ours[name][1], theirs[name][1], rtol=2e-5, atol=2e-6)
    for a, b in zip(our_leaves, their_leaves):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_masked_gradients_are_laid_out_as_torch():
    """A boolean mask keeps torch on the flash kernel: the same layout."""
    mask = np.random.default_rng(4).random((8, 8)) > 0.3
    ours, _ = _grads(tapelab, _gpt_views(), attn_mask=tapelab.tensor(mask))
    theirs, _ = _grads(torch, _gpt_views(), attn_mask=torch.tensor(mask))
    assert ours["q"][0] == theirs["q"][0] == (512, 16, 64, 1)
    for name in "qkv":
        assert ours[name][0] == theirs[name][0]
        np.testing.assert_allclose(ours[name][1], theirs[name][1], rtol=2e-5, atol=2e-6)


def test_multi_head_attention_layer_is_torch():
    """``nn.MultiheadAttention`` (batch first, causal, the weights not returned), whose heads reach the
    kernel as (length, batch, heads, dim) tensors: output and gradients torch's within float32 rounding."""
    e, h, n, b = 32, 4, 8, 3
    rng = np.random.default_rng(5)
    x = rng.standard_normal((b, n, e)).astype(np.float32)
    mask = np.triu(np.full((n, n), -np.inf, np.float32), 1)
    res = []
    for lib in (tapelab, torch):
        lib.manual_seed(0)
        mha = lib.nn.MultiheadAttention(e, h, batch_first=True)
        with lib.no_grad():
            for p, v in zip(mha.parameters(), _params(e)):
                p.copy_(lib.tensor(v))
        tx = lib.tensor(x, requires_grad=True)
        y, _ = mha(tx, tx, tx, attn_mask=lib.tensor(mask), is_causal=True, need_weights=False)
        y.backward(lib.tensor(np.ones(y.shape, np.float32)))
        res.append([y.detach().numpy(), tx.grad.numpy()] + [p.grad.numpy() for p in mha.parameters()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def _params(e):
    rng = np.random.default_rng(6)
    return [(rng.standard_normal(s) * 0.2).astype(np.float32) for s in ((3 * e, e), (3 * e,), (e, e), (e,))]
