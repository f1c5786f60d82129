"""tapelab.vision.models.detection: torchvision's published sizes and state_dict names, the pieces
(transform, anchors, box coder, matcher, RPN layout, losses, mask pasting) against the same
computation written in torch, and train / eval / finetune runs of Faster and Mask R-CNN.

torchvision is not needed: the sizes are its documented ``num_params``.
"""
from __future__ import annotations

import importlib
import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

import tapelab
from tapelab.vision import models
from tapelab.vision.models import detection
from tapelab.vision.models.detection import _utils as det_utils
from tapelab.vision.models.detection.anchor_utils import AnchorGenerator
from tapelab.vision.models.detection.backbone_utils import mobilenet_backbone, resnet_fpn_backbone
from tapelab.vision.models.detection.image_list import ImageList
from tapelab.vision.models.detection.mask_rcnn import MaskRCNNHeads
from tapelab.vision.models.detection.roi_heads import fastrcnn_loss, paste_masks_in_image
from tapelab.vision.models.detection.rpn import RPNHead, concat_box_prediction_layers
from tapelab.vision.models.detection.transform import GeneralizedRCNNTransform
from tapelab.vision.ops import FrozenBatchNorm2d

# torchvision's published parameter counts (91 classes; pretrained backbones use frozen batch norm)
PUBLISHED = {"fasterrcnn_resnet50_fpn": 41_755_286, "fasterrcnn_mobilenet_v3_large_fpn": 19_386_354,
             "fasterrcnn_mobilenet_v3_large_320_fpn": 19_386_354, "maskrcnn_resnet50_fpn": 44_401_393,
             "retinanet_resnet50_fpn": 34_014_999, "fcos_resnet50_fpn": 32_269_600,
             "ssdlite320_mobilenet_v3_large": 3_440_060, "fasterrcnn_resnet50_fpn_v2": 43_712_278,
             "maskrcnn_resnet50_fpn_v2": 46_359_409, "retinanet_resnet50_fpn_v2": 38_198_935,
             "ssd300_vgg16": 35_641_826, "keypointrcnn_resnet50_fpn": 59_137_258}
# builders whose published size has the backbone's batch norms frozen (their pretrained backbone does that)
FROZEN_BN = {"fasterrcnn_resnet50_fpn", "fasterrcnn_mobilenet_v3_large_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn",
             "maskrcnn_resnet50_fpn", "retinanet_resnet50_fpn", "fcos_resnet50_fpn", "keypointrcnn_resnet50_fpn"}
SMALL = {"min_size": 64, "max_size": 96}


def _t(x) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x.detach().numpy() if isinstance(x, tapelab.Tensor) else x).copy())


def _np(x) -> np.ndarray:
    return x.detach().numpy()


def _count(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name):
    with tapelab.device("meta"):   # shapes only: SSD runs its backbone once to size the head
        model = models.get_model(name, weights_backbone=None)
    # built untrained, the backbone's batch norms are trainable; some published sizes have them frozen
    bn = sum(p.numel() for m in model.backbone.body.modules() if isinstance(m, tapelab.nn.BatchNorm2d)
             for p in m.parameters()) if name in FROZEN_BN else 0
    assert _count(model) - bn == PUBLISHED[name]


def test_frozen_backbones_give_the_published_size():
    body = resnet_fpn_backbone(backbone_name="resnet50", weights=None)
    assert any(isinstance(m, FrozenBatchNorm2d) for m in body.modules())
    assert _count(detection.FasterRCNN(body, num_classes=91)) == PUBLISHED["fasterrcnn_resnet50_fpn"]
    body = mobilenet_backbone(backbone_name="mobilenet_v3_large", weights=None, fpn=True, trainable_layers=3)
    anchors = AnchorGenerator(((32, 64, 128, 256, 512),) * 3, ((0.5, 1.0, 2.0),) * 3)
    model = detection.FasterRCNN(body, num_classes=91, rpn_anchor_generator=anchors)
    assert _count(model) == PUBLISHED["fasterrcnn_mobilenet_v3_large_fpn"]
    # the first stages are frozen: conv1 and layer1 of the resnet, the stem and early blocks of the mobilenet
    assert not body.body["0"][0].weight.requires_grad and body.body["16"][0].weight.requires_grad


def test_registered_and_listed():
    assert models.list_models(module=detection) == sorted(PUBLISHED)
    with pytest.raises(NotImplementedError, match="weights=None"):
        detection.fasterrcnn_resnet50_fpn(weights="COCO_V1")


def test_torchvision_state_dict_names():
    keys = set(detection.maskrcnn_resnet50_fpn(weights_backbone=None, num_classes=3).state_dict())
    for key in ("backbone.body.conv1.weight", "backbone.body.layer4.2.bn3.running_mean",
                "backbone.fpn.inner_blocks.0.0.weight", "backbone.fpn.layer_blocks.3.0.bias",
                "rpn.head.conv.0.0.weight", "rpn.head.cls_logits.weight", "rpn.head.bbox_pred.bias",
                "roi_heads.box_head.fc6.weight", "roi_heads.box_head.fc7.bias", "roi_heads.box_predictor.cls_score.weight",
                "roi_heads.box_predictor.bbox_pred.bias", "roi_heads.mask_head.3.0.weight",
                "roi_heads.mask_predictor.conv5_mask.weight", "roi_heads.mask_predictor.mask_fcn_logits.bias"):
        assert key in keys
    assert not any(k.startswith("backbone.body.fc") for k in keys)
    keys = set(detection.fasterrcnn_mobilenet_v3_large_fpn(weights_backbone=None).state_dict())
    assert {"backbone.body.0.0.weight", "backbone.body.16.1.running_var", "backbone.fpn.inner_blocks.1.0.weight"} <= keys
    assert not any(k.startswith("backbone.body.17") for k in keys)


