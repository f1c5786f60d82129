"""tapelab.vision.models.segmentation: torchvision's published sizes and state_dict names, the
``{"out", "aux"}`` outputs at the input's size, heads against the same layers built in torch, and
a training step.

torchvision is not needed: the sizes are its documented ``num_params``, and the heads are checked
against torch.nn layers given the same weights.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.vision import models
from tapelab.vision.models import segmentation

# torchvision's published parameter counts (21 classes, aux head where the weights have one)
PUBLISHED = {"fcn_resnet50": 35_322_218, "fcn_resnet101": 54_314_346, "deeplabv3_resnet50": 42_004_074,
             "deeplabv3_resnet101": 60_996_202, "deeplabv3_mobilenet_v3_large": 11_029_328,
             "lraspp_mobilenet_v3_large": 3_221_538}


def _build(name: str, **kwargs):
    if not name.startswith("lraspp"):
        kwargs.setdefault("aux_loss", True)
    return models.get_model(name, weights_backbone=None, **kwargs)


def _torch_state(module) -> dict:
    return {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name):
    model = _build(name)
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name]


def test_registered_and_listed():
    assert models.list_models(module=segmentation) == sorted(PUBLISHED)
    with pytest.raises(NotImplementedError, match="weights=None"):
        segmentation.fcn_resnet50(weights="COCO_WITH_VOC_LABELS_V1")
    with pytest.raises(NotImplementedError, match="auxiliary loss"):
        segmentation.lraspp_mobilenet_v3_large(weights_backbone=None, aux_loss=True)


def test_torchvision_state_dict_names():
    keys = set(_build("deeplabv3_resnet50", num_classes=4).state_dict())
    for key in ("backbone.conv1.weight", "backbone.layer4.2.bn3.running_var", "classifier.0.convs.0.0.weight",
                "classifier.0.convs.3.1.weight", "classifier.0.convs.4.1.weight", "classifier.0.project.0.weight",
                "classifier.4.bias", "aux_classifier.0.weight", "aux_classifier.4.bias"):
        assert key in keys
    assert not any(k.startswith("backbone.fc") for k in keys)   # the classifier's head is dropped
    keys = set(_build("lraspp_mobilenet_v3_large").state_dict())
    assert {"backbone.16.0.weight", "classifier.cbr.0.weight", "classifier.scale.1.weight",
            "classifier.low_classifier.bias", "classifier.high_classifier.weight"} <= keys
    assert max(int(k.split(".")[1]) for k in keys if k.startswith("backbone.")) == 16


@pytest.mark.parametrize("name,aux", [("deeplabv3_mobilenet_v3_large", True), ("lraspp_mobilenet_v3_large", False),
                                      ("fcn_resnet50", False)])
def test_outputs_at_input_size(name, aux):
    model = _build(name, num_classes=3, **({} if name.startswith("lraspp") else {"aux_loss": aux})).eval()
    out = model(tapelab.randn(2, 3, 37, 50))
    assert list(out) == (["out", "aux"] if aux else ["out"])
    for value in out.values():
        assert tuple(value.shape) == (2, 3, 37, 50)
        assert np.isfinite(value.detach().numpy()).all()


def test_dilated_backbone_keeps_stride_8():
    feats = _build("fcn_resnet50", num_classes=2).backbone(tapelab.randn(1, 3, 64, 64))
    assert tuple(feats["out"].shape) == (1, 2048, 8, 8) and tuple(feats["aux"].shape) == (1, 1024, 8, 8)


def test_deeplab_head_matches_torch():
    tapelab.manual_seed(0)
    head = segmentation.DeepLabHead(8, 3, atrous_rates=(1, 2, 3)).eval()
    t = torch.nn
    branch = [t.Sequential(t.Conv2d(8, 256, 1, bias=False), t.BatchNorm2d(256), t.ReLU())]
    branch += [t.Sequential(t.Conv2d(8, 256, 3, padding=r, dilation=r, bias=False), t.BatchNorm2d(256), t.ReLU())
               for r in (1, 2, 3)]
    branch.append(t.Sequential(t.AdaptiveAvgPool2d(1), t.Conv2d(8, 256, 1, bias=False), t.BatchNorm2d(256), t.ReLU()))
    project = t.Sequential(t.Conv2d(1280, 256, 1, bias=False), t.BatchNorm2d(256), t.ReLU(), t.Dropout(0.5))
    tail = t.Sequential(t.Conv2d(256, 256, 3, padding=1, bias=False), t.BatchNorm2d(256), t.ReLU(),
                        t.Conv2d(256, 3, 1))
    ref = t.ModuleDict({"convs": t.ModuleList(branch), "project": project, "tail": tail}).eval()
    state = _torch_state(head)
    ref.load_state_dict({k.replace("0.convs", "convs").replace("0.project", "project"): v for k, v in state.items()
                         if k.startswith("0.")} | {f"tail.{int(k[0]) - 1}{k[1:]}": v for k, v in state.items()
                                                   if not k.startswith("0.")})
    x = np.random.RandomState(1).randn(2, 8, 9, 11).astype(np.float32)
    xt = torch.from_numpy(x)
    parts = [b(xt) for b in ref["convs"][:4]]
    parts.append(torch.nn.functional.interpolate(ref["convs"][4](xt), size=(9, 11), mode="bilinear",
                                                 align_corners=False))
    expected = ref["tail"](ref["project"](torch.cat(parts, 1))).detach().numpy()
    np.testing.assert_allclose(head(tapelab.tensor(x)).detach().numpy(), expected, rtol=1e-4, atol=1e-5)


def test_lraspp_head_matches_torch():
    tapelab.manual_seed(0)
    head = segmentation.LRASPPHead(6, 10, 3, 8).eval()
    state = _torch_state(head)
    rs = np.random.RandomState(2)
    low, high = rs.randn(2, 6, 12, 10).astype(np.float32), rs.randn(2, 10, 3, 3).astype(np.float32)
    F = torch.nn.functional
    h = torch.from_numpy(high)
    cbr = F.relu(F.batch_norm(F.conv2d(h, state["cbr.0.weight"]), state["cbr.1.running_mean"],
                              state["cbr.1.running_var"], state["cbr.1.weight"], state["cbr.1.bias"]))
    gate = torch.sigmoid(F.conv2d(h.mean((2, 3), keepdim=True), state["scale.1.weight"]))
    up = F.interpolate(cbr * gate, size=(12, 10), mode="bilinear", align_corners=False)
    expected = (F.conv2d(torch.from_numpy(low), state["low_classifier.weight"], state["low_classifier.bias"])
                + F.conv2d(up, state["high_classifier.weight"], state["high_classifier.bias"]))
    out = head({"low": tapelab.tensor(low), "high": tapelab.tensor(high)})
    np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


def test_intermediate_layer_getter():
    from tapelab.vision.models._utils import IntermediateLayerGetter
    body = IntermediateLayerGetter(models.resnet18(), {"layer1": "feat1", "layer3": "feat3"})
    assert list(dict(body.named_children())) == ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3"]
    out = body(tapelab.randn(1, 3, 64, 64))
    assert [(k, tuple(v.shape)) for k, v in out.items()] == [("feat1", (1, 64, 16, 16)), ("feat3", (1, 256, 4, 4))]
    with pytest.raises(ValueError, match="return_layers are not present"):
        IntermediateLayerGetter(models.resnet18(), {"layer9": "x"})


def test_training_step_lowers_the_loss():
    tapelab.manual_seed(0)
    model = _build("deeplabv3_mobilenet_v3_large", num_classes=3).train()
    x = tapelab.randn(2, 3, 32, 32)
    target = (tapelab.rand(2, 32, 32) * 3).long()
    opt = tapelab.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(3):
        out = model(x)
        loss = tapelab.nn.functional.cross_entropy(out["out"], target) + 0.5 * tapelab.nn.functional.cross_entropy(
            out["aux"], target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert model.classifier[4].weight.grad is not None and model.aux_classifier[0].weight.grad is not None
