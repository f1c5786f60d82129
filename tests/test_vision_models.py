"""tapelab.vision.models against torchvision: the same state_dict keys and shapes, parameter counts,
and, with the same seeded weights, the same logits and gradients.

References come from torchvision 0.29.1 (tests/fixtures/vision/models.npz, written by
scripts/vision_references.py in the oracle venv). Weights are not copied: both sides draw them
from tests/vision_weights.py. The numeric check of VGG, AlexNet and ResNet-34/50 runs with ``--long``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tapelab
from tapelab.kernels import blas
from tapelab.nn import _winograd
from tapelab.vision import models
from vision_cases import (EXTRA_AUX, EXTRA_AUX_LONG, EXTRA_CLASS_NUMERIC, EXTRA_GRAD_SAMPLE, EXTRA_INPUT_STRIDE,
                          EXTRA_NUMERIC, EXTRA_PARAM_GRADS, EXTRA_SIZES, aux_outputs, model_outputs, param_grads)
from vision_weights import CONSTRUCTED, seeded_input, seeded_state

FIXTURES = Path(__file__).parent / "fixtures" / "vision"
REF = np.load(FIXTURES / "models.npz")

# torchvision's published parameter counts (1000 classes, 224x224 for ViT)
PUBLISHED = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032, "vgg11": 132_863_336,
             "vgg11_bn": 132_868_840, "vgg16": 138_357_544, "vgg16_bn": 138_365_992, "mobilenet_v2": 3_504_872,
             "alexnet": 61_100_840, "squeezenet1_1": 1_235_496, "densenet121": 7_978_856,
             "vit_b_16": 86_567_656}
SHORT = {"resnet18", "mobilenet_v2", "squeezenet1_1", "densenet121", "vit_b_16"}
KWARGS = {"vit_b_16": {"image_size": 32}}
SHAPES = {"vit_b_16": (1, 3, 32, 32)}


def _long(request, name: str) -> None:
    if name not in SHORT and not request.config.getoption("--long"):
        pytest.skip(f"{name}'s numeric check runs with --long (its keys, shapes and size are checked always)")


def _seeded(name: str, **kwargs):
    return _load_seeded(lambda: getattr(models, name)(num_classes=10, **KWARGS.get(name, {}), **kwargs))


def _load_seeded(build):
    """The model with the seeded weights; built on meta (its own initialisation would be overwritten)
    unless it has CONSTRUCTED buffers, which keep the values its construction gives them."""
    with tapelab.device("meta"):
        model = build()
    if any(k.rsplit(".", 1)[-1] in CONSTRUCTED for k in model.state_dict()):
        model = build()
    else:
        model = model.to_empty(device="cpu")
    shapes = {k: (tuple(v.shape), not v.is_floating_point()) for k, v in model.state_dict().items()}
    result = model.load_state_dict({k: tapelab.from_numpy(v) for k, v in seeded_state(shapes).items()}, strict=False)
    assert all(k.rsplit(".", 1)[-1] in CONSTRUCTED for k in result.missing_keys) and not result.unexpected_keys
    return model


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_state_dict_matches_torchvision(name):
    with tapelab.device("meta"):
        model = getattr(models, name)()
    state = model.state_dict()
    assert list(state) == list(REF[f"{name}/keys"])
    assert [",".join(map(str, v.shape)) for v in state.values()] == list(REF[f"{name}/shapes"])
    count = sum(p.numel() for p in model.parameters())
    assert count == int(REF[f"{name}/num_params"]) == PUBLISHED[name]


def _compare(got: dict, prefix: str, grad_atol: float = 1e-5) -> None:
    assert list(got["grad_names"]) == list(REF[f"{prefix}/grad_names"])
    scale = np.abs(REF[f"{prefix}/logits"]).max()
    np.testing.assert_allclose(got["logits"], REF[f"{prefix}/logits"], rtol=1e-4, atol=1e-5 * scale)
    for key in ("input_grad", "param_grad0", "param_grad1", "param_grad2"):
        want = REF[f"{prefix}/{key}"]
        np.testing.assert_allclose(got[key], want, rtol=1e-4, atol=grad_atol * np.abs(want).max(), err_msg=key)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_logits_and_gradients_match_torchvision(request, name):
    _long(request, name)
    model = _seeded(name)
    _compare(model_outputs(tapelab, model, seeded_input(SHAPES.get(name, (1, 3, 64, 64)))), name)


def test_resnet18_train_mode_batch_statistics():
    model = _seeded("resnet18")
    # batch statistics sum over the batch in another order: one conv1 gradient in 4096 is off by 1e-4 of the max
    _compare(model_outputs(tapelab, model, seeded_input((2, 3, 64, 64), seed=99), train=True), "resnet18_train",
             grad_atol=3e-5)


def test_loads_a_checkpoint_torchvision_saved():
    """A float16 squeezenet1_1 state_dict written by torch.save loads and gives torchvision's logits."""
    model = models.squeezenet1_1(num_classes=10)
    state = tapelab.load(FIXTURES / "squeezenet1_1_fp16.pt")
    assert state["features.0.weight"].dtype == tapelab.float16
    model.load_state_dict(state)
    model.eval()
    with tapelab.no_grad():
        logits = model(tapelab.from_numpy(seeded_input((1, 3, 64, 64))))
    want = np.load(FIXTURES / "checkpoint.npz")["logits"]
    np.testing.assert_allclose(logits.numpy(), want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_vit_checks_the_image_size():
    model = models.VisionTransformer(32, 16, num_layers=1, num_heads=2, hidden_dim=8, mlp_dim=16, num_classes=3)
    assert model(tapelab.zeros(2, 3, 32, 32)).shape == (2, 3)
    # torchvision's torch._assert: AssertionError, height checked before width
    with pytest.raises(AssertionError, match="Wrong image height! Expected 32 but got 64!"):
        model(tapelab.zeros(1, 3, 64, 64))
    with pytest.raises(AssertionError, match="Wrong image width! Expected 32 but got 16!"):
        model(tapelab.zeros(1, 3, 32, 16))


# The later families (tests/fixtures/vision/models_extra.npz): every variant's keys, shapes and size;
# logits and gradients of the smallest member of each family at 32x32 (a train-mode step where marked).
EXTRA = np.load(FIXTURES / "models_extra.npz")
# torchvision's published sizes (the num_params of each builder's weights; googlenet's without aux heads)
PUBLISHED_EXTRA = {
    "mobilenet_v3_large": 5_483_032, "mobilenet_v3_small": 2_542_856, "efficientnet_b0": 5_288_548,
    "efficientnet_b1": 7_794_184, "efficientnet_b2": 9_109_994, "efficientnet_b3": 12_233_232,
    "efficientnet_b4": 19_341_616, "efficientnet_b5": 30_389_784, "efficientnet_b6": 43_040_704,
    "efficientnet_b7": 66_347_960, "efficientnet_v2_s": 21_458_488, "efficientnet_v2_m": 54_139_356,
    "efficientnet_v2_l": 118_515_272, "convnext_tiny": 28_589_128, "convnext_small": 50_223_688,
    "convnext_base": 88_591_464, "convnext_large": 197_767_336, "shufflenet_v2_x0_5": 1_366_792,
    "shufflenet_v2_x1_0": 2_278_604, "shufflenet_v2_x1_5": 3_503_624, "shufflenet_v2_x2_0": 7_393_996,
    "regnet_y_400mf": 4_344_144, "regnet_y_800mf": 6_432_512, "regnet_y_1_6gf": 11_202_430,
    "regnet_y_3_2gf": 19_436_338, "regnet_y_8gf": 39_381_472, "regnet_y_16gf": 83_590_140,
    "regnet_y_32gf": 145_046_770, "regnet_y_128gf": 644_812_894, "regnet_x_400mf": 5_495_976,
    "regnet_x_800mf": 7_259_656, "regnet_x_1_6gf": 9_190_136, "regnet_x_3_2gf": 15_296_552,
    "regnet_x_8gf": 39_572_648, "regnet_x_16gf": 54_278_536, "regnet_x_32gf": 107_811_560,
    "googlenet": 6_624_904, "inception_v3": 27_161_264, "mnasnet0_5": 2_218_512, "mnasnet0_75": 3_170_208,
    "mnasnet1_0": 4_383_312, "mnasnet1_3": 6_282_256, "resnet101": 44_549_160, "resnet152": 60_192_808,
    "resnext50_32x4d": 25_028_904, "resnext101_32x8d": 88_791_336, "resnext101_64x4d": 83_455_272,
    "wide_resnet50_2": 68_883_240, "wide_resnet101_2": 126_886_696,
    "swin_t": 28_288_354, "swin_s": 49_606_258, "swin_b": 87_768_224, "swin_v2_t": 28_351_570,
    "swin_v2_s": 49_737_442, "swin_v2_b": 87_930_848, "maxvit_t": 30_919_624,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_EXTRA))