def _version_1(state: dict) -> OrderedDict:
    """``state`` as a checkpoint saved by a module's version 1 (its names before the rename)."""
    out = OrderedDict(state)
    out._metadata = OrderedDict({"": {"version": 1}})
    return out


def test_old_checkpoint_names_load():
    """torchvision's version-1 RPN head and mask head checkpoints (plain conv names) still load."""
    head = RPNHead(8, 3)
    state = {k: v for k, v in head.state_dict().items() if not k.startswith("conv.")}
    head.load_state_dict(_version_1({**state, "conv.weight": tapelab.ones(8, 8, 3, 3), "conv.bias": tapelab.ones(8)}))
    assert head.conv[0][0].weight.sum().item() == 8 * 8 * 9 and head.conv[0][0].bias.sum().item() == 8
    heads = MaskRCNNHeads(4, (4, 4), 1)
    old = {f"mask_fcn{i + 1}.{kind}": tapelab.full(tuple(getattr(heads[i][0], kind).shape), float(i + 1))
           for i in range(2) for kind in ("weight", "bias")}
    heads.load_state_dict(_version_1(old))
    assert heads[0][0].weight[0, 0, 0, 0].item() == 1.0 and heads[1][0].bias[0].item() == 2.0


def test_transform_resizes_normalizes_and_pads_like_torch():
    transform = GeneralizedRCNNTransform(96, 128, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]).eval()
    rs = np.random.RandomState(0)
    images = [rs.rand(3, 70, 90).astype(np.float32), rs.rand(3, 100, 60).astype(np.float32)]
    boxes = np.array([[5.0, 10.0, 40.0, 30.0]], np.float32)
    out, targets = transform([tapelab.tensor(x) for x in images],
                             [{"boxes": tapelab.tensor(boxes)}, {"boxes": tapelab.tensor(boxes)}])
    mean, std = torch.tensor([0.485, 0.456, 0.406])[:, None, None], torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    expected_sizes = []
    for i, x in enumerate(images):
        h, w = x.shape[1:]
        scale = min(96 / min(h, w), 128 / max(h, w))
        size = (math.floor(h * scale), math.floor(w * scale))
        expected_sizes.append(size)
        ref = torch.nn.functional.interpolate(((torch.from_numpy(x) - mean) / std)[None], size=size, mode="bilinear",
                                              align_corners=False)[0]
        np.testing.assert_allclose(_np(out.tensors[i, :, :size[0], :size[1]]), ref.numpy(), rtol=1e-4, atol=1e-4)
        assert float(out.tensors[i, :, size[0]:, :].abs().sum()) == 0 == float(out.tensors[i, :, :, size[1]:].abs().sum())
        ratio = torch.tensor([size[1] / w, size[0] / h, size[1] / w, size[0] / h], dtype=torch.float32)
        np.testing.assert_allclose(_np(targets[i]["boxes"]), (torch.from_numpy(boxes) * ratio).numpy(), rtol=1e-6)
    assert out.image_sizes == expected_sizes == [(96, 123), (128, 76)]
    assert tuple(out.tensors.shape) == (2, 3, 128, 128)   # padded to multiples of 32
    back = transform.postprocess([{"boxes": targets[1]["boxes"]}], [out.image_sizes[1]], [(100, 60)])
    np.testing.assert_allclose(_np(back[0]["boxes"]), boxes, rtol=1e-5)


def test_transform_rejects_integer_images():
    with pytest.raises(TypeError, match="floating type"):
        GeneralizedRCNNTransform(32, 64, [0.0] * 3, [1.0] * 3)([tapelab.zeros(3, 8, 8, dtype=tapelab.uint8)])


def test_anchors_match_torch():
    gen = AnchorGenerator(((16, 32), (64,)), ((0.5, 1.0, 2.0), (1.0,)))
    images = ImageList(tapelab.zeros(2, 3, 64, 96), [(64, 96), (60, 90)])
    maps = [tapelab.zeros(2, 4, 8, 12), tapelab.zeros(2, 4, 4, 6)]
    anchors = gen(images, maps)
    assert gen.num_anchors_per_location() == [6, 1] and len(anchors) == 2
    expected = []
    for (sizes, ratios), (gh, gw) in zip((((16, 32), (0.5, 1.0, 2.0)), ((64,), (1.0,))), ((8, 12), (4, 6))):
        scales, ar = torch.tensor(sizes, dtype=torch.float32), torch.tensor(ratios, dtype=torch.float32)
        hr = ar.sqrt()
        ws, hs = ((1 / hr)[:, None] * scales).reshape(-1), (hr[:, None] * scales).reshape(-1)
        base = (torch.stack([-ws, -hs, ws, hs], 1) / 2).round()
        sy, sx = 64 // gh, 96 // gw
        yy, xx = torch.meshgrid(torch.arange(gh) * sy, torch.arange(gw) * sx, indexing="ij")
        shifts = torch.stack([xx.reshape(-1), yy.reshape(-1)] * 2, 1)
        expected.append((shifts[:, None, :] + base[None]).reshape(-1, 4))
    np.testing.assert_array_equal(_np(anchors[1]), torch.cat(expected).numpy())


