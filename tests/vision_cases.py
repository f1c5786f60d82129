"""Cases that run the same code on torchvision (oracle venv) and on tapelab.vision (the tests).

``transform_cases(tv, torch)`` and ``ops_cases(tv, torch)`` map a case name to a function of no
arguments; ``scripts/vision_references.py`` stores each result from torchvision in the fixtures
and ``tests/test_vision_transforms.py`` compares tapelab.vision's result with it.
"""
from __future__ import annotations

import io

import numpy as np

from vision_weights import seeded_input, seeded_value


def images():
    """Small seeded PIL images: random RGB, a smooth RGB gradient, a grayscale one."""
    from PIL import Image
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:40, 0:31]
    smooth = np.stack([yy * 6, xx * 8, (yy + xx) * 3], -1) % 256 + rng.integers(0, 8, (40, 31, 3))
    gray = rng.integers(0, 256, (25, 19), dtype=np.uint8)
    return {"rgb": Image.fromarray(rgb), "smooth": Image.fromarray(smooth.astype(np.uint8)),
            "gray": Image.fromarray(gray)}


def as_array(value) -> np.ndarray:
    """A tensor, PIL image or number as an ndarray (PIL images by their pixels)."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if hasattr(value, "getbands"):
        return np.asarray(value)
    return np.asarray(value)


def transform_cases(tv, torch) -> dict:
    F, T = tv.transforms.functional, tv.transforms
    I = F.InterpolationMode
    cases = {}
    for name, img in images().items():
        t = F.to_tensor(img)
        u = F.pil_to_tensor(img)
        cases |= {
            f"{name}/to_tensor": lambda img=img: F.to_tensor(img),
            f"{name}/pil_to_tensor": lambda img=img: F.pil_to_tensor(img),
            f"{name}/to_tensor_ndarray": lambda img=img: F.to_tensor(np.asarray(img)),
            f"{name}/resize_pil_20": lambda img=img: F.resize(img, 20),
            f"{name}/resize_pil_bicubic": lambda img=img: F.resize(img, [17, 25], I.BICUBIC),
            f"{name}/resize_pil_nearest": lambda img=img: F.resize(img, [17, 25], I.NEAREST),
            f"{name}/resize_pil_lanczos": lambda img=img: F.resize(img, [30, 30], I.LANCZOS),
            f"{name}/resize_pil_max_size": lambda img=img: F.resize(img, 24, max_size=30),
            f"{name}/resize_t_bilinear": lambda t=t: F.resize(t, [17, 25]),
            f"{name}/resize_t_bicubic": lambda t=t: F.resize(t, [17, 25], I.BICUBIC),
            f"{name}/resize_t_up": lambda t=t: F.resize(t, [50, 60]),
            f"{name}/resize_t_no_aa": lambda t=t: F.resize(t, [17, 25], antialias=False),
            f"{name}/resize_t_nearest": lambda t=t: F.resize(t, [17, 25], I.NEAREST),
            f"{name}/resize_u8_bilinear": lambda u=u: F.resize(u, [17, 25]),
            f"{name}/center_crop_pil": lambda img=img: F.center_crop(img, 16),
            f"{name}/center_crop_pil_pad": lambda img=img: F.center_crop(img, [60, 45]),
            f"{name}/center_crop_t": lambda t=t: F.center_crop(t, [15, 12]),
            f"{name}/center_crop_t_pad": lambda t=t: F.center_crop(t, 60),
            f"{name}/crop_pil": lambda img=img: F.crop(img, 3, 5, 10, 12),
            f"{name}/crop_t": lambda t=t: F.crop(t, 3, 5, 10, 12),
            f"{name}/pad_pil_constant": lambda img=img: F.pad(img, [1, 2, 3, 4], fill=7),
            f"{name}/pad_pil_edge": lambda img=img: F.pad(img, 3, padding_mode="edge"),
            f"{name}/pad_pil_reflect": lambda img=img: F.pad(img, [2, 3], padding_mode="reflect"),
            f"{name}/pad_pil_symmetric": lambda img=img: F.pad(img, 2, padding_mode="symmetric"),
            f"{name}/pad_t_constant": lambda t=t: F.pad(t, [1, 2, 3, 4], fill=0.5),
            f"{name}/pad_t_edge": lambda t=t: F.pad(t, 3, padding_mode="edge"),
            f"{name}/pad_t_reflect": lambda t=t: F.pad(t, [2, 3], padding_mode="reflect"),
            f"{name}/pad_t_symmetric": lambda t=t: F.pad(t, [1, 2, 3, 4], padding_mode="symmetric"),
            f"{name}/hflip_pil": lambda img=img: F.hflip(img),
            f"{name}/vflip_t": lambda t=t: F.vflip(t),
            f"{name}/brightness_pil": lambda img=img: F.adjust_brightness(img, 1.3),
            f"{name}/brightness_t": lambda t=t: F.adjust_brightness(t, 1.3),
            f"{name}/contrast_pil": lambda img=img: F.adjust_contrast(img, 0.7),
            f"{name}/contrast_t": lambda t=t: F.adjust_contrast(t, 0.7),
            f"{name}/normalize": lambda t=t: F.normalize(t, [0.5] * t.shape[0], [0.25] * t.shape[0]),
            f"{name}/to_pil_float": lambda t=t: F.to_pil_image(t),
            f"{name}/to_pil_uint8": lambda u=u: F.to_pil_image(u),
            f"{name}/resized_crop": lambda img=img: F.resized_crop(img, 2, 3, 20, 25, [16, 16]),
            f"{name}/compose": lambda img=img: T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor(),
                                                          T.Normalize([0.4] * len(img.getbands()),
                                                                      [0.3] * len(img.getbands()))])(img),
            f"{name}/grayscale3_pil": lambda img=img: F.rgb_to_grayscale(img, 3),
        }
        if name != "gray":
            cases |= {
                f"{name}/contrast_u8": lambda u=u: F.adjust_contrast(u, 1.4),
                f"{name}/saturation_pil": lambda img=img: F.adjust_saturation(img, 1.6),
                f"{name}/saturation_t": lambda t=t: F.adjust_saturation(t, 0.4),
                f"{name}/hue_pil": lambda img=img: F.adjust_hue(img, 0.2),
                f"{name}/hue_pil_neg": lambda img=img: F.adjust_hue(img, -0.3),
                f"{name}/hue_t": lambda t=t: F.adjust_hue(t, 0.2),
                f"{name}/grayscale_pil": lambda img=img: F.rgb_to_grayscale(img),
                f"{name}/grayscale_t": lambda t=t: F.rgb_to_grayscale(t),
                f"{name}/grayscale3_u8": lambda u=u: F.rgb_to_grayscale(u, 3),
                f"{name}/jitter_fixed": lambda img=img: T.ColorJitter(brightness=(1.2, 1.2))(img),
                f"{name}/grayscale_cls": lambda img=img: T.Grayscale(3)(img),
            }
    return cases


def utils_cases(tv, torch) -> dict:
    batch = torch.from_numpy(seeded_input((5, 3, 6, 7), seed=5))
    gray = [torch.from_numpy(seeded_input((1, 4, 4), seed=s)) for s in (1, 2, 3)]
    image = torch.from_numpy((np.random.default_rng(3).integers(0, 256, (3, 30, 40))).astype(np.uint8))
    boxes = torch.tensor([[2.0, 3.0, 20.0, 25.0], [10.0, 5.0, 35.0, 12.0], [0.0, 0.0, 39.0, 29.0]])

    def saved_png():
        buf = io.BytesIO()
        tv.utils.save_image(batch.sigmoid(), buf, format="png", nrow=2)
        from PIL import Image
        return np.asarray(Image.open(io.BytesIO(buf.getvalue())))

    U = tv.utils
    return {
        "make_grid": lambda: U.make_grid(batch, nrow=3, padding=1),
        "make_grid_normalize": lambda: U.make_grid(batch, nrow=2, normalize=True, pad_value=0.5),
        "make_grid_scale_each": lambda: U.make_grid(batch, normalize=True, scale_each=True, value_range=(-1, 1)),
        "make_grid_list": lambda: U.make_grid(gray, nrow=2),
        "save_image": saved_png,
        "boxes": lambda: U.draw_bounding_boxes(image, boxes, colors=["red", "#00ff00", (0, 0, 255)], width=2),
        "boxes_fill": lambda: U.draw_bounding_boxes(image, boxes[:2], fill=True),
        "boxes_float": lambda: U.draw_bounding_boxes(image.float() / 255, boxes[1:], colors="yellow"),
        "boxes_labels": lambda: U.draw_bounding_boxes(image, boxes[:2], labels=["cat", "dog"], colors="white"),
    }


def ops_cases(tv, torch) -> dict:
    rng = np.random.default_rng(11)
    xy = rng.uniform(0, 40, (60, 2))
    wh = rng.uniform(2, 15, (60, 2))
    boxes = torch.from_numpy(np.concatenate([xy, xy + wh], 1).astype(np.float32))
    scores = torch.from_numpy(rng.uniform(0, 1, 60).astype(np.float32))
    idxs = torch.from_numpy(rng.integers(0, 3, 60))
    feats = seeded_input((2, 3, 12, 14), seed=21)
    rois = torch.tensor([[0, 1.0, 1.5, 9.0, 7.0], [1, 0.0, 0.0, 13.0, 11.0], [0, 4.2, 3.3, 6.1, 5.9],
                         [1, -2.0, -1.0, 3.0, 4.0], [0, 10.0, 8.0, 20.0, 16.0]])

    def roi(aligned, ratio, scale, size):
        def run():
            x = torch.from_numpy(feats).requires_grad_(True)
            out = tv.ops.roi_align(x, rois, size, scale, ratio, aligned)
            (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
            return np.concatenate([out.detach().numpy().ravel(), x.grad.numpy().ravel()])
        return run

    def iou_grad():
        b = boxes[:8].clone().requires_grad_(True)
        tv.ops.box_iou(b, boxes[4:12]).sum().backward()
        return b.grad

    def with_grad(fn, *sets):
        """``fn(*boxes)`` and the gradients of a weighted sum of it w.r.t. the first box set."""
        def run():
            first = sets[0].clone().requires_grad_(True)
            out = fn(first, *sets[1:])
            (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
            return np.concatenate([out.detach().numpy().ravel(), first.grad.numpy().ravel()])
        return run

    def focal(reduction):
        def run():
            logits = torch.from_numpy(rng_logits).requires_grad_(True)
            out = O.sigmoid_focal_loss(logits, targets, alpha=0.3, gamma=1.5, reduction=reduction)
            (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
            return np.concatenate([out.detach().numpy().ravel(), logits.grad.numpy().ravel()])
        return run

    def se_block():
        se = O.SqueezeExcitation(3, 2)
        with torch.no_grad():
            for k, p in enumerate(se.parameters()):
                p.copy_(torch.from_numpy(seeded_input(tuple(p.shape), seed=30 + k)))
        return se(torch.from_numpy(feats))

    def frozen_bn():
        bn = O.FrozenBatchNorm2d(3)
        for k, name in enumerate(("weight", "bias", "running_mean")):
            getattr(bn, name).copy_(torch.from_numpy(seeded_input((3,), seed=40 + k)))
        bn.running_var.copy_(torch.from_numpy(np.abs(seeded_input((3,), seed=43)) + 0.5))
        return bn(torch.from_numpy(feats))

    masks = torch.from_numpy(np.stack([np.pad(np.ones((3, 4)), ((2, 5), (1, 5))), np.eye(10)[:, ::-1]]) > 0)
    rng_logits = rng.standard_normal((4, 5)).astype(np.float32)
    targets = torch.from_numpy((rng.uniform(0, 1, (4, 5)) > 0.6).astype(np.float32))
    O = tv.ops
    return {
        "box_convert_xyxy_cxcywh": lambda: O.box_convert(boxes[:9], "xyxy", "cxcywh"),
        "box_convert_cxcywh_xywh": lambda: O.box_convert(boxes[:9], "cxcywh", "xywh"),
        "box_convert_xywh_xyxy": lambda: O.box_convert(boxes[:9], "xywh", "xyxy"),
        "clip_boxes": lambda: O.clip_boxes_to_image(boxes - 5, (30, 25)),
        "remove_small_boxes": lambda: O.remove_small_boxes(boxes, 8.0),
        "masks_to_boxes": lambda: O.masks_to_boxes(masks),
        "generalized_box_iou": with_grad(O.generalized_box_iou, boxes[:8], boxes[4:12]),
        "distance_box_iou": with_grad(O.distance_box_iou, boxes[:8], boxes[4:12]),
        "complete_box_iou": with_grad(O.complete_box_iou, boxes[:8], boxes[4:12]),
        "giou_loss": with_grad(lambda a, b: O.generalized_box_iou_loss(a, b), boxes[:10], boxes[5:15]),
        "diou_loss_mean": with_grad(lambda a, b: O.distance_box_iou_loss(a, b, "mean").reshape(1), boxes[:10], boxes[5:15]),
        "ciou_loss_sum": with_grad(lambda a, b: O.complete_box_iou_loss(a, b, "sum").reshape(1), boxes[:10], boxes[5:15]),
        "focal_none": focal("none"),
        "focal_mean": focal("mean"),
        "squeeze_excitation": se_block,
        "frozen_batch_norm": frozen_bn,
        "permute_and_stochastic_depth_eval": lambda: O.Permute([0, 2, 3, 1])(
            O.stochastic_depth(torch.from_numpy(feats), 0.5, "row", training=False)),
        "box_area": lambda: O.box_area(boxes),
        "box_iou": lambda: O.box_iou(boxes[:20], boxes[10:]),
        "box_iou_grad": iou_grad,
        "nms_05": lambda: O.nms(boxes, scores, 0.5),
        "nms_02": lambda: O.nms(boxes, scores, 0.2),
        "batched_nms": lambda: O.batched_nms(boxes, scores, idxs, 0.3),
        "roi_align": roi(False, -1, 1.0, (3, 3)),
        "roi_align_aligned": roi(True, 2, 0.5, (2, 4)),
        "roi_align_ratio": roi(False, 3, 0.75, 4),
    }


# builders whose keys, shapes and size are stored in models_extra.npz, with the keyword arguments of the published
# configuration (googlenet's published size is without its training-only auxiliary heads)
EXTRA_SIZES = {
    "mobilenet_v3_large": {}, "mobilenet_v3_small": {},
    **{f"efficientnet_b{k}": {} for k in range(8)},
    "efficientnet_v2_s": {}, "efficientnet_v2_m": {}, "efficientnet_v2_l": {},
    "convnext_tiny": {}, "convnext_small": {}, "convnext_base": {}, "convnext_large": {},
    **{f"shufflenet_v2_{w}": {} for w in ("x0_5", "x1_0", "x1_5", "x2_0")},
    **{f"regnet_{v}_{f}": {} for v in "xy" for f in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf")},
    "regnet_y_128gf": {},
    "googlenet": {"aux_logits": False}, "inception_v3": {},
    "mnasnet0_5": {}, "mnasnet0_75": {}, "mnasnet1_0": {}, "mnasnet1_3": {},
    "resnet101": {}, "resnet152": {}, "resnext50_32x4d": {}, "resnext101_32x8d": {}, "resnext101_64x4d": {},
    "wide_resnet50_2": {}, "wide_resnet101_2": {},
    "swin_t": {}, "swin_s": {}, "swin_b": {}, "swin_v2_t": {}, "swin_v2_s": {}, "swin_v2_b": {},
    "maxvit_t": {},
}
# builders whose logits and gradients are stored in models_extra.npz: (keyword arguments, input shape, train step too)
EXTRA_NUMERIC = {
    "mobilenet_v3_large": ({}, (1, 3, 32, 32), False),
    # no dropout, so the train step is exact; 64x64, as batch statistics of 2x1x1 maps are ill-conditioned
    "mobilenet_v3_small": ({"dropout": 0.0}, (2, 3, 64, 64), True),
    "efficientnet_b0": ({}, (1, 3, 32, 32), False),
    "efficientnet_v2_s": ({}, (1, 3, 32, 32), False),
    "convnext_tiny": ({}, (1, 3, 32, 32), False),
    "shufflenet_v2_x0_5": ({}, (2, 3, 64, 64), True),
    "regnet_y_400mf": ({}, (1, 3, 32, 32), False),
    "regnet_x_400mf": ({}, (1, 3, 32, 32), False),
    "googlenet": ({"transform_input": True}, (1, 3, 64, 64), False),
    "inception_v3": ({"transform_input": True}, (1, 3, 75, 75), False),   # 75x75: its smallest input
    "mnasnet0_5": ({}, (1, 3, 32, 32), False),
    "resnext50_32x4d": ({}, (1, 3, 32, 32), False),
    # 64x64: the first two stages (16x16, 8x8) pad to whole windows and shift, with the shift mask
    "swin_t": ({}, (1, 3, 64, 64), False),
    "swin_v2_t": ({}, (1, 3, 64, 64), False),
}
# models built from their class, whose logits and gradients are stored in models_extra.npz: (class, keyword
# arguments, input shape). maxvit_t's 7x7 windows need a 224x224 input; with 2x2 windows its widths and depths
# run at 64x64 (maps of 32, 16, 8, 4, 2: window and grid attention both over several groups)
EXTRA_CLASS_NUMERIC = {
    "maxvit_t_p2": ("MaxVit", {"input_size": (64, 64), "stem_channels": 64, "partition_size": 2,
                               "block_channels": [64, 128, 256, 512], "block_layers": [2, 2, 5, 2], "head_dim": 32,
                               "stochastic_depth_prob": 0.2, "num_classes": 10}, (1, 3, 64, 64)),
}
# train steps with auxiliary classifiers (no dropout, so they are exact): keyword arguments, input shape,
# and the auxiliary parameters whose gradients are compared
EXTRA_AUX = {
    "googlenet": ({"dropout": 0.0, "dropout_aux": 0.0}, (2, 3, 64, 64), ["aux1.fc2.weight", "aux2.fc2.weight"]),
    # Inception's auxiliary head needs the 17x17 grid of a 299x299 input (runs with --long)
    "inception_v3": ({"dropout": 0.0}, (2, 3, 299, 299), ["AuxLogits.fc.weight", "AuxLogits.conv1.conv.weight"]),
}
# parameters whose gradients (leading values) are stored beside those of model_outputs for the eval-mode
# checks above: the attention's own parameters, in a shifted (odd) block where there is one
EXTRA_PARAM_GRADS = {
    "swin_t": ["features.1.1.attn.relative_position_bias_table", "features.3.1.attn.qkv.weight"],
    "swin_v2_t": ["features.1.1.attn.logit_scale", "features.1.1.attn.cpb_mlp.0.weight",
                  "features.1.1.attn.qkv.bias"],   # the key third of the qkv bias gets no gradient
    "maxvit_t_p2": ["blocks.0.layers.0.layers.window_attention.attn_layer.1.relative_position_bias_table",
                    "blocks.1.layers.1.layers.grid_attention.attn_layer.1.to_qkv.weight"],
}
EXTRA_AUX_LONG = {"inception_v3"}
EXTRA_GRAD_SAMPLE = 256
EXTRA_INPUT_STRIDE = 16   # every 16th input-gradient value is stored (whole gradients would be 0.7 MB)


def aux_outputs(torch, model, x: np.ndarray, aux_params: list[str], grad_sample: int = 256,
                input_stride: int = 1) -> dict:
    """A train step of a model that returns (logits, *aux logits): every output, the input gradient and
    the leading gradient values of ``aux_params``, for sum(output_i * projection_i)."""
    model.train(True)
    model.zero_grad(set_to_none=True)
    inp = torch.from_numpy(x).requires_grad_(True)
    outputs = model(inp)
    loss = 0
    for i, o in enumerate(outputs):
        loss = loss + (o * torch.from_numpy(seeded_input(tuple(o.shape), seed=7 + i))).sum()
    loss.backward()
    params = dict(model.named_parameters())
    out = {f"output{i}": o.detach().numpy().copy() for i, o in enumerate(outputs)}
    out["input_grad"] = inp.grad.numpy().ravel()[::input_stride].copy()
    for i, n in enumerate(aux_params):
        out[f"aux_grad{i}"] = params[n].grad.numpy().ravel()[:grad_sample].copy()
    return out


def _seeded_module(torch, module):
    """``module`` with every state_dict entry set to its seeded value (in place, so metadata stays)."""
    with torch.no_grad():
        for k, v in module.state_dict().items():
            v.copy_(torch.from_numpy(seeded_value(k, tuple(v.shape), not v.is_floating_point())))
    return module


def _with_grads(torch, fn, *arrays):
    """``fn`` of tensors made from ``arrays`` -> its outputs, flattened, then the gradients of
    sum(output * linspace) with respect to each input (zeros for an input it does not use)."""
    def run():
        inputs = [torch.from_numpy(a).requires_grad_(True) for a in arrays]
        outs = fn(*inputs)
        outs = list(outs.values()) if isinstance(outs, dict) else [outs]
        loss = 0
        for o in outs:
            loss = loss + (o * torch.linspace(-1, 1, o.numel()).reshape(o.shape)).sum()
        loss.backward()
        grads = [np.zeros(i.numel(), np.float32) if i.grad is None else i.grad.numpy().ravel() for i in inputs]
        return np.concatenate([o.detach().numpy().ravel() for o in outs] + grads)
    return run


def extra_ops_cases(tv, torch) -> dict:
    """RoIPool, MultiScaleRoIAlign, FeaturePyramidNetwork, MLP and Conv3dNormActivation on small cases."""
    O, nn = tv.ops, torch.nn
    feats = seeded_input((2, 3, 12, 14), seed=21)
    rois = torch.tensor([[0, 1.0, 1.5, 9.0, 7.0], [1, 0.0, 0.0, 13.0, 11.0], [0, 4.2, 3.3, 6.1, 5.9],
                         [1, -2.0, -1.0, 3.0, 4.0], [0, 10.0, 8.0, 20.0, 16.0], [1, 30.0, 30.0, 40.0, 40.0],
                         [0, 2.5, 2.5, 2.5, 2.5]])
    pyramid = [seeded_input((2, 2, s, s), seed=50 + s) for s in (64, 32, 16)]
    rng = np.random.default_rng(12)
    centre = rng.uniform(20, 236, (9, 2))
    side = np.array([12, 30, 56, 80, 112, 150, 224, 250, 40])[:, None] * rng.uniform(0.7, 1.3, (9, 2))
    boxes = np.clip(np.concatenate([centre - side / 2, centre + side / 2], 1), 0, 255).astype(np.float32)

    def multiscale(*maps, names=("feat1", "feat2", "feat3"), sampling=2):
        pooler = O.MultiScaleRoIAlign([n for n in names if n != "skip"], (3, 2), sampling)
        x = dict(zip(names, maps))
        return pooler(x, [torch.from_numpy(boxes[:5]), torch.from_numpy(boxes[5:])], [(256, 256), (240, 250)])

    def fpn(extra):
        net = _seeded_module(torch, O.FeaturePyramidNetwork([3, 5, 6], 4, extra_blocks=extra))
        return lambda *maps: net(dict(zip(["a", "b", "c"], maps)))

    fpn_in = [seeded_input((2, c, s, s + 1), seed=60 + c) for c, s in ((3, 16), (5, 8), (6, 4))]
    F = O.feature_pyramid_network
    mlp = _seeded_module(torch, O.MLP(5, [7, 6, 3], norm_layer=nn.LayerNorm, activation_layer=nn.GELU))
    conv3 = _seeded_module(torch, O.Conv3dNormActivation(2, 4, kernel_size=(3, 1, 3), stride=(1, 2, 1))).eval()
    return {
        "roi_pool": _with_grads(torch, lambda x: O.roi_pool(x, rois, (3, 2)), feats),
        "roi_pool_scaled": _with_grads(torch, lambda x: O.RoIPool(4, 0.5)(x, rois), feats),
        "roi_pool_list": _with_grads(torch, lambda x: O.roi_pool(x, [rois[:3, 1:], rois[3:, 1:]], 2, 0.75), feats),
        "multiscale_roi_align": _with_grads(torch, multiscale, *pyramid),
        "multiscale_roi_align_one_level": _with_grads(
            torch, lambda a, b: multiscale(a, b, names=("feat1", "skip"), sampling=-1), pyramid[0], pyramid[1]),
        "fpn_maxpool": _with_grads(torch, fpn(F.LastLevelMaxPool()), *fpn_in),
        "fpn_p6p7": _with_grads(torch, fpn(F.LastLevelP6P7(6, 4)), *fpn_in),
        "mlp": _with_grads(torch, mlp, seeded_input((4, 5), seed=70)),
        "conv3d_norm_activation": _with_grads(torch, conv3, seeded_input((1, 2, 5, 6, 7), seed=71)),
    }


def param_grads(model, names: list[str], grad_sample: int) -> dict:
    """The leading gradient values of the named parameters, after a backward (``grad:<name>`` keys)."""
    params = dict(model.named_parameters())
    return {f"grad:{n}": params[n].grad.numpy().ravel()[:grad_sample].copy() for n in names}


def model_outputs(torch, model, x: np.ndarray, train: bool = False, grad_sample: int = 4096,
                  input_stride: int = 1) -> dict:
    """Logits, input gradient (every ``input_stride``-th value; the whole tensor when 1) and three
    parameter gradients (leading values) of sum(logits * projection)."""
    model.train(train)
    model.zero_grad(set_to_none=True)
    inp = torch.from_numpy(x).requires_grad_(True)
    logits = model(inp)
    proj = torch.from_numpy(seeded_input(tuple(logits.shape), seed=7))
    (logits * proj).sum().backward()
    params = dict(model.named_parameters())
    names = list(params)
    picked = [names[0], names[-2], names[-1]]
    grad = inp.grad.numpy()
    out = {"logits": logits.detach().numpy().copy(),
           "input_grad": (grad if input_stride == 1 else grad.ravel()[::input_stride]).copy(),
           "grad_names": np.array(picked)}
    for i, n in enumerate(picked):   # copies: .numpy() shares memory with a grad a later backward adds to
        out[f"param_grad{i}"] = params[n].grad.numpy().ravel()[:grad_sample].copy()
    return out