def test_extra_state_dict_matches_torchvision(name):
    with tapelab.device("meta"):
        model = getattr(models, name)(**EXTRA_SIZES[name])
    state = model.state_dict()
    assert list(state) == list(EXTRA[f"{name}/keys"])
    assert [",".join(map(str, v.shape)) for v in state.values()] == list(EXTRA[f"{name}/shapes"])
    assert sum(p.numel() for p in model.parameters()) == int(EXTRA[f"{name}/num_params"]) == PUBLISHED_EXTRA[name]


def _compare_extra(got: dict, prefix: str, grad_atol: float = 3e-5, logit_atol: float = 1e-5) -> None:
    assert list(got["grad_names"]) == list(EXTRA[f"{prefix}/grad_names"])
    scale = np.abs(EXTRA[f"{prefix}/logits"]).max()
    np.testing.assert_allclose(got["logits"], EXTRA[f"{prefix}/logits"], rtol=1e-4, atol=logit_atol * scale)
    named = [k for k in got if k.startswith("grad:")]   # EXTRA_PARAM_GRADS
    assert sorted(named) == sorted(k.split("/", 1)[1] for k in EXTRA.files if k.startswith(f"{prefix}/grad:"))
    for key in ("input_grad", "param_grad0", "param_grad1", "param_grad2", *named):
        want = EXTRA[f"{prefix}/{key}"]
        np.testing.assert_allclose(got[key], want, rtol=1e-4, atol=grad_atol * np.abs(want).max(), err_msg=key)


