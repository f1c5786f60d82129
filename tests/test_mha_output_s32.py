"""multi_head_attention_forward's heads joined in one copy (session 32): the SDPA path's output, (bsz, heads,
L, d), goes to (L * bsz, E) through ``permute(2, 0, 1, 3)`` and one reshape, as PyTorch's
``permute(2, 0, 1, 3).contiguous()`` (it was two copies, through (bsz * heads, L, d)). Values and gradients
against PyTorch's, on both attention paths; the products see the layouts the two copies gave them, so the
floats are the earlier ones bit for bit (checked against the earlier tree at one and two threads)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl


def _run(lib, x, state, *, batch_first, causal, need_weights, heads, threads):
    lib.set_num_threads(threads)
    try:
        mha = lib.nn.MultiheadAttention(x.shape[-1], heads, batch_first=batch_first).to(getattr(lib, x.dtype.name))
        mha.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
        xt = lib.tensor(x, requires_grad=True)
        L = x.shape[1] if batch_first else x.shape[0]
        mask = lib.nn.Transformer.generate_square_subsequent_mask(L, dtype=getattr(lib, x.dtype.name)) if causal else None
        out, _ = mha(xt, xt, xt, attn_mask=mask, is_causal=causal, need_weights=need_weights)
        g = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(x.dtype)
        out.backward(lib.tensor(g))
        grads = {k: p.grad.numpy().copy() for k, p in mha.named_parameters()}
        return out.detach().numpy().copy(), xt.grad.numpy().copy(), grads
    finally:
        lib.set_num_threads(1)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mha_against_torch(batch_first, causal, need_weights, dtype):
    rng = np.random.default_rng(0)
    E, heads, L, B = 32, 4, 12, 3
    x = rng.standard_normal((B, L, E) if batch_first else (L, B, E)).astype(dtype)
    ref = torch.nn.MultiheadAttention(E, heads, batch_first=batch_first, dtype=getattr(torch, dtype))
    state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    want = _run(torch, x, state, batch_first=batch_first, causal=causal, need_weights=need_weights,
                heads=heads, threads=1)
    got = _run(tl, x, state, batch_first=batch_first, causal=causal, need_weights=need_weights,
               heads=heads, threads=1)
    tol = dict(rtol=1e-9, atol=1e-10) if dtype == "float64" else dict(rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got[0], want[0], **tol)
    np.testing.assert_allclose(got[1], want[1], **tol)
    for k in want[2]:
        np.testing.assert_allclose(got[2][k], want[2][k], **tol, err_msg=k)


@pytest.mark.parametrize("threads", [1, 2])
def test_transformer_sized_heads_bit_for_bit(threads):
    """The Transformer row's shapes (d 128, 4 heads, 64 x 16, causal), where MKL takes the products and
    attention runs as one region of heads: output and gradients as torch's, at one and two threads."""
    rng = np.random.default_rng(2)
    E, heads, L, B = 128, 4, 64, 16
    x = rng.standard_normal((B, L, E)).astype(np.float32)
    ref = torch.nn.MultiheadAttention(E, heads, batch_first=True)
    state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    want = _run(torch, x, state, batch_first=True, causal=True, need_weights=False, heads=heads, threads=threads)
    got = _run(tl, x, state, batch_first=True, causal=True, need_weights=False, heads=heads, threads=threads)
    np.testing.assert_allclose(got[0], want[0], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=2e-4, atol=2e-5)
    for k in want[2]:
        np.testing.assert_allclose(got[2][k], want[2][k], rtol=2e-4, atol=2e-5, err_msg=k)
