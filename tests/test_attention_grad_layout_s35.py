"""Attention's gradients laid out as their inputs where those are dense (multi-head attention's heads,
(length, bsz * heads, dim) buffers read as (bsz, heads, length, dim)): the heads' reshapes then pass the
gradients back without a copy. Values against PyTorch's."""
import numpy as np
import pytest
import torch

import tapelab as tl


def _heads(m, buf, bsz, heads):
    """(L, bsz * heads, d) -> (bsz, heads, L, d), as multi-head attention's SDPA path reads them."""
    length, _, d = buf.shape
    return buf.transpose(0, 1).reshape(bsz, heads, length, d)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_mha_heads_gradients_laid_out_as_the_query(causal, threads):
    rng = np.random.default_rng(0)
    bsz, heads, length, d = 16, 4, 64, 32   # the Transformer row's heads: the one-region backward
    arrays = [rng.standard_normal((length, bsz * heads, d)).astype(np.float32) for _ in range(3)]
    g = rng.standard_normal((bsz, heads, length, d)).astype(np.float32)
    seen, grads = {}, {}
    old = tl.get_num_threads()
    tl.set_num_threads(threads)
    try:
        for m in (tl, torch):
            leaves = [m.tensor(a, requires_grad=True) for a in arrays]
            q, k, v = (_heads(m, x, bsz, heads) for x in leaves)
            if m is tl:
                q.register_hook(lambda gq: seen.update(q=gq.numpy()) and None)
            out = m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out.backward(m.tensor(g))
            grads[m.__name__] = [x.grad.numpy() for x in leaves]
    finally:
        tl.set_num_threads(old)
    for ours, theirs in zip(grads["tapelab"], grads["torch"]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    gq = seen["q"]
    # the query's layout: (bsz, heads, L, d) strides of a (L, bsz * heads, d) C-contiguous array
    assert gq.strides == (heads * d * 4, d * 4, bsz * heads * d * 4, 4)


def test_contiguous_query_keeps_contiguous_gradients():
    rng = np.random.default_rng(1)
    q, k, v = (tl.tensor(rng.standard_normal((2, 3, 8, 16)).astype(np.float32), requires_grad=True)
               for _ in range(3))
    seen = {}
    q.register_hook(lambda gq: seen.update(q=gq.numpy()) and None)
    tl.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()
    assert seen["q"].flags.c_contiguous