def test_box_coder_matches_torch():
    rs = np.random.RandomState(0)
    xy = rs.rand(5, 2).astype(np.float32) * 50
    props = np.concatenate([xy, xy + 1 + rs.rand(5, 2).astype(np.float32) * 30], 1)
    xy = rs.rand(5, 2).astype(np.float32) * 50
    gt = np.concatenate([xy, xy + 1 + rs.rand(5, 2).astype(np.float32) * 30], 1)
    coder = det_utils.BoxCoder((10.0, 10.0, 5.0, 5.0))
    (codes,) = coder.encode([tapelab.tensor(gt)], [tapelab.tensor(props)])
    p, g = torch.from_numpy(props), torch.from_numpy(gt)
    pw, ph = p[:, 2] - p[:, 0], p[:, 3] - p[:, 1]
    gw, gh = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
    px, py, gx, gy = p[:, 0] + 0.5 * pw, p[:, 1] + 0.5 * ph, g[:, 0] + 0.5 * gw, g[:, 1] + 0.5 * gh
    ref = torch.stack([10 * (gx - px) / pw, 10 * (gy - py) / ph, 5 * torch.log(gw / pw), 5 * torch.log(gh / ph)], 1)
    np.testing.assert_allclose(_np(codes), ref.numpy(), rtol=1e-5, atol=1e-5)
    decoded = coder.decode(codes, [tapelab.tensor(props)])
    assert tuple(decoded.shape) == (5, 1, 4)
    np.testing.assert_allclose(_np(decoded[:, 0]), gt, rtol=1e-5, atol=1e-4)
    # dw, dh are clamped at log(1000/16) before exp
    huge = coder.decode_single(tapelab.tensor([[0.0, 0.0, 100.0, 100.0]]), tapelab.tensor([[0.0, 0.0, 10.0, 10.0]]))
    half = 0.5 * 10 * math.exp(math.log(1000 / 16))
    np.testing.assert_allclose(_np(huge), [[5 - half, 5 - half, 5 + half, 5 + half]], rtol=1e-5)


def test_matcher_thresholds_and_low_quality_matches():
    iou = tapelab.tensor([[0.9, 0.5, 0.1, 0.0, 0.2],
                          [0.1, 0.6, 0.2, 0.35, 0.0]])
    assert det_utils.Matcher(0.7, 0.3)(iou).tolist() == [0, -2, -1, -2, -1]
    # prediction 1 is gt 1's best (0.6): kept; prediction 3 stays between thresholds
    assert det_utils.Matcher(0.7, 0.3, allow_low_quality_matches=True)(iou).tolist() == [0, 1, -1, -2, -1]
    with pytest.raises(ValueError, match="No ground-truth boxes"):
        det_utils.Matcher(0.7, 0.3)(tapelab.zeros(0, 4))


def test_sampler_balances_positives():
    tapelab.manual_seed(0)
    labels = tapelab.tensor([1] * 10 + [0] * 30 + [-1] * 5)
    pos, neg = det_utils.BalancedPositiveNegativeSampler(16, 0.25)([labels])
    assert int(pos[0].sum()) == 4 and int(neg[0].sum()) == 12
    assert (_np(labels)[_np(pos[0]).astype(bool)] == 1).all() and (_np(labels)[_np(neg[0]).astype(bool)] == 0).all()
    pos, neg = det_utils.BalancedPositiveNegativeSampler(64, 0.5)([labels])
    assert int(pos[0].sum()) == 10 and int(neg[0].sum()) == 30


def test_prediction_layers_flatten_like_the_anchors():
    rs = np.random.RandomState(0)
    cls = [rs.randn(2, 3, 4, 5).astype(np.float32), rs.randn(2, 3, 2, 3).astype(np.float32)]
    reg = [rs.randn(2, 12, 4, 5).astype(np.float32), rs.randn(2, 12, 2, 3).astype(np.float32)]
    box_cls, box_reg = concat_box_prediction_layers([tapelab.tensor(c) for c in cls], [tapelab.tensor(r) for r in reg])

    def flat(x, c):
        n, _, h, w = x.shape
        return torch.from_numpy(x).view(n, -1, c, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, c)

    np.testing.assert_array_equal(_np(box_cls), torch.cat([flat(c, 1) for c in cls], 1).flatten(0, -2).numpy())
    np.testing.assert_array_equal(_np(box_reg), torch.cat([flat(r, 4) for r in reg], 1).reshape(-1, 4).numpy())


def test_fastrcnn_loss_matches_torch():
    rs = np.random.RandomState(0)
    logits, deltas = rs.randn(6, 3).astype(np.float32), rs.randn(6, 12).astype(np.float32)
    labels, targets = [np.array([0, 2, 1]), np.array([1, 0, 0])], [rs.randn(3, 4).astype(np.float32) for _ in range(2)]
    lc, lb = fastrcnn_loss(tapelab.tensor(logits, requires_grad=True), tapelab.tensor(deltas),
                           [tapelab.tensor(x) for x in labels], [tapelab.tensor(x) for x in targets])
    lab, tgt = torch.from_numpy(np.concatenate(labels)), torch.from_numpy(np.concatenate(targets))
    ref_c = torch.nn.functional.cross_entropy(torch.from_numpy(logits), lab)
    pos = torch.where(lab > 0)[0]
    ref_b = torch.nn.functional.smooth_l1_loss(torch.from_numpy(deltas).reshape(6, 3, 4)[pos, lab[pos]], tgt[pos],
                                               beta=1 / 9, reduction="sum") / 6
    np.testing.assert_allclose([lc.item(), lb.item()], [ref_c.item(), ref_b.item()], rtol=1e-5)


