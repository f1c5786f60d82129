"""Gaps found by running researchers' programs (VQ-VAE, CLIP, NeRF, RealNVP, PPO, MoE, BERT MLM,
seq2seq) unchanged under ``install_aliases()``, each checked against real torch: index_add's
error type for a bad index, the TransformerEncoder nested-tensor warning, and the VQ-VAE
codebook step (cdist/argmin, straight-through, EMA update by index_add_/scatter_add_)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- index_add out of range
@BOTH
@pytest.mark.parametrize("bad", [4, -5])
def test_index_add_out_of_range_is_runtime_error(m, bad):
    index = m.tensor([0, bad])
    with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for dimension 0 with size 4"):
        m.zeros(4, 3).index_add_(0, index, m.ones(2, 3))
    with pytest.raises(RuntimeError, match="out of bounds for dimension 0 with size 4"):
        m.zeros(4, 3).index_add(0, index, m.ones(2, 3))


@BOTH
def test_index_copy_and_select_out_of_range_stay_index_error(m):
    with pytest.raises(IndexError):
        m.zeros(4, 3).index_copy_(0, m.tensor([0, 4]), m.ones(2, 3))
    with pytest.raises(IndexError):
        m.zeros(4, 3).index_select(0, m.tensor([0, 4]))


def test_index_add_values_and_gradients_match_torch():
    rs = np.random.RandomState(0)
    src, idx = rs.standard_normal((5, 3)), np.array([0, 2, 2, 1, 0])
    out = {}
    for m in (torch, tapelab):
        s = m.tensor(src, requires_grad=True)
        y = m.zeros(4, 3, dtype=m.float64).index_add(0, m.tensor(idx), s, alpha=0.5)
        (g,) = m.autograd.grad((y ** 2).sum(), s)
        out[m.__name__] = (y.detach().numpy(), g.numpy())
    np.testing.assert_allclose(out["tapelab"][0], out["torch"][0], rtol=1e-12)
    np.testing.assert_allclose(out["tapelab"][1], out["torch"][1], rtol=1e-12)


# ---------------------------------------------------------------- TransformerEncoder warning
def _encoder_warnings(m, **layer_kwargs) -> list[str]:
    enable = layer_kwargs.pop("enable_nested_tensor", True)
    layer = m.nn.TransformerEncoderLayer(16, layer_kwargs.pop("nhead", 2), 32, **layer_kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.nn.TransformerEncoder(layer, 1, enable_nested_tensor=enable)
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("kwargs", [
    {}, {"batch_first": True}, {"batch_first": True, "norm_first": True}, {"batch_first": True, "nhead": 1},
    {"batch_first": True, "bias": False}, {"batch_first": True, "activation": "gelu"},
    {"batch_first": True, "activation": torch.nn.functional.silu}, {"norm_first": True, "enable_nested_tensor": False},
], ids=lambda kw: str({k: getattr(v, "__name__", v) for k, v in kw.items()}))   # the same ids in every process (xdist)
def test_transformer_encoder_nested_tensor_warning_matches_torch(kwargs):
    theirs = _encoder_warnings(torch, **dict(kwargs))
    if kwargs.get("activation") is torch.nn.functional.silu:
        kwargs = {**kwargs, "activation": tapelab.nn.functional.silu}
    assert _encoder_warnings(tapelab, **dict(kwargs)) == theirs


# ---------------------------------------------------------------- VQ-VAE codebook step
def _vq_step(m, z_np, codebook_np):
    z = m.tensor(z_np, requires_grad=True)
    embed = m.tensor(codebook_np)
    idx = m.cdist(z, embed).argmin(dim=1)
    zq = embed[idx]
    st = z + (zq - z).detach()
    loss = (st ** 2).sum() + m.nn.functional.mse_loss(z, zq.detach())
    (g,) = m.autograd.grad(loss, z)
    with m.no_grad():
        sums = m.zeros_like(embed).index_add_(0, idx, z)
        sums2 = m.zeros_like(embed).scatter_add_(0, idx.unsqueeze(1).expand(-1, z.shape[1]), z)
        counts = m.nn.functional.one_hot(idx, embed.shape[0]).sum(0)
    return idx.numpy(), g.numpy(), sums.numpy(), sums2.numpy(), counts.numpy()


def test_vq_codebook_step_matches_torch():
    rs = np.random.RandomState(1)
    z, codebook = rs.standard_normal((12, 4)), rs.standard_normal((6, 4))
    for a, b in zip(_vq_step(tapelab, z, codebook), _vq_step(torch, z, codebook)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
