"""torchvision's weights API on tapelab.vision.models: the enums and their data, get_weight,
get_model_weights, the builders' ``weights=`` (verify, num_classes, load through PyTorch's hub
cache, no network) and the ImageClassification preset against torchvision's output.

The enum data comes from torchvision (scripts/gen_vision_weights_meta.py); the values asserted by
hand below are from torchvision 0.29's documentation. The preset fixture is torchvision's output.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tapelab
from tapelab import hub
from tapelab.vision import models
from tapelab.vision.models import _weights
from tapelab.vision.transforms._presets import ImageClassification
from tapelab.vision.transforms.functional import InterpolationMode

FIXTURES = Path(__file__).parent / "fixtures" / "vision"
# enums whose every member is counted by default; the others (up to 644M parameters) with --long
SHORT = {"AlexNet_Weights", "ResNet18_Weights", "ResNet50_Weights", "ViT_B_16_Weights", "GoogLeNet_Weights",
         "SqueezeNet1_0_Weights", "DenseNet161_Weights", "VGG19_BN_Weights", "ViT_L_32_Weights",
         "Inception_V3_Weights", "VGG16_Weights", "DenseNet121_Weights", "MobileNet_V3_Large_Weights",
         "RegNet_Y_16GF_Weights", "SqueezeNet1_1_Weights", "EfficientNet_B1_Weights"}


def test_enum_names_members_urls_num_params():
    assert len(_weights.enum_names()) == 80
    r18, r50 = models.ResNet18_Weights, models.ResNet50_Weights
    assert [m.name for m in r18] == ["IMAGENET1K_V1"] and r18.DEFAULT is r18.IMAGENET1K_V1
    assert [m.name for m in r50] == ["IMAGENET1K_V1", "IMAGENET1K_V2"] and r50.DEFAULT is r50.IMAGENET1K_V2
    assert r18.IMAGENET1K_V1.url == "https://download.pytorch.org/models/resnet18-f37072fd.pth"
    assert r50.IMAGENET1K_V2.url == "https://download.pytorch.org/models/resnet50-11ad3fa6.pth"
    assert r18.DEFAULT.meta["num_params"] == 11_689_512 and r18.DEFAULT.meta["min_size"] == (1, 1)
    assert r50.IMAGENET1K_V2.meta["_metrics"]["ImageNet-1K"]["acc@1"] == 80.858
    vit_h = models.ViT_H_14_Weights
    assert [m.name for m in vit_h] == ["IMAGENET1K_SWAG_E2E_V1", "IMAGENET1K_SWAG_LINEAR_V1"]
    assert vit_h.DEFAULT is vit_h.IMAGENET1K_SWAG_E2E_V1 and vit_h.DEFAULT.meta["min_size"] == (518, 518)
    assert [m.name for m in models.VGG16_Weights] == ["IMAGENET1K_V1", "IMAGENET1K_FEATURES"]
    assert models.VGG16_Weights.IMAGENET1K_FEATURES.meta["categories"] is None
    cats = models.AlexNet_Weights.DEFAULT.meta["categories"]
    assert len(cats) == 1000 and cats[0] == "tench" and cats[-1] == "toilet tissue"
    assert repr(r50.DEFAULT) == "ResNet50_Weights.IMAGENET1K_V2"
    assert isinstance(r50.DEFAULT, models.WeightsEnum) and isinstance(r50.DEFAULT.value, models.Weights)
    from tapelab.vision.models._api import Weights, WeightsEnum   # torchvision.models._api's names
    assert (Weights, WeightsEnum) == (models.Weights, models.WeightsEnum)
    assert "ResNet18_Weights" in dir(models) and "Swin_T_Weights" in dir(models)
    with pytest.raises(AttributeError):
        models.ResNet19_Weights  # noqa: B018


def test_get_weight_and_get_model_weights():
    assert models.get_weight("ResNet50_Weights.IMAGENET1K_V2") is models.ResNet50_Weights.IMAGENET1K_V2
    assert models.get_weight("ResNet18_Weights.DEFAULT") is models.ResNet18_Weights.IMAGENET1K_V1
    assert models.get_model_weights("resnet18") is models.ResNet18_Weights
    assert models.get_model_weights(models.vit_b_16) is models.ViT_B_16_Weights
    assert models.get_model_weights("Wide_ResNet50_2".lower()) is models.Wide_ResNet50_2_Weights
    with pytest.raises(ValueError, match="Invalid weight name provided: 'ResNet50_Weights'"):
        models.get_weight("ResNet50_Weights")
    with pytest.raises(ValueError, match="weight enum 'ResNet19_Weights'"):
        models.get_weight("ResNet19_Weights.IMAGENET1K_V1")
    with pytest.raises(KeyError):
        models.get_weight("ResNet18_Weights.IMAGENET1K_V9")


def test_verify():
    w = models.ResNet18_Weights
    assert w.verify(None) is None and w.verify(w.DEFAULT) is w.IMAGENET1K_V1
    assert w.verify("IMAGENET1K_V1") is w.verify("ResNet18_Weights.IMAGENET1K_V1") is w.IMAGENET1K_V1
    with pytest.raises(TypeError, match="expected ResNet18_Weights but received VGG16_Weights"):
        models.resnet18(weights=models.VGG16_Weights.DEFAULT)
    with pytest.raises(KeyError):
        models.resnet18(weights="IMAGENET1K_V2")


def test_num_classes_conflict_raises_before_loading():
    with pytest.raises(ValueError, match="'num_classes' expected value 1000 but got 10 instead"):
        models.resnet18(weights="IMAGENET1K_V1", num_classes=10)
    with pytest.raises(ValueError, match="'image_size' expected value 384 but got 224"):
        models.vit_b_16(weights="IMAGENET1K_SWAG_E2E_V1", image_size=224)
    with pytest.raises(ValueError, match=r"'input_size' expected value \(224, 224\) but got \(256, 256\)"):
        models.maxvit_t(weights="IMAGENET1K_V1", input_size=(256, 256))


def _builds(name: str, member) -> dict:
    """The arguments torchvision's builder sets for ``member`` before loading it."""
    kwargs = {}
    if member.meta["categories"] is not None:
        kwargs["num_classes"] = len(member.meta["categories"])
    if name.startswith("vit_"):
        kwargs["image_size"] = member.meta["min_size"][0]
    if name == "inception_v3":      # its published count keeps the auxiliary head; GoogLeNet's does not
        kwargs.update(aux_logits=True, init_weights=False)
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=False)
    return kwargs