def test_paste_masks_matches_torch():
    rs = np.random.RandomState(0)
    masks = rs.rand(3, 1, 6, 6).astype(np.float32)
    boxes = np.array([[3.2, 4.7, 20.1, 15.9], [-5, -3, 10, 8], [25, 18, 39.6, 29.9]], np.float32)
    out = paste_masks_in_image(tapelab.tensor(masks), tapelab.tensor(boxes), (30, 40))
    assert tuple(out.shape) == (3, 1, 30, 40)
    F = torch.nn.functional
    for m, b, got in zip(masks, boxes, _np(out)):
        padded = F.pad(torch.from_numpy(m), (1, 1, 1, 1))
        scale = 8 / 6
        cx, cy, hw, hh = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2, (b[2] - b[0]) / 2 * scale, (b[3] - b[1]) / 2 * scale
        x0, y0, x1, y1 = (int(v) for v in torch.tensor([cx - hw, cy - hh, cx + hw, cy + hh], dtype=torch.float32))
        resized = F.interpolate(padded[None], size=(y1 - y0 + 1, x1 - x0 + 1), mode="bilinear", align_corners=False)[0, 0]
        ref = torch.zeros(30, 40)
        ys, xs = slice(max(y0, 0), min(y1 + 1, 30)), slice(max(x0, 0), min(x1 + 1, 40))
        ref[ys, xs] = resized[ys.start - y0:ys.stop - y0, xs.start - x0:xs.stop - x0]
        np.testing.assert_allclose(got[0], ref.numpy(), rtol=1e-5, atol=1e-6)


def _targets(with_masks: bool) -> list[dict]:
    boxes = [[[5.0, 10.0, 40.0, 30.0], [40.0, 35.0, 75.0, 55.0]], [[10.0, 20.0, 45.0, 60.0]]]
    targets = [{"boxes": tapelab.tensor(b), "labels": tapelab.tensor(lab)} for b, lab in zip(boxes, ([1, 2], [1]))]
    if with_masks:
        for t, (h, w) in zip(targets, ((60, 80), (70, 50))):
            masks = tapelab.zeros(len(t["boxes"]), h, w, dtype=tapelab.uint8)
            for i, (x0, y0, x1, y1) in enumerate(t["boxes"].long().tolist()):
                masks[i, y0:y1, x0:x1] = 1
            t["masks"] = masks
    return targets


def _images() -> list:
    tapelab.manual_seed(0)
    return [tapelab.rand(3, 60, 80), tapelab.rand(3, 70, 50)]


def test_faster_rcnn_trains_and_detects():
    tapelab.manual_seed(0)
    model = detection.fasterrcnn_mobilenet_v3_large_fpn(weights_backbone=None, num_classes=3, **SMALL,
                                                        rpn_batch_size_per_image=32, box_batch_size_per_image=16)
    losses = model.train()(_images(), _targets(False))
    assert list(losses) == ["loss_classifier", "loss_box_reg", "loss_objectness", "loss_rpn_box_reg"]
    total = sum(losses.values())
    assert all(np.isfinite(v.item()) for v in losses.values())
    total.backward()
    assert model.rpn.head.cls_logits.weight.grad is not None
    assert float(model.roi_heads.box_predictor.cls_score.weight.grad.abs().sum()) > 0
    with tapelab.no_grad():
        out = model.eval()(_images())
    for det, (h, w) in zip(out, ((60, 80), (70, 50))):
        assert list(det) == ["boxes", "labels", "scores"]
        n = det["boxes"].shape[0]
        assert tuple(det["boxes"].shape) == (n, 4) and det["labels"].dtype == tapelab.int64 and n <= 100
        if n:
            b = _np(det["boxes"])
            assert (b[:, 0] >= 0).all() and (b[:, 2] <= w).all() and (b[:, 3] <= h).all()
            assert (_np(det["labels"]) >= 1).all() and (_np(det["labels"]) < 3).all()
            assert (np.diff(_np(det["scores"])) <= 0).all()   # by decreasing score


def test_mask_rcnn_finetuning_pattern():
    """The torchvision finetuning tutorial: new box and mask predictors for the dataset's classes."""
    tapelab.manual_seed(0)
    model = detection.maskrcnn_resnet50_fpn(weights_backbone=None, **SMALL, rpn_batch_size_per_image=32,
                                            box_batch_size_per_image=16)
    in_features = model.roi_heads.box_predictor.cls_score.in_features
    model.roi_heads.box_predictor = detection.FastRCNNPredictor(in_features, 3)
    in_masks = model.roi_heads.mask_predictor.conv5_mask.in_channels
    model.roi_heads.mask_predictor = detection.MaskRCNNPredictor(in_masks, 256, 3)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = tapelab.optim.SGD(params, lr=0.005, momentum=0.9, weight_decay=0.0005)
    losses = model.train()(_images(), _targets(True))
    assert list(losses) == ["loss_classifier", "loss_box_reg", "loss_mask", "loss_objectness", "loss_rpn_box_reg"]
    assert all(np.isfinite(v.item()) for v in losses.values())
    opt.zero_grad()
    sum(losses.values()).backward()
    opt.step()
    assert float(model.roi_heads.mask_predictor.mask_fcn_logits.weight.grad.abs().sum()) > 0
    model.eval().roi_heads.score_thresh = 0.0
    with tapelab.no_grad():
        out = model(_images())
    for det, (h, w) in zip(out, ((60, 80), (70, 50))):
        n = det["boxes"].shape[0]
        assert tuple(det["masks"].shape) == (n, 1, h, w)
        assert ((_np(det["masks"]) >= 0) & (_np(det["masks"]) <= 1)).all()


