"""Every loss module against PyTorch, for every reduction: values and gradients w.r.t. the
input (and target where it is differentiable)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from test_nn_layers import arr, close, pair, parity

RNG = np.random.default_rng(1)
REDUCTIONS = ["none", "mean", "sum"]


def probs(*shape):
    return 1 / (1 + np.exp(-arr(*shape)))


def labels(n, c, *rest, ignore=None):
    t = RNG.integers(0, c, (n,) + rest)
    if ignore is not None:
        t.flat[::3] = ignore
    return t


def soft_targets(*shape):
    e = np.exp(arr(*shape))
    return e / e.sum(1, keepdims=True)


W3 = np.array([0.2, 1.0, 2.5])
W4 = np.array([0.5, 1.0, 2.0, 0.1])
CASES = {
    "mse": (lambda nn, r: nn.MSELoss(reduction=r), lambda: [arr(4, 5), arr(4, 5)]),
    "l1": (lambda nn, r: nn.L1Loss(reduction=r), lambda: [arr(4, 5), arr(4, 5)]),
    "smooth_l1": (lambda nn, r: nn.SmoothL1Loss(reduction=r), lambda: [arr(4, 5), arr(4, 5)]),
    "smooth_l1_beta": (lambda nn, r: nn.SmoothL1Loss(reduction=r, beta=0.3), lambda: [arr(4, 5), arr(4, 5)]),
    "smooth_l1_beta0": (lambda nn, r: nn.SmoothL1Loss(reduction=r, beta=0.0), lambda: [arr(4, 5), arr(4, 5)]),
    "huber": (lambda nn, r: nn.HuberLoss(reduction=r, delta=0.5), lambda: [arr(4, 5), arr(4, 5)]),
    "ce": (lambda nn, r: nn.CrossEntropyLoss(reduction=r), lambda: [arr(6, 4), labels(6, 4)]),
    "ce_weight_ignore": (lambda nn, r: nn.CrossEntropyLoss(weight=_w(nn, W4), ignore_index=2, reduction=r),
                         lambda: [arr(6, 4), labels(6, 4, ignore=2)]),
    "ce_smoothing": (lambda nn, r: nn.CrossEntropyLoss(label_smoothing=0.2, reduction=r),
                     lambda: [arr(6, 4), labels(6, 4)]),
    "ce_smoothing_weight_ignore": (
        lambda nn, r: nn.CrossEntropyLoss(weight=_w(nn, W4), ignore_index=1, label_smoothing=0.1, reduction=r),
        lambda: [arr(7, 4), labels(7, 4, ignore=1)]),
    "ce_spatial": (lambda nn, r: nn.CrossEntropyLoss(weight=_w(nn, W3), reduction=r),
                   lambda: [arr(2, 3, 4, 5), labels(2, 3, 4, 5)]),
    "ce_unbatched": (lambda nn, r: nn.CrossEntropyLoss(reduction=r), lambda: [arr(5), np.array(3)]),
    "ce_probs": (lambda nn, r: nn.CrossEntropyLoss(reduction=r), lambda: [arr(6, 4), soft_targets(6, 4)]),
    "ce_probs_weight_smoothing": (
        lambda nn, r: nn.CrossEntropyLoss(weight=_w(nn, W3), label_smoothing=0.3, reduction=r),
        lambda: [arr(2, 3, 4), soft_targets(2, 3, 4)]),
    "nll": (lambda nn, r: nn.NLLLoss(reduction=r), lambda: [arr(6, 4), labels(6, 4)]),
    "nll_weight_ignore": (lambda nn, r: nn.NLLLoss(weight=_w(nn, W4), ignore_index=0, reduction=r),
                          lambda: [arr(6, 4), labels(6, 4, ignore=0)]),
    "nll_spatial": (lambda nn, r: nn.NLLLoss(reduction=r), lambda: [arr(2, 3, 5), labels(2, 3, 5)]),
    "bce": (lambda nn, r: nn.BCELoss(reduction=r), lambda: [probs(4, 5), probs(4, 5)]),
    "bce_weight": (lambda nn, r: nn.BCELoss(weight=_w(nn, np.linspace(0.1, 2, 5)), reduction=r),
                   lambda: [probs(4, 5), probs(4, 5)]),
    "bce_logits": (lambda nn, r: nn.BCEWithLogitsLoss(reduction=r), lambda: [arr(4, 5) * 10, probs(4, 5)]),
    "bce_logits_pos_weight": (
        lambda nn, r: nn.BCEWithLogitsLoss(weight=_w(nn, np.linspace(0.1, 2, 5)),
                                           pos_weight=_w(nn, np.linspace(3, 0.5, 5)), reduction=r),
        lambda: [arr(4, 5) * 3, probs(4, 5)]),
    "kl_div": (lambda nn, r: nn.KLDivLoss(reduction=r), lambda: [np.log(soft_targets(4, 5)), soft_targets(4, 5)]),
    "kl_div_log_target": (lambda nn, r: nn.KLDivLoss(reduction=r, log_target=True),
                          lambda: [np.log(soft_targets(4, 5)), np.log(soft_targets(4, 5))]),
}


def _w(nn, values):
    return (torch.tensor(values) if nn is torch.nn else tl.tensor(values))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_matches_torch(name, reduction):
    build, inputs = CASES[name]
    tm, lm = pair(lambda nn: build(nn, reduction))
    parity(tm, lm, *inputs())


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
def test_kl_div_batchmean(reduction):
    tm, lm = pair(lambda nn: nn.KLDivLoss(reduction=reduction))
    parity(tm, lm, np.log(soft_targets(4, 5)), soft_targets(4, 5))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_cosine_embedding(reduction, margin):
    tm, lm = pair(lambda nn: nn.CosineEmbeddingLoss(margin=margin, reduction=reduction))
    parity(tm, lm, arr(6, 5), arr(6, 5), np.array([1, -1, 1, -1, -1, 1]))


def test_bce_with_logits_is_finite_for_large_logits():
    x = tl.tensor([1000.0, -1000.0], requires_grad=True)
    loss = tl.nn.functional.binary_cross_entropy_with_logits(x, tl.tensor([0.0, 1.0]))
    loss.backward()
    close(loss, torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor([1000.0, -1000.0]),
                                                                     torch.tensor([0.0, 1.0])))
    assert np.isfinite(x.grad.numpy()).all()


def test_bce_clamps_log_at_minus_100():
    out = tl.nn.functional.binary_cross_entropy(tl.tensor([0.0, 1.0]), tl.tensor([1.0, 0.0]))
    assert out.item() == pytest.approx(100.0)


def test_cross_entropy_all_ignored_is_nan_like_torch():
    x, t = arr(3, 4), np.full(3, -100)
    lo = tl.nn.functional.cross_entropy(tl.tensor(x), tl.tensor(t))
    to = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t))
    assert np.isnan(lo.item()) and np.isnan(to.item())


def test_loss_state_dict_holds_weights_like_torch():
    for build in (lambda nn: nn.CrossEntropyLoss(weight=_w(nn, W3)),
                  lambda nn: nn.BCEWithLogitsLoss(pos_weight=_w(nn, W3)), lambda nn: nn.MSELoss()):
        assert list(build(tl.nn).state_dict()) == list(build(torch.nn).state_dict())


def test_loss_errors():
    F = tl.nn.functional
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        F.mse_loss(tl.randn(3), tl.randn(3), reduction="foo")
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(4\)"):
        F.cross_entropy(tl.randn(3, 5), tl.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(tl.randn(3), tl.rand(4))
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(tl.randn(3, 1), tl.randn(3))


def test_legacy_size_average_reduce():
    x, y = arr(4), arr(4)
    for sa, red in [(False, None), (None, False), (True, True)]:
        lo = tl.nn.MSELoss(size_average=sa, reduce=red)(tl.tensor(x), tl.tensor(y))
        to = torch.nn.MSELoss(size_average=sa, reduce=red)(torch.tensor(x), torch.tensor(y))
        close(lo, to)


@pytest.mark.parametrize("target,exc,match", [
    (lambda m: m.tensor([0, 3]), IndexError, "Target 3 is out of bounds"),
    (lambda m: m.tensor([0, -5]), IndexError, "Target -5 is out of bounds"),
    (lambda m: m.tensor([0, 1], dtype=m.int32), RuntimeError, "expected target dtype to be Long or Byte, but got Int"),
])
def test_bad_class_targets_raise_like_torch(target, exc, match):
    import torch
    import tapelab
    for m in (torch, tapelab):
        with pytest.raises(exc, match=match):
            m.nn.functional.cross_entropy(m.zeros(2, 3), target(m))
