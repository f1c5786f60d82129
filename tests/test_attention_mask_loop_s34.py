"""``scaled_dot_product_attention`` with a mask array (Hugging Face's Llama, Mistral, BERT and T5 pass a
float 4-d mask): the scale, mask and softmax are one loop over the heads reading the mask's own rows
(``kernels.rowwise.attention_softmax_masked`` / ``_kept``). Values and gradients against PyTorch, the loop
against numpy's formula (the loops switched off), every broadcast shape of the mask, at one and two
threads (the heads split between them), and rows with nothing to attend."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels

from _threads import thread_counts

threads = thread_counts([1, 2], loops=True)

F32MIN = float(np.finfo(np.float32).min)

# (scores' leading dims, mask shape): a causal mask shared by every head, HF's (batch, 1, L, S), one per
# head, a key-padding row (batch, 1, 1, S), a mask shared along the keys, 3-d scores
SHAPES = [((2, 3), (7, 9)), ((2, 3), (2, 1, 7, 9)), ((2, 3), (2, 3, 7, 9)), ((2, 3), (2, 1, 1, 9)),
          ((2, 3), (1, 3, 7, 1)), ((5,), (5, 7, 9)), ((), (7, 9))]


def _inputs(lead, mask_shape, kind, rng, L=7, S=9, E=8):
    q = rng.standard_normal(lead + (L, E)).astype(np.float32)
    k = rng.standard_normal(lead + (S, E)).astype(np.float32)
    v = rng.standard_normal(lead + (S, E)).astype(np.float32)
    if kind == "bool":
        mask = rng.random(mask_shape) > 0.3
    else:
        # the first key never at finfo.min: a row all at finfo.min attends uniformly here (its scores round to
        # finfo.min), while torch's flash backward, which rebuilds the weights from the row's log-sum-exp
        # (finfo.min + log S rounds to finfo.min), takes each weight as 1 and gives S times our gradient
        values = rng.standard_normal(mask_shape)
        mask = np.where(rng.random(mask_shape) > 0.3, values, F32MIN).astype(np.float32)
        mask[..., 0] = values[..., 0]
    return q, k, v, mask


def _run(lib, q, k, v, mask, g):
    qs, ks, vs = (lib.tensor(a, requires_grad=True) for a in (q, k, v))
    out = lib.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=lib.tensor(mask))
    out.backward(lib.tensor(g))
    return [t.detach().numpy() for t in (out, qs.grad, ks.grad, vs.grad)]


@pytest.mark.parametrize("kind", ["float", "bool"])
@pytest.mark.parametrize("lead,mask_shape", SHAPES)
def test_values_and_gradients_are_torchs(threads, lead, mask_shape, kind):
    rng = np.random.default_rng(len(lead) * 10 + len(mask_shape))
    q, k, v, mask = _inputs(lead, mask_shape, kind, rng)
    if kind == "bool" and mask_shape[-1] == 9:
        mask[..., 0] = True                      # torch's math path gives nan for a row with nothing to attend
    g = rng.standard_normal(q.shape).astype(np.float32)
    ours, theirs = _run(tapelab, q, k, v, mask, g), _run(torch, q, k, v, mask, g)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["float", "bool"])
@pytest.mark.parametrize("lead,mask_shape", SHAPES)
def test_the_loop_is_numpys_formula(lead, mask_shape, kind):
    """The loop against the same op with the loops switched off (numpy's ``s * scale + mask``, max,
    exp, sum, divide): within float32 rounding (the loop's exp is ``fastmath.exp32``)."""
    rng = np.random.default_rng(7)
    q, k, v, mask = _inputs(lead, mask_shape, kind, rng)
    g = rng.standard_normal(q.shape).astype(np.float32)
    kernels.set_enabled(True)
    looped = _run(tapelab, q, k, v, mask, g)
    kernels.set_enabled(False)
    formula = _run(tapelab, q, k, v, mask, g)
    for a, b in zip(looped, formula):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def test_a_row_with_nothing_to_attend_gives_zeros():
    """Every key masked (bool False, or a float mask of -inf) gives a zero output row and zero gradients
    there, as the formula without the loops does; the other rows are unchanged by it."""
    rng = np.random.default_rng(3)
    q, k, v, mask = _inputs((2, 2), (2, 1, 7, 9), "bool", rng)
    mask[:, :, 2] = False
    fmask = np.where(mask, 0.0, -np.inf).astype(np.float32)
    g = rng.standard_normal(q.shape).astype(np.float32)
    for m in (mask, fmask):
        out, gq, gk, gv = _run(tapelab, q, k, v, m, g)
        np.testing.assert_array_equal(out[:, :, 2], 0.0)
        np.testing.assert_array_equal(gq[:, :, 2], 0.0)
        kept = np.ones(7, bool)
        kept[2] = False
        m2 = m.copy()
        m2[:, :, 2] = True if m.dtype == np.bool_ else 0.0
        ref = _run(torch, q, k, v, m2, g)[0]
        np.testing.assert_allclose(out[:, :, kept], ref[:, :, kept], rtol=2e-5, atol=2e-6)


def test_a_mask_that_takes_a_gradient():
    """A float mask with ``requires_grad`` gets torch's gradient (the score gradient summed to its shape)."""
    rng = np.random.default_rng(5)
    q, k, v, mask = _inputs((2, 3), (2, 1, 7, 9), "float", rng)
    mask = rng.standard_normal(mask.shape).astype(np.float32)
    grads = []
    for lib in (tapelab, torch):
        qs, ks, vs, ms = (lib.tensor(a, requires_grad=True) for a in (q, k, v, mask))
        lib.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=ms).sum().backward()
        grads.append(ms.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("S", [1, 5, 8, 17, 64])
@pytest.mark.parametrize("mask_shape", [(1, 1, 6, "S"), (2, 1, 1, "S"), (2, 3, 6, "S"), (1, 3, 6, "S")])
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_the_loops_against_float64(S, mask_shape, kind):
    """The loops themselves on (2, 3) heads of (6, S) scores against softmax(s scale + mask) in float64."""
    from tapelab.kernels import rowwise
    rng = np.random.default_rng(S)
    shape = tuple(S if d == "S" else d for d in mask_shape)
    s = (rng.standard_normal((2, 3, 6, S)) * 3).astype(np.float32)
    if kind == "bool":
        mask = rng.random(shape) > 0.4
        mask[..., 0] = True
        x = np.where(mask, s.astype(np.float64) * np.float64(np.float32(0.3)), -np.inf)
        bias = np.where(mask, np.float32(0), np.float32(-np.inf))    # as _masked_softmax gives it a bool mask
    else:
        mask = rng.standard_normal(shape).astype(np.float32)
        x = (s * np.float32(0.3)).astype(np.float64) + mask
        bias = mask
    ref = np.exp(x - x.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    out = s.reshape(6, 6, S).copy()
    rowwise.attention_softmax_masked(out, np.arange(6), 3, bias, np.float32(0.3))
    np.testing.assert_allclose(out.reshape(s.shape), ref, rtol=3e-6, atol=1e-7)
    if kind == "bool":
        np.testing.assert_array_equal(out.reshape(s.shape)[~np.broadcast_to(mask, s.shape)], 0.0)