def test_bad_inputs():
    model = detection.fasterrcnn_mobilenet_v3_large_fpn(weights_backbone=None, num_classes=3, **SMALL).train()
    with pytest.raises(ValueError, match="targets should be passed"):
        model(_images())
    bad = _targets(False)
    bad[1]["boxes"] = tapelab.tensor([[10.0, 20.0, 10.0, 60.0]])
    with pytest.raises(ValueError, match="positive height and width.*index 1"):
        model(_images(), bad)
    body = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5)
    with pytest.raises(ValueError, match="num_classes should be None"):
        detection.FasterRCNN(body, num_classes=3, box_predictor=detection.FastRCNNPredictor(1024, 3))
    with pytest.raises(ValueError, match="num_classes should not be None"):
        detection.FasterRCNN(body)
    with pytest.raises(ValueError, match=r"range \[0,5\]"):
        detection.fasterrcnn_resnet50_fpn(weights_backbone="IMAGENET1K_V1", trainable_backbone_layers=6)


def test_retinanet_state_dict_names_and_anchors():
    model = detection.retinanet_resnet50_fpn(weights_backbone=None, num_classes=5)
    keys = set(model.state_dict())
    assert {"head.classification_head.conv.3.0.weight", "head.classification_head.cls_logits.bias",
            "head.regression_head.bbox_reg.weight", "backbone.fpn.extra_blocks.p6.weight",
            "backbone.fpn.extra_blocks.p7.bias", "backbone.fpn.inner_blocks.2.0.weight"} <= keys
    assert not any(k.startswith(("backbone.fpn.inner_blocks.3", "backbone.body.fc")) for k in keys)
    assert model.anchor_generator.sizes[0] == (32, 40, 50) and model.anchor_generator.num_anchors_per_location()[0] == 9
    prior = model.head.classification_head.cls_logits.bias.detach().numpy()
    np.testing.assert_allclose(prior, -math.log(99), rtol=1e-6)   # starts at the 0.01 prior


def test_retinanet_losses_match_torch():
    from tapelab.vision.models.detection.retinanet import RetinaNetHead
    tapelab.manual_seed(0)
    head = RetinaNetHead(4, 1, 3)
    rs = np.random.RandomState(0)
    logits, deltas = rs.randn(1, 5, 3).astype(np.float32), rs.randn(1, 5, 4).astype(np.float32)
    anchors = np.array([[0, 0, 10, 10], [5, 5, 20, 20], [0, 0, 30, 30], [10, 0, 20, 40], [2, 2, 8, 8]], np.float32)
    gt = np.array([[1, 1, 11, 12], [4, 6, 22, 19]], np.float32)
    matched = np.array([0, 1, -1, -2, 0])
    target = {"boxes": tapelab.tensor(gt), "labels": tapelab.tensor([2, 1])}
    losses = head.compute_loss([target], {"cls_logits": tapelab.tensor(logits), "bbox_regression": tapelab.tensor(deltas)},
                               [tapelab.tensor(anchors)], [tapelab.tensor(matched)])
    x, fg = torch.from_numpy(logits[0]), torch.from_numpy(matched >= 0)
    onehot = torch.zeros(5, 3)
    onehot[torch.where(fg)[0], torch.tensor([2, 1])[torch.from_numpy(matched)[fg]]] = 1.0
    p = torch.sigmoid(x)
    ce = torch.nn.functional.binary_cross_entropy_with_logits(x, onehot, reduction="none")
    p_t = p * onehot + (1 - p) * (1 - onehot)
    focal = (0.25 * onehot + 0.75 * (1 - onehot)) * ce * (1 - p_t) ** 2
    valid = torch.from_numpy(matched != -2)
    expected_cls = focal[valid].sum() / 3
    a, g = torch.from_numpy(anchors)[fg], torch.from_numpy(gt)[torch.from_numpy(matched)[fg]]
    aw, ah, gw, gh = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1], g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
    enc = torch.stack([(g[:, 0] + gw / 2 - a[:, 0] - aw / 2) / aw, (g[:, 1] + gh / 2 - a[:, 1] - ah / 2) / ah,
                       torch.log(gw / aw), torch.log(gh / ah)], 1)
    expected_reg = (torch.from_numpy(deltas[0])[fg] - enc).abs().sum() / 3
    np.testing.assert_allclose([losses["classification"].item(), losses["bbox_regression"].item()],
                               [expected_cls.item(), expected_reg.item()], rtol=1e-5)


def test_retinanet_trains_and_detects():
    tapelab.manual_seed(0)
    model = detection.retinanet_resnet50_fpn(weights_backbone=None, num_classes=4, **SMALL)
    losses = model.train()(_images(), _targets(False))
    assert list(losses) == ["classification", "bbox_regression"]
    assert all(np.isfinite(v.item()) and v.item() > 0 for v in losses.values())
    sum(losses.values()).backward()
    assert float(model.head.regression_head.bbox_reg.weight.grad.abs().sum()) > 0
    model.eval().score_thresh = 0.0
    with tapelab.no_grad():
        out = model(_images())
    for det, (h, w) in zip(out, ((60, 80), (70, 50))):
        assert list(det) == ["boxes", "scores", "labels"] and 0 < det["boxes"].shape[0] <= 300
        b = _np(det["boxes"])
        assert (b >= 0).all() and (b[:, 2] <= w).all() and (b[:, 3] <= h).all()
        assert (np.diff(_np(det["scores"])) <= 0).all()