@pytest.mark.parametrize("name", sorted(EXTRA_NUMERIC))
def test_extra_logits_and_gradients_match_torchvision(name, monkeypatch):
    kwargs, shape, train = EXTRA_NUMERIC[name]
    model = _seeded(name, **kwargs)
    if name in _MAX_POOL_NEAR_TIES:
        monkeypatch.setitem(_winograd.MIN_CHANNELS, "forward", (32, 16))
        old = blas.set_enabled(False)
        try:
            _extra_numeric(name, model, shape, train)
        finally:
            blas.set_enabled(old)
    else:
        _extra_numeric(name, model, shape, train)


# googlenet's maxpool4 meets near-ties in the stored input (a 2x2 window's maxima within the last bits of
# the forward's rounding): the gradient's route follows whichever the products' rounding makes larger, and
# the stored torchvision run routes it as numpy's and our own GEMM round (MKL's route moves 31% of that
# gradient, while the logits agree to 3e-7; float64 agrees with the stored values), and as im2col rounds
# its 16-channel 3x3 forwards (Winograd F(2, 3), which takes them from 16 channels since session 27, moves
# it too). The products' route is tested against torch in tests/test_blas_mkl.py, Winograd's in
# tests/test_conv_winograd.py.
_MAX_POOL_NEAR_TIES = {"googlenet"}


def _extra_numeric(name, model, shape, train) -> None:
    for mode in (False, True) if train else (False,):
        got = model_outputs(tapelab, model, seeded_input(shape), train=mode, grad_sample=EXTRA_GRAD_SAMPLE,
                            input_stride=EXTRA_INPUT_STRIDE)
        if not mode:
            got |= param_grads(model, EXTRA_PARAM_GRADS.get(name, []), EXTRA_GRAD_SAMPLE)
        # train steps: torch's own float32 gradients of shufflenet_v2_x0_5 differ from float64 by 1.6e-4 of the max,
        # its logits by 3.0e-5 (batch statistics over 2 samples); tapelab's (batch norm in ATen's order) by 3.9e-5
        _compare_extra(got, f"{name}_train" if mode else name, 3e-4 if mode else 3e-5, 6e-5 if mode else 1e-5)


@pytest.mark.parametrize("key", sorted(EXTRA_CLASS_NUMERIC))
def test_model_class_logits_and_gradients_match_torchvision(key):
    cls, kwargs, shape = EXTRA_CLASS_NUMERIC[key]
    model = _load_seeded(lambda: getattr(models, cls)(**kwargs))
    got = model_outputs(tapelab, model, seeded_input(shape), grad_sample=EXTRA_GRAD_SAMPLE,
                        input_stride=EXTRA_INPUT_STRIDE)
    _compare_extra(got | param_grads(model, EXTRA_PARAM_GRADS.get(key, []), EXTRA_GRAD_SAMPLE), key)


