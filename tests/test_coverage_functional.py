"""The nn.functional names of the coverage push (engine/nn/functional_more.py, engine/nn/grad.py),
each against torch: values and gradients in float64, and finite differences for the smooth ones."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab
from _against_torch import compare

R = np.random.default_rng(0)


def a(*shape):
    return R.standard_normal(shape)


def F(m):
    return m.nn.functional


POOL = a(2, 3, 5, 6, 7)
IMG = a(2, 3, 7, 8)
SEQ = a(2, 3, 9)
# fixed fractional-pooling samples (drawn once, so both libraries pool the same windows)
U2, U3 = R.uniform(size=(2, 3, 2)), R.uniform(size=(2, 3, 3))
W5 = R.uniform(0.5, 2, size=5)

CASES = {
    "max_pool3d": (lambda m, x: F(m).max_pool3d(x, 2, 1, 1), (POOL,)),
    "max_pool3d_indices": (lambda m, x: F(m).max_pool3d(x, (2, 3, 2), 2, ceil_mode=True, return_indices=True), (POOL,)),
    "max_pool1d_with_indices": (lambda m, x: F(m).max_pool1d_with_indices(x, 3, 2), (SEQ,)),
    "max_pool2d_with_indices": (lambda m, x: F(m).max_pool2d_with_indices(x, 3, 2, 1), (IMG,)),
    "max_pool3d_with_indices": (lambda m, x: F(m).max_pool3d_with_indices(x, 2), (POOL,)),
    "avg_pool3d": (lambda m, x: F(m).avg_pool3d(x, 3, 2, 1, count_include_pad=False), (POOL,)),
    "adaptive_avg_pool3d": (lambda m, x: F(m).adaptive_avg_pool3d(x, (2, 4, 3)), (POOL,)),
    "adaptive_max_pool3d": (lambda m, x: F(m).adaptive_max_pool3d(x, (2, 4, 3), True), (POOL,)),
    "adaptive_max_pool3d_unbatched": (lambda m, x: F(m).adaptive_max_pool3d(x[0], 3), (POOL,)),
    "adaptive_max_pool3d_with_indices": (lambda m, x: F(m).adaptive_max_pool3d_with_indices(x, (3, 2, 5)), (POOL,)),
    "adaptive_max_pool1d_with_indices": (lambda m, x: F(m).adaptive_max_pool1d_with_indices(x, 4), (SEQ,)),
    "adaptive_max_pool2d_with_indices": (lambda m, x: F(m).adaptive_max_pool2d_with_indices(x, (3, 5)), (IMG,)),
    "lp_pool1d": (lambda m, x: F(m).lp_pool1d(x.abs() + 0.1, 2, 3, 2), (SEQ,)),
    "lp_pool2d": (lambda m, x: F(m).lp_pool2d(x.abs() + 0.1, 3, (2, 3)), (IMG,)),
    "lp_pool3d": (lambda m, x: F(m).lp_pool3d(x.abs() + 0.1, 2.5, 2, ceil_mode=True), (POOL,)),
    "max_unpool1d": (lambda m, x: F(m).max_unpool1d(*F(m).max_pool1d(x, 2, return_indices=True), 2), (SEQ,)),
    "max_unpool2d": (lambda m, x: F(m).max_unpool2d(*F(m).max_pool2d(x, 2, return_indices=True), 2,
                                                     output_size=(7, 8)), (IMG,)),
    "max_unpool3d": (lambda m, x: F(m).max_unpool3d(*F(m).max_pool3d(x, 2, return_indices=True), 2,
                                                     output_size=(5, 6, 7)), (POOL,)),
    "fractional_max_pool2d": (lambda m, x: F(m).fractional_max_pool2d(x, 2, (4, 5), return_indices=True,
                                                                       _random_samples=m.tensor(U2)), (IMG,)),
    "fractional_max_pool2d_ratio": (lambda m, x: F(m).fractional_max_pool2d(x, (3, 2), output_ratio=(0.5, 0.5),
                                                                             _random_samples=m.tensor(U2)), (IMG,)),
    "fractional_max_pool3d": (lambda m, x: F(m).fractional_max_pool3d_with_indices(x, 2, (3, 4, 4),
                                                                                    _random_samples=m.tensor(U3)),
                              (POOL,)),
    "conv_transpose3d": (lambda m, x, w, b: F(m).conv_transpose3d(x, w, b, 2, 1, 1), (a(2, 3, 3, 4, 2), a(3, 2, 2, 3, 2), a(2))),
    "conv_tbc": (lambda m, x, w, b: F(m).conv_tbc(x, w, b, 1), (a(7, 2, 3), a(3, 3, 4), a(4))),
    "channel_shuffle": (lambda m, x: F(m).channel_shuffle(x, 3), (a(2, 6, 3, 2),)),
    "native_channel_shuffle": (lambda m, x: F(m).native_channel_shuffle(x, 2), (a(2, 6, 4),), False),
    "local_response_norm": (lambda m, x: F(m).local_response_norm(x, 3, 0.1, 0.7, 2.0), (IMG,)),
    "local_response_norm_3d": (lambda m, x: F(m).local_response_norm(x, 4), (SEQ,)),
    "local_response_norm_5d": (lambda m, x: F(m).local_response_norm(x, 2), (POOL,)),
    "rrelu_eval": (lambda m, x: F(m).rrelu(x, 0.1, 0.3), (IMG,)),
    "embedding_bag_mean": (lambda m, w: F(m).embedding_bag(m.tensor([1, 2, 4, 5, 4, 3, 2, 9]), w,
                                                           m.tensor([0, 4, 4])), (a(10, 3),)),
    "embedding_bag_sum_weights": (lambda m, w, p: F(m).embedding_bag(m.tensor([[1, 2, 4], [4, 3, 2]]), w, mode="sum",
                                                                     per_sample_weights=p), (a(10, 3), a(2, 3))),
    "embedding_bag_max_padding": (lambda m, w: F(m).embedding_bag(m.tensor([1, 0, 4, 0, 0]), w, m.tensor([0, 2, 3, 5]),
                                                                  mode="max", padding_idx=0,
                                                                  include_last_offset=True), (a(10, 3),)),
    "pdist": (lambda m, x: F(m).pdist(x), (a(5, 3),)),
    "pdist_p1": (lambda m, x: F(m).pdist(x, 1.5), (a(4, 3),)),
    "affine_grid": (lambda m, t: F(m).affine_grid(t, [2, 3, 4, 5], align_corners=False), (a(2, 2, 3),)),
    "affine_grid_3d": (lambda m, t: F(m).affine_grid(t, [2, 1, 3, 4, 2], align_corners=True), (a(2, 3, 4),)),
    "multi_margin_loss": (lambda m, x: F(m).multi_margin_loss(x, m.tensor([1, 0, 3, 2])), (a(4, 5),)),
    "multi_margin_loss_p2_weight": (lambda m, x: F(m).multi_margin_loss(x, m.tensor([1, 0, 3, 2]), p=2, margin=0.5,
                                                                        weight=m.tensor(W5), reduction="none"),
                                    (a(4, 5),)),
    "multilabel_margin_loss": (lambda m, x: F(m).multilabel_margin_loss(
        x, m.tensor([[3, 0, -1, 1, 2], [1, 2, 4, -1, 0], [0, 1, 2, 3, 4]]), reduction="none"), (a(3, 5),)),
    "multilabel_margin_loss_1d": (lambda m, x: F(m).multilabel_margin_loss(x, m.tensor([2, 1, -1, 0])), (a(4),)),
    "triplet_margin_with_distance_loss": (lambda m, x, y, z: F(m).triplet_margin_with_distance_loss(
        x, y, z, swap=True), (a(4, 3), a(4, 3), a(4, 3))),
    "triplet_margin_with_distance_loss_fn": (lambda m, x, y, z: F(m).triplet_margin_with_distance_loss(
        x, y, z, distance_function=lambda u, v: 1 - F(m).cosine_similarity(u, v), margin=0.3, reduction="sum"),
        (a(4, 3), a(4, 3), a(4, 3))),
    "linear_cross_entropy": (lambda m, x, w, b: F(m).linear_cross_entropy(x, w, m.tensor([1, 0, 3]), linear_bias=b,
                                                                          label_smoothing=0.1), (a(3, 4), a(5, 4), a(5))),
    "ctc_loss": (lambda m, lp: F(m).ctc_loss(lp.log_softmax(2), m.tensor([[1, 2, 2], [3, 1, 0]]), [6, 5], [3, 2]),
                 (a(6, 2, 4),)),
    "ctc_loss_concat_none": (lambda m, lp: F(m).ctc_loss(lp.log_softmax(2), m.tensor([1, 1, 3, 2]), m.tensor([6, 6]),
                                                         m.tensor([2, 2]), blank=0, reduction="none"), (a(6, 2, 4),)),
    "ctc_loss_impossible": (lambda m, lp: F(m).ctc_loss(lp.log_softmax(2), m.tensor([[1, 1, 1], [2, 3, 0]]), [3, 4],
                                                        [3, 2], reduction="sum", zero_infinity=True), (a(4, 2, 4),)),
    "conv2d_input": (lambda m, w, g: m.nn.grad.conv2d_input((2, 3, 7, 8), w, g, 2, 1), (a(4, 3, 3, 3), a(2, 4, 4, 4))),
    "conv1d_weight": (lambda m, x, g: m.nn.grad.conv1d_weight(x, (4, 3, 3), g, padding=1), (SEQ, a(2, 4, 9))),
    "conv3d_weight": (lambda m, x, g: F(m).grad.conv3d_weight(x, (2, 3, 2, 2, 2), g), (POOL, a(2, 2, 4, 5, 6))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    fn, inputs, *grad = CASES[name]
    compare(fn, *inputs, grad=grad[0] if grad else True)   # torch has no derivative for some


GRID_IN = a(2, 3, 4, 5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample(mode, padding_mode, align):
    grid = R.uniform(-1.3, 1.3, size=(2, 3, 6, 2))
    compare(lambda m, x, g: F(m).grid_sample(x, g, mode, padding_mode, align), GRID_IN, grid,
            grad=mode != "nearest")


def test_grid_sample_3d_and_affine_round_trip():
    vol = a(1, 2, 3, 4, 5)
    grid = R.uniform(-1.1, 1.1, size=(1, 2, 3, 2, 3))
    compare(lambda m, x, g: F(m).grid_sample(x, g, align_corners=False), vol, grid)
    theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    compare(lambda m, x, t: F(m).grid_sample(x, F(m).affine_grid(t, [2, 3, 4, 5], True), align_corners=True),
            GRID_IN, np.repeat(theta, 2, 0))


def test_gradcheck_smooth_composites():
    x = tapelab.tensor(a(1, 2, 4, 5), requires_grad=True)
    g = tapelab.tensor(R.uniform(-0.9, 0.9, size=(1, 2, 3, 2)), requires_grad=True)
    assert tapelab.autograd.gradcheck(lambda x, g: F(tapelab).grid_sample(x, g, align_corners=True), (x, g))
    lp = tapelab.tensor(a(5, 1, 3), requires_grad=True)
    assert tapelab.autograd.gradcheck(
        lambda lp: F(tapelab).ctc_loss(lp.log_softmax(2), tapelab.tensor([[1, 2]]), [5], [2]), (lp,))
    y = tapelab.tensor(a(1, 4, 3, 3), requires_grad=True)
    assert tapelab.autograd.gradgradcheck(lambda y: F(tapelab).local_response_norm(y, 3), (y,))


def test_random_functions_follow_their_distribution():
    x = tapelab.randn(4000)
    y = F(tapelab).rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x)[x < 0]
    assert 0.1 <= slope.min().item() and slope.max().item() <= 0.3 and abs(slope.mean().item() - 0.2) < 0.01
    assert tapelab.equal(y[x >= 0], x[x >= 0])
    logits = tapelab.randn(8, 5, requires_grad=True)
    soft = F(tapelab).gumbel_softmax(logits, tau=0.5)
    assert np.allclose(soft.sum(-1).detach().numpy(), 1)
    hard = F(tapelab).gumbel_softmax(logits, hard=True)
    assert sorted(set(hard.detach().numpy().ravel().round(6))) == [0.0, 1.0] and hard.sum().item() == 8
    hard.sum().backward()
    assert logits.grad is not None
    u = F(tapelab).fractional_max_pool2d(tapelab.randn(1, 2, 9, 9), 2, output_ratio=0.5)
    assert tuple(u.shape) == (1, 2, 4, 4)
    z = tapelab.randn(3, 4)
    F(tapelab).rrelu_(z)
    assert z.min().item() >= -1.0


def test_errors_match_torch():
    for m in (torch, tapelab):
        with pytest.raises(RuntimeError, match="divisible by groups"):
            F(m).channel_shuffle(m.zeros(1, 5, 2), 2)
        with pytest.raises(RuntimeError, match="pdist only supports 2D tensors, got: 3D"):
            F(m).pdist(m.zeros(1, 2, 3))
        with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
            F(m).embedding_bag(m.tensor([[1]]), m.zeros(3, 2), mode="median")
        with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
            F(m).multi_margin_loss(m.zeros(2, 3), m.tensor([0, 1]), p=3)
        with pytest.raises(ValueError, match="padding_mode"):
            F(m).grid_sample(m.zeros(1, 1, 2, 2), m.zeros(1, 1, 1, 2), padding_mode="wrap", align_corners=False)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            F(m).affine_grid(m.zeros(1, 2, 3), [1, 1, 2, 2])
        assert any("align_corners=False" in str(x.message) for x in w)
    assert F(tapelab).GRID_SAMPLE_INTERPOLATION_MODES == F(torch).GRID_SAMPLE_INTERPOLATION_MODES
    assert F(tapelab).GRID_SAMPLE_PADDING_MODES == F(torch).GRID_SAMPLE_PADDING_MODES
    F(tapelab).assert_int_or_pair((1, 2), "k", "{} must be int or pair")
    with pytest.raises(AssertionError, match="k must be"):
        F(tapelab).assert_int_or_pair((1, 2, 3), "k", "{} must be int or pair")


def test_upsample_aliases_warn_and_match():
    for name in ("upsample_nearest", "upsample_bilinear"):
        with pytest.warns(UserWarning, match="deprecated"):
            compare(lambda m, x: getattr(F(m), name)(x, scale_factor=2), IMG, grad=False)