def test_box_linear_coder_matches_torch():
    from tapelab.vision.models.detection.fcos import BoxLinearCoder
    anchors = np.array([[[0, 0, 8, 8], [8, 8, 24, 24]]], np.float32)
    gt = np.array([[[1, 2, 7, 9], [3, 4, 30, 20]]], np.float32)
    coder = BoxLinearCoder(normalize_by_size=True)
    codes = coder.encode(tapelab.tensor(anchors), tapelab.tensor(gt))
    a, g = torch.from_numpy(anchors), torch.from_numpy(gt)
    cx, cy = (a[..., 0] + a[..., 2]) / 2, (a[..., 1] + a[..., 3]) / 2
    w, h = a[..., 2] - a[..., 0], a[..., 3] - a[..., 1]
    ref = torch.stack([(cx - g[..., 0]) / w, (cy - g[..., 1]) / h, (g[..., 2] - cx) / w, (g[..., 3] - cy) / h], -1)
    np.testing.assert_allclose(_np(codes), ref.numpy(), rtol=1e-6)
    np.testing.assert_allclose(_np(coder.decode(codes, tapelab.tensor(anchors))), gt, rtol=1e-6)


def test_fcos_trains_and_detects():
    tapelab.manual_seed(0)
    model = detection.fcos_resnet50_fpn(weights_backbone=None, num_classes=4, **SMALL)
    keys = set(model.state_dict())
    assert {"head.classification_head.conv.10.weight", "head.regression_head.bbox_ctrness.weight",
            "head.regression_head.conv.9.weight", "backbone.fpn.extra_blocks.p7.weight"} <= keys
    assert model.anchor_generator.num_anchors_per_location() == [1] * 5
    losses = model.train()(_images(), _targets(False))
    assert list(losses) == ["classification", "bbox_regression", "bbox_ctrness"]
    assert all(np.isfinite(v.item()) and v.item() > 0 for v in losses.values())
    sum(losses.values()).backward()
    assert float(model.head.regression_head.bbox_ctrness.weight.grad.abs().sum()) > 0
    model.eval().score_thresh = 0.0
    with tapelab.no_grad():
        out = model(_images())
    for det, (h, w) in zip(out, ((60, 80), (70, 50))):
        assert list(det) == ["boxes", "scores", "labels"] and 0 < det["boxes"].shape[0] <= 100
        assert (np.diff(_np(det["scores"])) <= 0).all()


def test_default_boxes_match_torch():
    from tapelab.vision.models.detection.anchor_utils import DefaultBoxGenerator
    gen = DefaultBoxGenerator([[2], [2, 3]], min_ratio=0.2, max_ratio=0.9)
    assert gen.num_anchors_per_location() == [4, 6]
    np.testing.assert_allclose(gen.scales, [0.2, 0.9, 1.0])
    boxes = gen(ImageList(tapelab.zeros(1, 3, 40, 60), [(40, 60)]), [tapelab.zeros(1, 4, 4, 6), tapelab.zeros(1, 4, 2, 3)])
    expected = []
    for k, ((gh, gw), ratios) in enumerate((((4, 6), [2]), ((2, 3), [2, 3]))):
        s, s2 = gen.scales[k], math.sqrt(gen.scales[k] * gen.scales[k + 1])
        wh = [[s, s], [s2, s2]] + [p for r in ratios for p in ([s * math.sqrt(r), s / math.sqrt(r)],
                                                                 [s / math.sqrt(r), s * math.sqrt(r)])]
        wh = torch.tensor(wh, dtype=torch.float32).clamp(0, 1)
        ys, xs = torch.meshgrid((torch.arange(gh) + 0.5) / gh, (torch.arange(gw) + 0.5) / gw, indexing="ij")
        centres = torch.stack([xs.reshape(-1), ys.reshape(-1)], 1).repeat_interleave(len(wh), 0)
        cxcywh = torch.cat([centres, wh.repeat(gh * gw, 1)], 1)
        scale = torch.tensor([60, 40])
        expected.append(torch.cat([(cxcywh[:, :2] - cxcywh[:, 2:] / 2) * scale, (cxcywh[:, :2] + cxcywh[:, 2:] / 2) * scale], 1))
    np.testing.assert_allclose(_np(boxes[0]), torch.cat(expected).numpy(), rtol=1e-6, atol=1e-5)