@pytest.mark.parametrize("name", [n for n in models.list_models() if _weights.builder_enum_name(n)])
def test_num_params_of_every_member(request, name):
    enum = models.get_model_weights(name)
    if enum.__name__ not in SHORT and not request.config.getoption("--long"):
        pytest.skip(f"{enum.__name__}'s parameter count runs with --long")
    for member in enum:
        with tapelab.device("meta"):
            model = models.get_model(name, **_builds(name, member))
        assert sum(p.numel() for p in model.parameters()) == member.meta["num_params"], member


def _state_digest(state: dict) -> str:
    """scripts/gen_vision_weights_meta.py's digest of a state_dict's ``key:shape`` lines."""
    lines = "\n".join(f"{k}:{tuple(v.shape)}" for k, v in state.items())
    return hashlib.sha1(lines.encode()).hexdigest()


@pytest.mark.parametrize("name", [n for n in models.list_models() if _weights.builder_enum_name(n)])
def test_state_dict_layout_is_torchvisions(request, name):
    """The checkpoint a weight names loads: same keys in the same order with the same shapes."""
    enum = models.get_model_weights(name)
    if enum.__name__ not in SHORT and not request.config.getoption("--long"):
        pytest.skip(f"{name}'s state_dict layout runs with --long")
    want = json.loads((FIXTURES / "weights_state_keys.json").read_text())[name]
    kwargs = {"image_size": enum.DEFAULT.meta["min_size"][0]} if name.startswith("vit_") else {}
    if name in ("googlenet", "inception_v3"):
        kwargs["init_weights"] = False    # the same layout, without the FutureWarning of the default
    with tapelab.device("meta"):
        assert _state_digest(models.get_model(name, **kwargs).state_dict()) == want


def test_every_weights_enum_has_a_builder():
    missing = {n for n in _weights._enum_of_builder() if n not in models.list_models()}
    assert missing == set()


@pytest.fixture
def hub_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(hub, "_DIR", [])          # no set_dir() of another test
    return tmp_path / "hub" / "checkpoints"


def test_builder_loads_from_pytorch_hub_cache(hub_dir, offline):
    tapelab.manual_seed(0)
    saved = models.resnet18().eval()
    for p in saved.parameters():
        p.data.normal_(0, 0.05)
    name = Path(models.ResNet18_Weights.IMAGENET1K_V1.url).name
    hub_dir.mkdir(parents=True)
    tapelab.save(saved.state_dict(), hub_dir / name)
    model = models.resnet18(weights=models.ResNet18_Weights.DEFAULT).eval()
    x = tapelab.randn(2, 3, 32, 32)
    with tapelab.no_grad():
        np.testing.assert_array_equal(model(x).numpy(), saved(x).numpy())
    same = models.get_model("resnet18", weights="IMAGENET1K_V1").eval()
    with tapelab.no_grad():
        np.testing.assert_array_equal(same(x).numpy(), saved(x).numpy())


@pytest.fixture
def offline(monkeypatch):
    """No test downloads: a checkpoint missing from the cache fails as without a network."""
    def unreachable(url, *args, **kwargs):
        raise OSError(f"{url}: network is unreachable")
    monkeypatch.setattr(hub, "download_url_to_file", unreachable)


def _cache(hub_dir: Path, weights, state: dict) -> None:
    hub_dir.mkdir(parents=True, exist_ok=True)
    tapelab.save(state, hub_dir / Path(weights.url).name)


