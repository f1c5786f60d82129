"""Gaps found by running research-model repositories unchanged under ``install_aliases()`` and diffing
what they print against real torch: lucidrains' vit-pytorch (ViT, DeepViT, CaiT, ... from its README),
vector-quantize-pytorch and denoising-diffusion-pytorch, bentrevett's pytorch-seq2seq notebooks as
scripts, karpathy's makemore (every model type) and small labml.ai modules. Each test states the
behaviour on its own, with both torch and tapelab imported, and compares real values."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels


# ---------------------------------------------------------------- einsum's result layout
# DeepViT's re-attention ('b h i j, h g -> b g i j') and attention products ('b h i d, b h j d ->
# b h i j') return ATen's layouts; a dropout mask is drawn in memory order and ``.view`` needs
# compatible strides, so numpy's contraction layouts changed the masks and refused views.
def _nontrivial_strides(t) -> list:
    return [s for s, n in zip(t.stride(), t.shape) if n > 1]


@pytest.mark.parametrize("eq, shapes", [
    ("bhid,bhjd->bhij", [(2, 4, 17, 32), (2, 4, 17, 32)]),
    ("bhij,hg->bgij", [(2, 4, 17, 17), (4, 4)]),
    ("bij,bjk->bik", [(3, 40, 50), (3, 50, 60)]),
    ("ij,jk->ki", [(4, 5), (5, 6)]),
    ("bij,bjk->kbi", [(6, 3, 4), (6, 4, 5)]),
    ("ij,jkl->lik", [(3, 4), (4, 5, 6)]),
    ("bnd,md->bnm", [(4, 30, 40), (50, 40)]),
    ("i,j->ij", [(70,), (80,)]),
    ("age,def->adfeg", [(5, 3, 2), (5, 2, 2)]),
    ("bdgf,ab,cfb->gdfbca", [(5, 3, 1, 5), (2, 1), (1, 5, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 40, 50), (2, 3, 50, 60)]),
])
def test_einsum_result_layout_matches_torch(eq, shapes):
    rs = np.random.RandomState(0)
    arrays = [rs.standard_normal(s).astype(np.float32) for s in shapes]
    want = torch.einsum(eq, *[torch.tensor(a) for a in arrays])
    got = tapelab.einsum(eq, *[tapelab.tensor(a) for a in arrays])
    assert _nontrivial_strides(got) == _nontrivial_strides(want)
    assert got.is_contiguous() == want.is_contiguous()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_einsum_layout_random_equations_match_torch():
    rnd = random.Random(1)
    rs = np.random.RandomState(1)
    for _ in range(400):
        sizes = {c: rnd.choice([1, 2, 3, 4]) for c in "abcdefg"}
        subs = ["".join(rnd.sample("abcdefg", rnd.randint(1, 4))) for _ in range(rnd.choice([2, 2, 3, 4]))]
        labels = sorted(set("".join(subs)))
        eq = ",".join(subs) + "->" + "".join(rnd.sample(labels, rnd.randint(0, len(labels))))
        arrays = [rs.rand(*[sizes[c] if rnd.random() > 0.15 else 1 for c in s]).astype(np.float32) for s in subs]
        try:
            want = torch.einsum(eq, *[torch.tensor(a) for a in arrays])
        except RuntimeError:    # sizes that do not broadcast
            continue
        got = tapelab.einsum(eq, *[tapelab.tensor(a) for a in arrays])
        assert _nontrivial_strides(got) == _nontrivial_strides(want), eq
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_einsum_result_views_as_torch(m):
    q, k = m.ones(2, 4, 17, 32), m.ones(2, 4, 17, 32)
    assert m.einsum("bhid,bhjd->bhij", q, k).view(2, -1).shape == (2, 4 * 17 * 17)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        m.einsum("bhij,hg->bgij", m.ones(2, 4, 17, 17), m.ones(4, 4)).view(2, -1)


def test_dropout_after_einsum_attention_draws_torch_mask():
    """DeepViT's attention: softmax of an einsum product, then dropout (mask in memory order)."""
    out = {}
    for m in (torch, tapelab):
        m.manual_seed(0)
        q, k = m.randn(2, 4, 17, 32), m.randn(2, 4, 17, 32)
        attn = m.nn.functional.dropout(m.einsum("bhid,bhjd->bhij", q, k).softmax(-1), 0.1, True)
        mixed = m.einsum("bhij,hg->bgij", attn, m.randn(4, 4))
        out[m] = (attn.numpy(), m.nn.functional.dropout(mixed, 0.5, True).numpy())
    for got, want in zip(out[tapelab], out[torch]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- nll_loss's reduction order
# makemore prints its test loss at full precision: nll_loss sums through ATen's cascade of partial
# sums, which numpy's pairwise sum missed in the last bits (3.1441743 against 3.1441746). The
# cascade is a loop (kernels/cascade.py): these run with the eager loops on.
@pytest.fixture
def loops_on():
    pytest.importorskip("numba")
    kernels.set_enabled(True)


@pytest.mark.parametrize("n", [7, 17, 257, 520, 1300, 4097])
@pytest.mark.parametrize("ignored", [False, True], ids=["all", "ignored"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_nll_loss_reduction_rounds_as_torch(loops_on, n, ignored, weighted, reduction):
    rs = np.random.RandomState(n)
    logp = np.log(rs.dirichlet(np.ones(5), n)).astype(np.float32)
    target = rs.randint(0, 5, n)
    if ignored:
        target[rs.rand(n) < 0.4] = -1
    weight = rs.rand(5).astype(np.float32) if weighted else None
    got = {}
    for m in (torch, tapelab):
        w = None if weight is None else m.tensor(weight)
        x, t = m.tensor(logp), m.tensor(target)
        got[m] = (m.nn.functional.nll_loss(x, t, w, ignore_index=-1, reduction=reduction).item(),
                  m.nn.functional.nll_loss(x.t().reshape(1, 5, n), t.reshape(1, n), w, ignore_index=-1,
                                           reduction=reduction).item())
    assert got[tapelab] == got[torch]


def test_cross_entropy_of_log_probs_reduces_as_nll_loss(loops_on):
    """Without label smoothing cross_entropy's mean is nll_loss's cascade over the same rows."""
    rs = np.random.RandomState(0)
    x = rs.standard_normal((1000, 27)).astype(np.float32)
    t = rs.randint(0, 27, 1000)
    t[::7] = -1
    logp = tapelab.log_softmax(tapelab.tensor(x), 1)
    want = torch.nn.functional.nll_loss(torch.tensor(logp.numpy()), torch.tensor(t), ignore_index=-1).item()
    assert tapelab.nn.functional.cross_entropy(tapelab.tensor(x), tapelab.tensor(t), ignore_index=-1).item() == want


# ---------------------------------------------------------------- broadcast error names the last dim
# vit-pytorch's README (MPP/SimMIM on a stale config) fails alike under both; the message named the
# first differing dim where ATen's infer_size, walking from the right, names the last.
@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_broadcast_error_names_the_last_differing_dim(m):
    with pytest.raises(RuntimeError, match=r"tensor a \(1024\) must match the size of tensor b \(64\) at non-singleton "
                                           r"dimension 2"):
        m.ones(8, 64, 1024) + m.ones(65, 64)