def test_ssd_hard_negative_mining_matches_torch():
    tapelab.manual_seed(0)
    model = detection.ssdlite320_mobilenet_v3_large(weights_backbone=None, num_classes=3)
    rs = np.random.RandomState(0)
    logits, deltas = rs.randn(1, 12, 3).astype(np.float32), rs.randn(1, 12, 4).astype(np.float32)
    xy = rs.rand(12, 2).astype(np.float32) * 50
    anchors = np.concatenate([xy, xy + 10], 1)
    matched = np.array([-1, 0, -1, -1, 1, -1, -1, -2, -1, -1, -1, -1])
    target = {"boxes": tapelab.tensor([[1.0, 2.0, 15.0, 14.0], [30.0, 30.0, 45.0, 50.0]]), "labels": tapelab.tensor([2, 1])}
    losses = model.compute_loss([target], {"cls_logits": tapelab.tensor(logits), "bbox_regression": tapelab.tensor(deltas)},
                                [tapelab.tensor(anchors)], [tapelab.tensor(matched)])
    cls_t = torch.zeros(12, dtype=torch.long)
    cls_t[[1, 4]] = torch.tensor([2, 1])
    ce = torch.nn.functional.cross_entropy(torch.from_numpy(logits[0]), cls_t, reduction="none")
    hardest = ce.clone()
    hardest[cls_t > 0] = -float("inf")
    negatives = hardest.topk(6).indices        # three negatives per positive, the highest losses
    expected_cls = (ce[cls_t > 0].sum() + ce[negatives].sum()) / 2
    enc = []
    for i, g in ((1, [1.0, 2.0, 15.0, 14.0]), (4, [30.0, 30.0, 45.0, 50.0])):
        a, g = torch.from_numpy(anchors[i]), torch.tensor(g)
        aw, ah, gw, gh = a[2] - a[0], a[3] - a[1], g[2] - g[0], g[3] - g[1]
        enc.append(torch.stack([10 * (g[0] + gw / 2 - a[0] - aw / 2) / aw, 10 * (g[1] + gh / 2 - a[1] - ah / 2) / ah,
                                5 * torch.log(gw / aw), 5 * torch.log(gh / ah)]))
    expected_reg = torch.nn.functional.smooth_l1_loss(torch.from_numpy(deltas[0, [1, 4]]), torch.stack(enc),
                                                      reduction="sum") / 2
    np.testing.assert_allclose([losses["classification"].item(), losses["bbox_regression"].item()],
                               [expected_cls.item(), expected_reg.item()], rtol=1e-5)


def test_ssdlite_trains_and_detects():
    tapelab.manual_seed(0)
    model = detection.ssdlite320_mobilenet_v3_large(weights_backbone=None, num_classes=3)
    keys = set(model.state_dict())
    assert {"backbone.features.0.0.0.weight", "backbone.features.1.0.1.0.weight", "backbone.extra.3.2.1.running_var",
            "head.classification_head.module_list.5.1.bias", "head.regression_head.module_list.0.0.1.weight"} <= keys
    losses = model.train()(_images(), _targets(False))
    assert list(losses) == ["bbox_regression", "classification"]
    assert all(np.isfinite(v.item()) and v.item() > 0 for v in losses.values())
    sum(losses.values()).backward()
    assert float(model.head.classification_head.module_list[0][1].weight.grad.abs().sum()) > 0
    with tapelab.no_grad():
        out = model.eval()(_images())
    for det, (h, w) in zip(out, ((60, 80), (70, 50))):
        assert list(det) == ["boxes", "scores", "labels"] and 0 < det["boxes"].shape[0] <= 300
        b = _np(det["boxes"])
        assert (b >= 0).all() and (b[:, 2] <= w + 1e-4).all() and (b[:, 3] <= h + 1e-4).all()


def test_roi_align_in_chunks_of_rois(monkeypatch):
    """A detector pools hundreds of RoIs from large maps: roi_align gathers a bounded number at a time."""
    roi_module = importlib.import_module("tapelab.vision.ops.roi_align")   # the package's name is the function
    x = tapelab.randn(2, 3, 9, 11, requires_grad=True)
    rois = tapelab.tensor([[0, 1.0, 1.5, 7.0, 6.0], [1, 0.0, 0.0, 10.0, 8.0], [0, 3.0, 2.0, 4.0, 9.0]])
    whole = roi_module.roi_align(x, rois, (3, 2), 1.0, 2)
    (grad_whole,) = tapelab.autograd.grad(whole.sum(), x)
    monkeypatch.setattr(roi_module, "_GATHER_ELEMENTS", 10)    # one RoI per chunk
    chunked = roi_module.roi_align(x, rois, (3, 2), 1.0, 2)
    (grad_chunked,) = tapelab.autograd.grad(chunked.sum(), x)
    np.testing.assert_array_equal(_np(chunked), _np(whole))
    np.testing.assert_allclose(_np(grad_chunked), _np(grad_whole), rtol=1e-6)