def test_densenet_loads_checkpoints_with_the_old_layer_names(hub_dir, offline):
    with tapelab.device("meta"):
        keys = list(models.densenet121().state_dict())
    state = {k: tapelab.full((1,), float(i)) for i, k in enumerate(keys)}
    old = {k.replace(".norm1.", ".norm.1.").replace(".conv2.", ".conv.2."): v for k, v in state.items()}
    assert "features.denseblock4.denselayer16.norm.1.running_var" in old
    with tapelab.device("meta"):
        template = models.densenet121().state_dict()
    _cache(hub_dir, models.DenseNet121_Weights.DEFAULT,
           {o: tapelab.zeros(template[k].shape, dtype=template[k].dtype) + i for i, (k, o) in enumerate(zip(state, old))})
    loaded = models.densenet121(weights="DEFAULT").state_dict()
    for i, k in enumerate(keys):
        assert float(loaded[k].reshape(-1)[0]) == i, k


@pytest.mark.parametrize("name, aux", [("googlenet", "aux1"), ("inception_v3", "AuxLogits")])
def test_aux_heads_after_loading(request, hub_dir, offline, name, aux):
    if name == "inception_v3" and not request.config.getoption("--long"):
        pytest.skip("inception_v3's load runs with --long")
    builder, weights = models.get_model_builder(name), models.get_model_weights(name).DEFAULT
    _cache(hub_dir, weights, builder(aux_logits=True, init_weights=False).state_dict())
    model = builder(weights=weights)
    assert model.transform_input and (getattr(model, aux) is None) == (name == "googlenet")
    kept = models.get_model(name, weights=weights, aux_logits=True, transform_input=False)
    assert kept.aux_logits and getattr(kept, aux) is not None and not kept.transform_input
    with pytest.raises(ValueError, match="'aux_logits' expected value True but got False"):
        builder(weights=weights, aux_logits=False)


def test_missing_checkpoint_surfaces_the_download_error(hub_dir, offline):
    with pytest.raises(OSError, match="unreachable"):
        models.resnet18(weights="DEFAULT")


def test_pretrained_legacy_interface(hub_dir, offline):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = models.resnet18(pretrained=False, num_classes=3)
    assert model.fc.out_features == 3
    messages = [str(w.message) for w in record]
    assert any("'pretrained' is deprecated since 0.13" in m for m in messages)
    assert any("equivalent to passing `weights=None`" in m for m in messages)
    with warnings.catch_warnings(record=True) as record, pytest.raises(OSError, match="resnet18-f37072fd.pth"):
        warnings.simplefilter("always")
        models.resnet18(pretrained=True, progress=False)   # IMAGENET1K_V1, not in the empty cache
    assert any("passing `weights=ResNet18_Weights.IMAGENET1K_V1`. You can also use `weights=ResNet18_Weights"
               ".DEFAULT`" in str(w.message) for w in record)
    with pytest.raises(ValueError, match="No weights available for model vit_h_14"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _weights.builder_with_weights("vit_h_14", lambda **kw: None)(pretrained=True)


def test_transforms_preset_matches_torchvision():
    ref = np.load(FIXTURES / "weights_presets.npz")
    image = tapelab.tensor(ref["image"])
    for mode in ("BILINEAR", "BICUBIC"):
        out = ImageClassification(crop_size=16, resize_size=20, interpolation=InterpolationMode[mode])(image)
        assert out.dtype == tapelab.float32 and tuple(out.shape) == (3, 16, 16)
        np.testing.assert_allclose(out.numpy(), ref[mode], rtol=1e-5, atol=1e-5)


def test_weights_transforms_are_the_evaluated_preset():
    preset = models.ResNet50_Weights.IMAGENET1K_V2.transforms()
    assert isinstance(preset, ImageClassification)
    assert preset.crop_size == [224] and preset.resize_size == [232]
    assert preset.interpolation is InterpolationMode.BILINEAR
    assert preset.mean == [0.485, 0.456, 0.406] and preset.std == [0.229, 0.224, 0.225]
    vit = models.ViT_H_14_Weights.DEFAULT.transforms()
    assert vit.crop_size == [518] and vit.resize_size == [518] and vit.interpolation is InterpolationMode.BICUBIC
    out = preset(tapelab.randint(0, 256, (1, 3, 240, 300), dtype=tapelab.uint8))
    assert tuple(out.shape) == (1, 3, 224, 224)


def test_torchmetrics_imports_under_aliases():
    pytest.importorskip("torchmetrics")
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in ("torchmetrics", "lightning_utilities")}
    for k in saved:
        del sys.modules[k]
    try:
        with tapelab.install_aliases():
            torchmetrics = importlib.import_module("torchmetrics")
            dists = importlib.import_module("torchmetrics.functional.image.dists")   # imports VGG16_Weights
            assert torchmetrics.Accuracy is not None
            assert dists.VGG16_Weights is models.VGG16_Weights and dists.vgg16 is models.vgg16
    finally:
        for k in [k for k in sys.modules if k.split(".")[0] in ("torchmetrics", "lightning_utilities")]:
            del sys.modules[k]
        sys.modules.update(saved)
