"""The extra layers (channel/alpha dropout, adaptive max pooling, instance/RMS norm, PReLU and more
activations, padding, upsampling, pixel shuffling, distances, margin and likelihood losses) against
PyTorch with identical weights: outputs and gradients w.r.t. inputs and parameters, buffers,
reprs and errors; the random layers by their statistics and masks."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab as tl
from test_nn_attention import assert_parity, module_parity, pair, randn, same_error

RNG = np.random.default_rng(1)


def away_from(x: np.ndarray, points=(0.0,), gap=1e-3) -> np.ndarray:
    """Nudge values off the kinks so finite differences of both libraries agree."""
    for p in points:
        x = np.where(np.abs(x - p) < gap, p + 2 * gap, x)
    return x


def _lib(nn):
    return torch if nn is torch.nn else tl


LAYERS = {
    "adaptive_max1d": (lambda nn: nn.AdaptiveMaxPool1d(3), [(2, 3, 7)]),
    "adaptive_max1d_unbatched": (lambda nn: nn.AdaptiveMaxPool1d(4), [(3, 9)]),
    "adaptive_max2d": (lambda nn: nn.AdaptiveMaxPool2d((3, 4)), [(2, 3, 5, 7)]),
    "adaptive_max2d_none": (lambda nn: nn.AdaptiveMaxPool2d((None, 2)), [(2, 3, 5, 4)]),
    "adaptive_max2d_grow": (lambda nn: nn.AdaptiveMaxPool2d(6), [(1, 2, 4, 5)]),
    "instance1d": (lambda nn: nn.InstanceNorm1d(3), [(2, 3, 6)]),
    "instance1d_affine_unbatched": (lambda nn: nn.InstanceNorm1d(3, affine=True), [(3, 6)]),
    "instance2d_affine": (lambda nn: nn.InstanceNorm2d(3, affine=True), [(2, 3, 4, 5)]),
    "instance2d_track": (lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True), [(2, 3, 4, 5)]),
    "rmsnorm": (lambda nn: nn.RMSNorm(5), [(2, 3, 5)]),
    "rmsnorm_2d_eps": (lambda nn: nn.RMSNorm([3, 5], eps=1e-3), [(2, 3, 5)]),
    "rmsnorm_noaffine": (lambda nn: nn.RMSNorm(5, elementwise_affine=False), [(4, 5)]),
    "prelu": (lambda nn: nn.PReLU(), [(2, 3, 4)]),
    "prelu_channels": (lambda nn: nn.PReLU(3, 0.1), [(2, 3, 4, 2)]),
    "prelu_1d": (lambda nn: nn.PReLU(), [(4,)]),
    "selu": (lambda nn: nn.SELU(), [(3, 4)]),
    "celu": (lambda nn: nn.CELU(), [(3, 4)]),
    "celu_alpha": (lambda nn: nn.CELU(0.5), [(3, 4)]),
    "glu": (lambda nn: nn.GLU(), [(3, 4)]),
    "glu_dim1": (lambda nn: nn.GLU(1), [(2, 6, 3)]),
    "tanhshrink": (lambda nn: nn.Tanhshrink(), [(3, 4)]),
    "threshold": (lambda nn: nn.Threshold(0.1, 20.0), [(3, 4)]),
    "softshrink": (lambda nn: nn.Softshrink(0.3), [(3, 4)]),
    "hardshrink": (lambda nn: nn.Hardshrink(0.3), [(3, 4)]),
    "logsigmoid": (lambda nn: nn.LogSigmoid(), [(3, 4)]),
    "softsign": (lambda nn: nn.Softsign(), [(3, 4)]),
    "softmin": (lambda nn: nn.Softmin(1), [(3, 4)]),
    "relu6": (lambda nn: nn.ReLU6(), [(3, 4)]),
    "zeropad2d": (lambda nn: nn.ZeroPad2d((1, 2, 0, 3)), [(2, 3, 4, 5)]),
    "zeropad1d": (lambda nn: nn.ZeroPad1d(2), [(2, 3, 4)]),
    "constpad1d": (lambda nn: nn.ConstantPad1d((2, 1), 3.5), [(2, 3, 4)]),
    "constpad2d": (lambda nn: nn.ConstantPad2d(1, -1.0), [(3, 4, 5)]),
    "reflect1d": (lambda nn: nn.ReflectionPad1d((2, 3)), [(2, 3, 5)]),
    "reflect2d": (lambda nn: nn.ReflectionPad2d((1, 2, 2, 0)), [(2, 3, 4, 5)]),
    "replicate1d": (lambda nn: nn.ReplicationPad1d(3), [(2, 3, 4)]),
    "replicate2d": (lambda nn: nn.ReplicationPad2d((1, 0, 2, 3)), [(2, 3, 4, 5)]),
    "upsample_nearest": (lambda nn: nn.Upsample(scale_factor=2), [(2, 3, 4, 5)]),
    "upsample_nearest_size": (lambda nn: nn.Upsample(size=(7, 3)), [(2, 3, 4, 5)]),
    "upsample_bilinear": (lambda nn: nn.Upsample(scale_factor=2, mode="bilinear"), [(2, 3, 4, 5)]),
    "upsample_bilinear_ac": (lambda nn: nn.Upsample(size=(6, 7), mode="bilinear", align_corners=True),
                             [(2, 3, 4, 5)]),
    "upsampling_nearest2d": (lambda nn: nn.UpsamplingNearest2d(scale_factor=3), [(1, 2, 3, 4)]),
    "upsampling_bilinear2d": (lambda nn: nn.UpsamplingBilinear2d(size=5), [(1, 2, 3, 4)]),
    "pixel_shuffle": (lambda nn: nn.PixelShuffle(2), [(2, 8, 3, 4)]),
    "pixel_shuffle_5d": (lambda nn: nn.PixelShuffle(3), [(2, 2, 9, 2, 3)]),
    "pixel_unshuffle": (lambda nn: nn.PixelUnshuffle(2), [(2, 3, 4, 6)]),
    "pixel_unshuffle_3d": (lambda nn: nn.PixelUnshuffle(3), [(2, 6, 9)]),
    "cosine_similarity": (lambda nn: nn.CosineSimilarity(), [(4, 5), (4, 5)]),
    "cosine_similarity_dim": (lambda nn: nn.CosineSimilarity(dim=-1, eps=1e-6), [(2, 3, 5), (3, 5)]),
    "pairwise": (lambda nn: nn.PairwiseDistance(), [(4, 5), (4, 5)]),
    "pairwise_p1_keepdim": (lambda nn: nn.PairwiseDistance(p=1.0, keepdim=True), [(4, 5), (4, 5)]),
    "pairwise_p3_1d": (lambda nn: nn.PairwiseDistance(p=3.0), [(5,), (5,)]),
    "triplet": (lambda nn: nn.TripletMarginLoss(margin=2.0), [(6, 4), (6, 4), (6, 4)]),
    "triplet_swap_p1": (lambda nn: nn.TripletMarginLoss(margin=3.0, p=1.0, swap=True, reduction="sum"),
                        [(6, 4), (6, 4), (6, 4)]),
    "triplet_none": (lambda nn: nn.TripletMarginLoss(margin=2.0, reduction="none"), [(6, 4), (6, 4), (6, 4)]),
    "soft_margin": (lambda nn: nn.SoftMarginLoss(), [(4, 5), "sign:4,5"]),
    "soft_margin_none": (lambda nn: nn.SoftMarginLoss(reduction="none"), [(4, 5), "sign:4,5"]),
    "multilabel_soft_margin": (lambda nn: nn.MultiLabelSoftMarginLoss(), [(4, 5), "bits:4,5"]),
    "multilabel_soft_margin_w": (lambda nn: nn.MultiLabelSoftMarginLoss(weight=_lib(nn).linspace(
        0.5, 2.0, 5, dtype=_lib(nn).float64), reduction="sum"), [(4, 5), "bits:4,5"]),
    "margin_ranking": (lambda nn: nn.MarginRankingLoss(0.3), [(6,), (6,), "sign:6"]),
    "margin_ranking_none": (lambda nn: nn.MarginRankingLoss(reduction="none"), [(6,), (6,), "sign:6"]),
    "hinge_embedding": (lambda nn: nn.HingeEmbeddingLoss(), [(4, 5), "sign:4,5"]),
    "hinge_embedding_m": (lambda nn: nn.HingeEmbeddingLoss(margin=0.5, reduction="sum"), [(4, 5), "sign:4,5"]),
    "gaussian_nll": (lambda nn: nn.GaussianNLLLoss(), [(4, 3), (4, 3), "pos:4,3"]),
    "gaussian_nll_full_homo": (lambda nn: nn.GaussianNLLLoss(full=True, reduction="sum"), [(4, 3), (4, 3),
                                                                                          "pos:4"]),
    "gaussian_nll_broadcast": (lambda nn: nn.GaussianNLLLoss(reduction="none"), [(4, 3), (4, 3), "pos:4,1"]),
    "poisson_nll": (lambda nn: nn.PoissonNLLLoss(), [(4, 3), "pos:4,3"]),
    "poisson_nll_rates": (lambda nn: nn.PoissonNLLLoss(log_input=False, reduction="sum"), ["pos:4,3", "pos:4,3"]),
    "poisson_nll_full": (lambda nn: nn.PoissonNLLLoss(full=True, reduction="none"), [(4, 3), "count:4,3"]),
}


def make_input(spec, dtype="float64"):
    if isinstance(spec, tuple):
        return away_from(randn(*spec, dtype=dtype), (0.0, 0.1, 0.3, -0.3, 6.0)).astype(dtype)
    kind, shape = spec.split(":")
    shape = tuple(int(s) for s in shape.split(","))
    if kind == "sign":
        return np.where(RNG.random(shape) > 0.5, 1.0, -1.0).astype(dtype)
    if kind == "bits":
        return (RNG.random(shape) > 0.5).astype(dtype)
    if kind == "pos":
        return (RNG.random(shape) + 0.2).astype(dtype)
    if kind == "count":
        return RNG.integers(0, 5, shape).astype(dtype)
    raise ValueError(spec)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_torch(name):
    build, specs = LAYERS[name]
    tm, lm = build(torch.nn), build(tl.nn)
    tm, lm = tm.double(), lm.double()
    assert list(lm.state_dict()) == list(tm.state_dict())
    lm.load_state_dict({k: tl.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    assert repr(lm) == repr(tm)
    call = (lambda m, x, t: m(x, t.detach())) if name.startswith("soft_margin") else None  # torch: target
    module_parity(tm, lm, *[make_input(s) for s in specs], call=call)                   # takes no grad there
    for lb, tb in zip(lm.buffers(), tm.buffers()):
        np.testing.assert_allclose(lb.detach().numpy(), tb.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["adaptive_max2d", "instance2d_affine", "rmsnorm", "prelu_channels", "glu",
                                  "upsample_bilinear", "triplet", "gaussian_nll", "poisson_nll"])
def test_layer_float32(name):
    build, specs = LAYERS[name]
    tm, lm = build(torch.nn).float(), build(tl.nn).float()
    lm.load_state_dict({k: tl.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    module_parity(tm, lm, *[make_input(s, "float32") for s in specs], dtype="float32")


def test_instance_norm_running_stats_and_eval():
    tm, lm = pair(torch.nn.InstanceNorm1d, tl.nn.InstanceNorm1d, 3, track_running_stats=True, momentum=0.3)
    for _ in range(3):
        module_parity(tm, lm, randn(2, 3, 5))
    tm.eval(), lm.eval()
    module_parity(tm, lm, randn(2, 3, 5))
    np.testing.assert_allclose(lm.running_var.numpy(), tm.running_var.numpy(), rtol=1e-12)
    assert int(lm.num_batches_tracked) == int(tm.num_batches_tracked)


def test_adaptive_max_pool_indices():
    x = randn(2, 3, 7, 6)
    for size in [(3, 4), (7, 6), (2, 5), 1]:
        tv, ti = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x), size, return_indices=True)
        lv, li = tl.nn.functional.adaptive_max_pool2d(tl.tensor(x), size, return_indices=True)
        assert li.tolist() == ti.tolist() and str(li.dtype) == "tapelab.int64"
        np.testing.assert_array_equal(lv.numpy(), tv.numpy())
    tv, ti = torch.nn.AdaptiveMaxPool1d(3, return_indices=True)(torch.tensor(x[0]))
    lv, li = tl.nn.AdaptiveMaxPool1d(3, return_indices=True)(tl.tensor(x[0]))
    assert li.tolist() == ti.tolist()


@pytest.mark.parametrize("fn", ["relu6", "hardtanh"])
def test_clamping_activations_have_zero_gradient_at_the_bounds(fn):
    x = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 6.0, 7.0])
    assert_parity(getattr(torch.nn.functional, fn), getattr(tl.nn.functional, fn), x)


def test_functional_names_match_torch():
    x, y = randn(3, 4), randn(3, 4)
    assert_parity(torch.nn.functional.pairwise_distance, tl.nn.functional.pairwise_distance, x, y)
    assert_parity(lambda a: torch.nn.functional.threshold(a, 0.2, -3.0),
                  lambda a: tl.nn.functional.threshold(a, 0.2, -3.0), away_from(x, (0.2,)))
    assert_parity(lambda a: torch.nn.functional.glu(a, 1), lambda a: tl.nn.functional.glu(a, 1), x)
    assert_parity(torch.nn.functional.selu, tl.nn.functional.selu, x)
    assert_parity(lambda a, w: torch.nn.functional.rms_norm(a, (4,), w),
                  lambda a, w: tl.nn.functional.rms_norm(a, (4,), w), x, randn(4))
    assert_parity(lambda a: torch.nn.functional.instance_norm(a), lambda a: tl.nn.functional.instance_norm(a),
                  randn(2, 3, 4))
    assert_parity(torch.nn.functional.prelu, tl.nn.functional.prelu, away_from(x), np.array([0.2]))
    assert_parity(lambda a, t, v: torch.nn.functional.gaussian_nll_loss(a, t, v, eps=0.5),
                  lambda a, t, v: tl.nn.functional.gaussian_nll_loss(a, t, v, eps=0.5), x, y,
                  RNG.random((3, 4)))   # some variances below eps: clamped, gradient passes through
    assert_parity(lambda a: torch.nn.functional.gaussian_nll_loss(a, torch.tensor(y), 0.7),
                  lambda a: tl.nn.functional.gaussian_nll_loss(a, tl.tensor(y), 0.7), x)
    for fn in ("celu", "selu"):
        t, l = torch.tensor(x), tl.tensor(x)
        getattr(torch.nn.functional, fn)(t, inplace=True)
        getattr(tl.nn.functional, fn)(l, inplace=True)
        np.testing.assert_allclose(l.numpy(), t.numpy(), rtol=1e-12)
    assert "upsample" in tl.nn.functional.__all__ and "dropout2d" in tl.nn.functional.__all__


def test_errors_match_torch():
    F, G = torch.nn.functional, tl.nn.functional
    cases = [
        (lambda m: m.nn.functional.glu(m.tensor(randn(2, 3)), 1), None),
        (lambda m: m.nn.functional.glu(m.tensor(1.0)), None),
        (lambda m: m.nn.functional.pixel_shuffle(m.tensor(randn(1, 5, 2, 2)), 2), None),
        (lambda m: m.nn.functional.pixel_shuffle(m.tensor(randn(5, 2)), 2), None),
        (lambda m: m.nn.functional.pixel_unshuffle(m.tensor(randn(1, 1, 5, 4)), 2), None),
        (lambda m: m.nn.functional.pixel_unshuffle(m.tensor(randn(1, 1, 4, 5)), 2), None),
        (lambda m: m.nn.functional.prelu(m.tensor(randn(2, 4)), m.tensor(randn(3))), None),
        (lambda m: m.nn.InstanceNorm1d(3)(m.tensor(randn(2, 3, 1))), None),
        (lambda m: m.nn.InstanceNorm1d(3)(m.tensor(randn(2, 3, 4, 5))), None),
        (lambda m: m.nn.InstanceNorm2d(3, affine=True)(m.tensor(randn(2, 4, 4, 4))), None),
        (lambda m: m.nn.functional.dropout1d(m.tensor(randn(2, 3, 4, 5))), None),
        (lambda m: m.nn.Dropout2d(1.5), None),
        (lambda m: m.nn.functional.rms_norm(m.tensor(randn(2, 3)), (4,)), None),
        (lambda m: m.nn.functional.gaussian_nll_loss(m.tensor(randn(2, 3)), m.tensor(randn(2, 3)),
                                                     -m.ones(2, 3)), None),
        (lambda m: m.nn.functional.gaussian_nll_loss(m.tensor(randn(2, 3)), m.tensor(randn(2, 3)),
                                                     m.ones(3, 3)), None),
        (lambda m: m.nn.TripletMarginLoss(margin=0.0), None),
        (lambda m: m.nn.functional.triplet_margin_loss(m.tensor(randn(2, 3)), m.tensor(randn(2, 3)),
                                                       m.tensor(randn(3))), None),
    ]
    for case, prefix in cases:
        same_error(lambda: case(torch), lambda: case(tl), prefix)
    assert F and G


@pytest.mark.parametrize("cls,shape", [("Dropout1d", (40, 30, 5)), ("Dropout1d", (300, 6)),
                                       ("Dropout2d", (30, 40, 3, 2)), ("Dropout3d", (30, 40, 2, 2, 2)),
                                       ("Dropout3d", (300, 2, 2, 3))])
def test_channel_dropout_zeroes_whole_channels(cls, shape):
    tl.manual_seed(0)
    layer = getattr(tl.nn, cls)(p=0.3)
    x = tl.tensor(RNG.random(shape) + 1.0, requires_grad=True)
    out = layer(x)
    batched = len(shape) == {"Dropout1d": 3, "Dropout2d": 4, "Dropout3d": 5}[cls]
    ratio = out.detach().numpy() / x.detach().numpy()
    channels = shape[0] * shape[1] if batched else shape[0]
    per_channel = ratio.reshape(channels, -1)
    assert np.allclose(per_channel, per_channel[:, :1])               # one decision per channel
    kept = per_channel[:, 0]
    assert set(np.round(np.unique(kept), 9)) <= {0.0, round(1 / 0.7, 9)}
    assert abs((kept == 0).mean() - 0.3) < 5 * np.sqrt(0.21 / channels)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ratio, rtol=1e-12)    # the same mask backward
    layer.eval()
    assert layer(x) is x


def test_dropout2d_warns_on_3d_input_like_torch():
    for m in (torch, tl):
        with pytest.warns(UserWarning, match="dropout2d: Received a 3D input"):
            m.nn.functional.dropout2d(m.ones(2, 3, 4))


def test_alpha_dropout_keeps_selu_statistics():
    tl.manual_seed(0)
    x = tl.tensor(RNG.standard_normal((200000,)))
    out = tl.nn.AlphaDropout(0.2)(x).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1.0) < 0.02
    layer = tl.nn.AlphaDropout(0.2)
    layer.eval()
    assert layer(x) is x
    assert tl.nn.functional.alpha_dropout(x, 0.5) is x             # training=False by default, as torch
    values = tl.nn.functional.alpha_dropout(tl.zeros(1000, dtype=tl.float64), 0.2, True).numpy()
    a = 1.0 / np.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8)
    kept, dropped = 1.7580993408473766 * a * 0.2, 1.7580993408473766 * a * (0.2 - 1)
    assert np.all(np.isclose(values, kept) | np.isclose(values, dropped))
    assert np.isclose(values, dropped).any() and np.isclose(values, kept).any()
    fa = tl.nn.FeatureAlphaDropout(0.5)(tl.ones(4, 50, 3)).numpy()
    assert np.allclose(fa, fa[..., :1])


def test_default_init_and_names():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tl.nn.PReLU(3).weight.tolist() == [0.25] * 3
        assert tl.nn.RMSNorm((2, 3)).weight.shape == (2, 3)
        norm = tl.nn.InstanceNorm2d(4, affine=True, track_running_stats=True)
        assert [n for n, _ in norm.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
        assert norm.weight.tolist() == [1.0] * 4 and norm.bias.tolist() == [0.0] * 4
        assert list(tl.nn.InstanceNorm1d(3).state_dict()) == []