def test_maxvit_checks_that_every_stage_divides_into_windows():
    with pytest.raises(ValueError, match=r"Input size \(16, 16\) of block 0 is not divisible by partition size 7"):
        models.maxvit_t(input_size=(64, 64))


@pytest.mark.parametrize("name", sorted(EXTRA_AUX))
def test_auxiliary_logits_in_train_mode_match_torchvision(request, name):
    if name in EXTRA_AUX_LONG and not request.config.getoption("--long"):
        pytest.skip(f"{name}'s train step at 299x299 runs with --long")
    kwargs, shape, aux_params = EXTRA_AUX[name]
    got = aux_outputs(tapelab, _seeded(name, **kwargs), seeded_input(shape), aux_params,
                      input_stride=EXTRA_INPUT_STRIDE)
    assert sorted(got) == sorted(k.split("/", 1)[1] for k in EXTRA.files if k.startswith(f"{name}_aux/"))
    for key, value in got.items():
        want = EXTRA[f"{name}_aux/{key}"]
        # three times torch's own float32 error (against float64) in this step, or 1e-4 of the max
        atol = max(1e-4, 3 * float(EXTRA[f"{name}_aux_spread/{key}"])) * np.abs(want).max()
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=atol, err_msg=key)


def test_googlenet_and_inception_return_their_auxiliary_logits_only_in_training():
    model = models.googlenet(num_classes=3, init_weights=False)
    out = model(tapelab.randn(2, 3, 32, 32))
    assert isinstance(out, models.GoogLeNetOutputs) and [o.shape for o in out] == [(2, 3)] * 3
    model.eval()
    assert model(tapelab.randn(1, 3, 32, 32)).shape == (1, 3)
    with tapelab.device("meta"):
        assert models.googlenet(aux_logits=False, init_weights=True).aux1 is None
        assert models.inception_v3(aux_logits=False, init_weights=True).AuxLogits is None
        with pytest.warns(FutureWarning, match="default weight initialization of GoogleNet will be changed"):
            models.googlenet()


def test_every_builder_is_registered_for_get_model_and_list_models():
    names = models.list_models()
    assert set(PUBLISHED) | set(PUBLISHED_EXTRA) <= set(names)
    assert models.list_models(include="mnasnet*", exclude="*0_75") == ["mnasnet0_5", "mnasnet1_0", "mnasnet1_3"]
    assert models.get_model_builder("MobileNet_V3_Small") is models.mobilenet_v3_small
    with tapelab.device("meta"):
        assert models.get_model("regnet_y_400mf", num_classes=7).fc.out_features == 7
    with pytest.raises(ValueError, match="Unknown model resnet1000"):
        models.get_model("resnet1000")
    with pytest.raises(ValueError, match="The parameter 'num_classes' expected value 1000 but got 7 instead."):
        models.get_model("convnext_tiny", weights="DEFAULT", num_classes=7)   # weights=: test_vision_weights_api
    with pytest.raises(ValueError, match="The parameter 'groups' expected value 32 but got 8 instead."):
        models.resnext50_32x4d(groups=8)


def test_mnasnet_loads_a_version_1_checkpoint_with_its_fixed_width_stem():
    from tapelab.vision.models.mnasnet import _BN_MOMENTUM, _get_depths, _stack, _v1_stem
    old = models.mnasnet0_5()
    # version 1: the stem ignored alpha (32, 32, 16 channels), so the first stack started from 16
    for idx, layer in enumerate(_v1_stem() + [_stack(16, _get_depths(0.5)[2], 3, 2, 3, 3, _BN_MOMENTUM)]):
        old.layers[idx] = layer
    old._version = 1
    state = old.state_dict()
    assert state._metadata[""]["version"] == 1
    new = models.mnasnet0_5()
    with pytest.warns(UserWarning, match="A new version of MNASNet model has been implemented"):
        new.load_state_dict(state)
    assert new.layers[0].weight.shape == (32, 3, 3, 3) and new.layers[7].weight.shape == (16,)
    new.eval()
    old.eval()
    x = tapelab.randn(1, 3, 32, 32)
    np.testing.assert_allclose(new(x).detach().numpy(), old(x).detach().numpy(), rtol=1e-6)