def test_box_loss_kinds_match_torch():
    rs = np.random.RandomState(0)
    xy = rs.rand(4, 2).astype(np.float32) * 20
    anchors = np.concatenate([xy, xy + 5 + rs.rand(4, 2).astype(np.float32) * 10], 1)
    gt = anchors + rs.randn(4, 4).astype(np.float32)
    deltas = rs.randn(4, 4).astype(np.float32) * 0.3
    coder = det_utils.BoxCoder((1.0, 1.0, 1.0, 1.0))
    args = (coder, tapelab.tensor(anchors), tapelab.tensor(gt), tapelab.tensor(deltas))
    enc = _np(coder.encode_single(tapelab.tensor(gt), tapelab.tensor(anchors)))
    d, e = torch.from_numpy(deltas), torch.from_numpy(enc)
    F = torch.nn.functional
    np.testing.assert_allclose(det_utils.box_loss("l1", *args).item(), F.l1_loss(d, e, reduction="sum").item(), rtol=1e-5)
    np.testing.assert_allclose(det_utils.box_loss("smooth_l1", *args, cnf={"beta": 0.5}).item(),
                               F.smooth_l1_loss(d, e, reduction="sum", beta=0.5).item(), rtol=1e-5)
    p = torch.from_numpy(_np(coder.decode_single(tapelab.tensor(deltas), tapelab.tensor(anchors))))
    g = torch.from_numpy(gt)
    lt, rb = torch.max(p[:, :2], g[:, :2]), torch.min(p[:, 2:], g[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(1)
    union = (p[:, 2:] - p[:, :2]).prod(1) + (g[:, 2:] - g[:, :2]).prod(1) - inter
    hull = (torch.max(p[:, 2:], g[:, 2:]) - torch.min(p[:, :2], g[:, :2])).prod(1)
    iou = inter / (union + 1e-7)
    giou = iou - (hull - union) / (hull + 1e-7)
    np.testing.assert_allclose(det_utils.box_loss("giou", *args).item(), (1 - giou).sum().item(), rtol=1e-5)
    with pytest.raises(ValueError, match="Unsupported loss: l2"):
        det_utils.box_loss("l2", *args)


def test_v2_models_train():
    tapelab.manual_seed(0)
    model = detection.maskrcnn_resnet50_fpn_v2(num_classes=3, **SMALL, rpn_batch_size_per_image=32,
                                               box_batch_size_per_image=16)
    assert isinstance(model.roi_heads.box_head, detection.FastRCNNConvFCHead) and len(model.rpn.head.conv) == 2
    losses = model.train()(_images(), _targets(True))
    assert len(losses) == 5 and all(np.isfinite(v.item()) for v in losses.values())
    model = detection.retinanet_resnet50_fpn_v2(num_classes=3, **SMALL)
    assert model.head.regression_head._loss_type == "giou"
    assert "head.classification_head.conv.0.1.weight" in model.state_dict()   # group norm in the towers
    losses = model.train()(_images(), _targets(False))
    assert all(np.isfinite(v.item()) and v.item() > 0 for v in losses.values())


def test_ssd300_vgg16_layout():
    with tapelab.device("meta"):
        model = detection.ssd300_vgg16(weights_backbone=None, num_classes=5)
    keys = set(model.state_dict())
    assert {"backbone.scale_weight", "backbone.features.21.weight", "backbone.extra.0.7.1.weight",
            "backbone.extra.0.7.3.bias", "backbone.extra.4.2.weight", "head.classification_head.module_list.5.weight",
            "head.regression_head.module_list.0.bias"} <= keys
    assert model.backbone.features[16].ceil_mode and model.anchor_generator.num_anchors_per_location() == [4, 6, 6, 6, 4, 4]
    assert [m.out_channels for m in model.head.regression_head.module_list] == [16, 24, 24, 24, 16, 16]
    assert model.backbone.features[0].weight.requires_grad   # untrained: every layer trains


def test_keypoint_heatmap_targets_match_torch():
    from tapelab.vision.models.detection.roi_heads import keypoints_to_heatmap
    rois = np.array([[0.0, 0.0, 28.0, 14.0], [10.0, 5.0, 24.0, 33.0]], np.float32)
    kps = np.array([[[3.2, 7.9, 1], [28.0, 14.0, 1], [30.0, 2.0, 1], [5.0, 5.0, 0]],
                    [[10.0, 5.0, 2], [23.9, 32.9, 1], [9.9, 6.0, 1], [17.0, 19.0, 1]]], np.float32)
    heat, valid = keypoints_to_heatmap(tapelab.tensor(kps), tapelab.tensor(rois), 7)
    r, k = torch.from_numpy(rois), torch.from_numpy(kps)
    x = ((k[..., 0] - r[:, :1]) * (7 / (r[:, 2:3] - r[:, :1]))).floor().long()
    y = ((k[..., 1] - r[:, 1:2]) * (7 / (r[:, 3:4] - r[:, 1:2]))).floor().long()
    x[k[..., 0] == r[:, 2:3]] = 6
    y[k[..., 1] == r[:, 3:4]] = 6
    ok = ((x >= 0) & (y >= 0) & (x < 7) & (y < 7) & (k[..., 2] > 0)).long()
    np.testing.assert_array_equal(_np(valid), ok.numpy())
    np.testing.assert_array_equal(_np(heat), ((y * 7 + x) * ok).numpy())
    assert _np(valid).tolist() == [[1, 1, 0, 0], [1, 1, 0, 1]]


def test_keypoint_rcnn_trains_and_detects():
    tapelab.manual_seed(0)
    model = detection.keypointrcnn_resnet50_fpn(weights_backbone=None, num_keypoints=4, min_size=64, max_size=96,
                                                rpn_batch_size_per_image=32, box_batch_size_per_image=8,
                                                box_positive_fraction=0.5, box_detections_per_img=3)
    assert {"roi_heads.keypoint_head.14.weight", "roi_heads.keypoint_predictor.kps_score_lowres.weight"} <= set(
        model.state_dict())
    targets = _targets(False)
    for t in targets:
        b = t["boxes"]
        centre = (b[:, None, :2] + b[:, None, 2:]) / 2
        t["keypoints"] = tapelab.cat([centre.expand(-1, 4, -1), tapelab.ones(len(b), 4, 1)], dim=2)
        t["labels"] = tapelab.ones(len(b), dtype=tapelab.int64)
    losses = model.train()(_images(), targets)
    assert list(losses)[2] == "loss_keypoint" and all(np.isfinite(v.item()) for v in losses.values())
    model.eval().roi_heads.score_thresh = 0.0
    with tapelab.no_grad():
        out = model(_images())
    for det in out:
        n = det["boxes"].shape[0]
        assert tuple(det["keypoints"].shape) == (n, 4, 3) and tuple(det["keypoints_scores"].shape) == (n, 4)
        if n:
            kp, b = _np(det["keypoints"]), _np(det["boxes"])
            assert (kp[..., 2] == 1).all()
            assert (kp[..., 0] >= b[:, None, 0] - 1).all() and (kp[..., 0] <= b[:, None, 2] + 1).all()
