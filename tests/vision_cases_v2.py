"""Cases of the augmentation transforms (v1's newer ones and v2), run on torchvision and on tapelab.vision.

``cases(tv, torch)`` maps a case name to a function of no arguments. The random transforms seed the
generator with ``torch.manual_seed`` inside the case and stack several calls, so a case also checks
that tapelab draws torchvision's parameters in torchvision's order. ``scripts/vision_references.py
transforms_v2`` stores torchvision's results in tests/fixtures/vision/transforms_v2.npz and
tests/test_vision_transforms_v2.py compares tapelab.vision's with them.
"""
from __future__ import annotations

import random

import numpy as np

from vision_cases import as_array, images

def flat(value) -> np.ndarray:
    """One array of a result: a tensor, PIL image, or a (nested) tuple/list of them, flattened and joined."""
    if isinstance(value, (tuple, list)):
        parts = [flat(v).ravel() for v in value]
        return np.concatenate(parts).astype(np.result_type(*parts))
    return as_array(value)


def _inputs(torch):
    rng = np.random.default_rng(21)
    u8 = torch.from_numpy(rng.integers(0, 256, (3, 26, 30), dtype=np.uint8))
    yy, xx = np.mgrid[0:30, 0:34]
    smooth = np.stack([yy * 8, xx * 7, (yy + xx) * 4], 0) % 256 + rng.integers(0, 12, (3, 30, 34))
    su8 = torch.from_numpy(smooth.astype(np.uint8))
    f32 = su8.float() / 255
    batch = torch.from_numpy(rng.integers(0, 256, (2, 3, 24, 28), dtype=np.uint8))
    gray = torch.from_numpy(rng.integers(0, 256, (1, 25, 19), dtype=np.uint8))
    fbatch = torch.from_numpy(rng.random((4, 3, 10, 10), dtype=np.float32))
    labels = torch.from_numpy(rng.integers(0, 10, 4))
    return u8, su8, f32, batch, gray, fbatch, labels


def seeded(torch, fn, calls: int = 4, seed: int = 0):
    """``fn()`` called ``calls`` times after ``torch.manual_seed(seed)``, the results in one array."""
    def run():
        torch.manual_seed(seed)
        return flat([fn() for _ in range(calls)])
    return run


def cases(tv, torch) -> dict:
    u8, su8, f32, batch, gray, fbatch, labels = _inputs(torch)
    pil = images()["smooth"]
    pil_rgb = images()["rgb"]
    F1, T1 = tv.transforms.functional, tv.transforms
    F2, T2 = tv.transforms.v2.functional, tv.transforms.v2
    I = F1.InterpolationMode
    c = {}
    # ---------------------------------------------------------------- v2 functional
    for name, img in (("u8", su8), ("f32", f32), ("pil", pil)):
        c |= {
            f"v2/rotate_{name}": lambda img=img: F2.rotate(img, 30.0),
            f"v2/rotate_{name}_bilinear": lambda img=img: F2.rotate(img, -17.5, I.BILINEAR, fill=0),
            f"v2/rotate_{name}_expand": lambda img=img: F2.rotate(img, 40.0, I.BILINEAR, expand=True),
            f"v2/affine_{name}": lambda img=img: F2.affine(img, 20.0, [3, -2], 0.9, [10.0, 5.0]),
            f"v2/affine_{name}_bilinear": lambda img=img: F2.affine(img, -12.0, [1, 4], 1.1, [4.0, -3.0],
                                                                    I.BILINEAR, fill=0),
            f"v2/brightness_{name}": lambda img=img: F2.adjust_brightness(img, 1.3),
            f"v2/contrast_{name}": lambda img=img: F2.adjust_contrast(img, 0.6),
            f"v2/saturation_{name}": lambda img=img: F2.adjust_saturation(img, 1.7),
            f"v2/hue_{name}": lambda img=img: F2.adjust_hue(img, 0.15),
            f"v2/sharpness_{name}": lambda img=img: F2.adjust_sharpness(img, 1.8),
            f"v2/autocontrast_{name}": lambda img=img: F2.autocontrast(img),
            f"v2/equalize_{name}": lambda img=img: F2.equalize(img),
            f"v2/invert_{name}": lambda img=img: F2.invert(img),
            f"v2/solarize_{name}": lambda img=img, t=0.5 if name == "f32" else 128: F2.solarize(img, t),
            f"v2/posterize_{name}": lambda img=img: F2.posterize(img, 3),
            f"v2/blur_{name}": lambda img=img: F2.gaussian_blur(img, [5, 3], [1.2, 0.7]),
            f"v2/grayscale_{name}": lambda img=img: F2.rgb_to_grayscale(img, 3),
            f"v2/resize_{name}": lambda img=img: F2.resize(img, [17, 25]),
            f"v2/resize_{name}_up": lambda img=img: F2.resize(img, [50, 61]),
            f"v2/resize_{name}_short": lambda img=img: F2.resize(img, 24),
            f"v2/resize_{name}_bicubic": lambda img=img: F2.resize(img, [20, 21], I.BICUBIC),
            f"v2/resize_{name}_nearest": lambda img=img: F2.resize(img, [20, 21], I.NEAREST),
            f"v2/perspective_{name}": lambda img=img: F2.perspective(img, [[0, 0], [33, 0], [33, 29], [0, 29]],
                                                                     [[3, 2], [30, 1], [32, 27], [1, 25]], fill=0),
            f"v2/ten_crop_{name}": lambda img=img: F2.ten_crop(img, [14, 12]),
        }
    c |= {
        "v2/rotate_u8_90": lambda: F2.rotate(u8, 90.0, expand=True),
        "v2/rotate_u8_fill": lambda: F2.rotate(su8, 25.0, I.BILINEAR, fill=[10, 200, 30]),
        "v2/rotate_u8_center": lambda: F2.rotate(su8, 25.0, center=[5, 30], fill=7),
        "v2/rotate_batch": lambda: F2.rotate(batch, 33.0, I.BILINEAR, fill=0),
        "v2/resize_batch": lambda: F2.resize(batch, [15, 30]),
        "v2/resize_gray": lambda: F2.resize(gray, [10, 7]),
        "v2/hue_batch": lambda: F2.adjust_hue(batch, -0.3),
        "v2/to_dtype_u8_f32": lambda: F2.to_dtype(u8, torch.float32, scale=True),
        "v2/to_dtype_f32_u8": lambda: F2.to_dtype(f32, torch.uint8, scale=True),
        "v2/normalize": lambda: F2.normalize(f32, [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]),
        "v2/erase": lambda: F2.erase(u8, 3, 4, 10, 12, torch.tensor([1.0, 2.0, 3.0])[:, None, None]),
        "v2/to_image_pil": lambda: F2.to_image(pil_rgb),
    }
    # ---------------------------------------------------------------- v1 functional (new functions)
    for name, img in (("u8", su8), ("f32", f32), ("pil", pil)):
        c |= {
            f"v1/rotate_{name}": lambda img=img: F1.rotate(img, 30.0),
            f"v1/rotate_{name}_bilinear": lambda img=img: F1.rotate(img, -17.5, I.BILINEAR, fill=0),
            f"v1/rotate_{name}_expand": lambda img=img: F1.rotate(img, 40.0, I.BILINEAR, expand=True),
            f"v1/affine_{name}": lambda img=img: F1.affine(img, 20.0, [3, -2], 0.9, [10.0, 5.0]),
            f"v1/affine_{name}_bilinear": lambda img=img: F1.affine(img, -12.0, [1, 4], 1.1, [4.0, -3.0],
                                                                    I.BILINEAR, fill=0),
            f"v1/sharpness_{name}": lambda img=img: F1.adjust_sharpness(img, 1.8),
            f"v1/autocontrast_{name}": lambda img=img: F1.autocontrast(img),
            f"v1/invert_{name}": lambda img=img: F1.invert(img),
            f"v1/blur_{name}": lambda img=img: F1.gaussian_blur(img, [5, 3], [1.2, 0.7]),
            f"v1/perspective_{name}": lambda img=img: F1.perspective(img, [[0, 0], [33, 0], [33, 29], [0, 29]],
                                                                     [[3, 2], [30, 1], [32, 27], [1, 25]], fill=0),
            f"v1/five_crop_{name}": lambda img=img: F1.five_crop(img, 14),
        }
    for name, img in (("u8", su8), ("pil", pil)):
        c |= {
            f"v1/equalize_{name}": lambda img=img: F1.equalize(img),
            f"v1/posterize_{name}": lambda img=img: F1.posterize(img, 3),
            f"v1/solarize_{name}": lambda img=img: F1.solarize(img, 128),
        }
    for name, img in (("u8", su8), ("f32", f32), ("pil", pil)):
        c[f"v1/gamma_{name}"] = lambda img=img: F1.adjust_gamma(img, 0.7, 1.1)
    c["v2/linear_transformation"] = lambda: T2.LinearTransformation(
        torch.from_numpy(np.random.default_rng(3).standard_normal((48, 48)).astype(np.float32)),
        torch.from_numpy(np.random.default_rng(4).standard_normal(48).astype(np.float32)))(
            tv.tv_tensors.Image(f32[:, :4, :4].contiguous()))
    c["v2/kernel_names"] = lambda: [F2.resize_image(u8, [9, 10]), F2.horizontal_flip_image(u8),
                                    F2.to_dtype_image(u8, torch.float32, scale=True), F2.rotate_mask(u8[:1], 30.0)]
    c["v1/rotate_u8_fill"] = lambda: F1.rotate(su8, 25.0, I.BILINEAR, fill=[10, 200, 30])
    c["v1/erase"] = lambda: F1.erase(u8, 3, 4, 10, 12, torch.tensor([1.0, 2.0, 3.0])[:, None, None])
    # ---------------------------------------------------------------- v2 random transforms, seeded
    jitter = T2.ColorJitter(0.4, 0.4, 0.4, 0.1)
    for name, img in (("u8", u8), ("su8", su8), ("f32", f32), ("pil", pil)):
        c |= {
            f"v2/random_resized_crop_{name}": seeded(torch, lambda img=img: T2.RandomResizedCrop(20)(img)),
            f"v2/color_jitter_{name}": seeded(torch, lambda img=img: jitter(img)),
            f"v2/random_rotation_{name}": seeded(torch, lambda img=img: T2.RandomRotation(15)(img)),
            f"v2/random_affine_{name}": seeded(torch, lambda img=img: T2.RandomAffine(
                10, (0.1, 0.1), (0.9, 1.1), 5, interpolation=I.BILINEAR)(img)),
            f"v2/random_crop_{name}": seeded(torch, lambda img=img: T2.RandomCrop(24, padding=4)(img)),
            f"v2/random_perspective_{name}": seeded(torch, lambda img=img: T2.RandomPerspective(p=0.7)(img)),
            f"v2/gaussian_blur_{name}": seeded(torch, lambda img=img: T2.GaussianBlur(5)(img)),
            f"v2/flips_{name}": seeded(torch, lambda img=img: T2.RandomVerticalFlip()(T2.RandomHorizontalFlip()(img)),
                                       calls=6),
            f"v2/random_grayscale_{name}": seeded(torch, lambda img=img: T2.RandomGrayscale(0.5)(img), calls=6),
            f"v2/pixel_ops_{name}": seeded(torch, lambda img=img, t=0.6 if name == "f32" else 150: T2.Compose([
                T2.RandomInvert(), T2.RandomPosterize(4), T2.RandomSolarize(t),
                T2.RandomAdjustSharpness(2.0), T2.RandomAutocontrast(), T2.RandomEqualize()])(img), calls=6),
        }
    for name, img in (("u8", u8), ("su8", su8), ("f32", f32), ("pil", pil)):
        for policy in T2.AutoAugmentPolicy:
            c[f"v2/autoaugment_{policy.value}_{name}"] = seeded(torch, lambda img=img, p=policy: T2.AutoAugment(p)(img),
                                                               calls=6)
        c[f"v2/randaugment_{name}"] = seeded(torch, lambda img=img: T2.RandAugment()(img), calls=6)
        c[f"v2/augmix_{name}"] = seeded(torch, lambda img=img: T2.AugMix()(img), calls=3)
        c[f"v2/elastic_{name}"] = seeded(torch, lambda img=img: T2.ElasticTransform(30.0, 4.0)(img), calls=2)
        c[f"v2/trivialaugment_{name}"] = seeded(torch, lambda img=img: T2.TrivialAugmentWide()(img), calls=6)
    c |= {
        "v2/gaussian_noise": seeded(torch, lambda: [T2.GaussianNoise()(u8), T2.GaussianNoise(0.1, 0.2)(f32)], calls=2),
        "v2/random_erasing": seeded(torch, lambda: T2.RandomErasing(p=1.0)(f32)),
        "v2/random_erasing_random": seeded(torch, lambda: T2.RandomErasing(p=1.0, value="random")(f32)),
        "v2/random_erasing_u8": seeded(torch, lambda: T2.RandomErasing(p=0.7, value=(10, 20, 30))(u8)),
        "v2/mixup": seeded(torch, lambda: T2.MixUp(alpha=0.4, num_classes=10)(fbatch, labels)),
        "v2/cutmix": seeded(torch, lambda: T2.CutMix(alpha=1.0, num_classes=10)(fbatch, labels)),
        "v2/mixup_or_cutmix": seeded(torch, lambda: T2.RandomChoice(
            [T2.MixUp(alpha=0.2, num_classes=10), T2.CutMix(num_classes=10)])(fbatch, labels), calls=6),
        "v2/batch_pipeline": seeded(torch, lambda: T2.Compose([
            T2.RandomResizedCrop(20), T2.RandomHorizontalFlip(), T2.ColorJitter(0.3, 0.3, 0.3),
            T2.ToDtype(torch.float32, scale=True)])(batch)),
        "v2/train_pipeline": seeded(torch, lambda: T2.Compose([
            T2.ToImage(), T2.RandomResizedCrop(32, antialias=True), T2.RandomHorizontalFlip(),
            T2.TrivialAugmentWide(), T2.ToDtype(torch.float32, scale=True), T2.Normalize([0.5] * 3, [0.25] * 3),
            T2.RandomErasing(0.5), T2.ToPureTensor()])(pil_rgb), calls=6),
        "v2/random_apply_order": seeded(torch, lambda: T2.RandomOrder([
            T2.RandomApply([T2.ColorJitter(0.5)], p=0.6), T2.RandomRotation(20), T2.Grayscale(3)])(su8), calls=6),
        "v2/image_and_mask": seeded(torch, lambda: T2.Compose([
            T2.RandomResizedCrop(24), T2.RandomHorizontalFlip(), T2.RandomRotation(20), T2.ColorJitter(0.4)])(
                tv.tv_tensors.Image(su8), tv.tv_tensors.Mask(su8[0] // 64))),
        "v2/video": seeded(torch, lambda: [T2.Compose([
            T2.RandomResizedCrop(16), T2.RandomHorizontalFlip(), T2.ColorJitter(0.3, 0.3, 0.3, 0.05),
            T2.RandomRotation(10), T2.RandAugment()])(tv.tv_tensors.Video(batch)), T2.MixUp(num_classes=3)(
                tv.tv_tensors.Video(fbatch[:, None].expand(4, 2, 3, 10, 10)), labels % 3)], calls=3),
        "v2/resize_center_crop_pad": lambda: T2.Compose([T2.Resize(30), T2.CenterCrop(26), T2.Pad([1, 2, 3, 4]),
                                                         T2.Grayscale()])(su8),
    }
    # ---------------------------------------------------------------- detection samples: image, boxes, masks, labels
    tvt = tv.tv_tensors

    def det_sample(fmt: str = "XYXY"):
        boxes = torch.tensor([[5.0, 6.0, 30.0, 28.0], [20.0, 3.0, 33.0, 25.0], [10.0, 20.0, 16.0, 29.0], [0, 0, 2, 1]])
        boxes = tvt.BoundingBoxes(boxes, format="XYXY", canvas_size=(30, 34))
        masks = tvt.Mask((su8[:, :, :] > 128).to(torch.uint8).repeat(2, 1, 1)[:4])
        return tvt.Image(su8), {"boxes": T2.ConvertBoundingBoxFormat(fmt)(boxes), "masks": masks,
                                "labels": torch.tensor([1, 2, 3, 4])}

    def det(pipeline, fmt: str = "XYXY"):
        def run():
            img, target = pipeline(*det_sample(fmt))
            return [img, target["boxes"], target["masks"], target["labels"].float()]
        return run
    c |= {
        "v2/det_ssd": seeded(torch, det(T2.Compose([
            T2.RandomPhotometricDistort(p=1), T2.RandomZoomOut(fill={tvt.Image: (123, 117, 104), "others": 0}),
            T2.RandomIoUCrop(), T2.RandomHorizontalFlip(p=1), T2.Resize((24, 28)), T2.ToDtype(torch.float, scale=True),
            T2.SanitizeBoundingBoxes()])), calls=5),
        "v2/det_frcnn_xywh": seeded(torch, det(T2.Compose([
            T2.RandomShortestSize([20, 26, 32], 40), T2.RandomHorizontalFlip(), T2.RandomVerticalFlip(),
            T2.RandomCrop(18, pad_if_needed=True), T2.ClampBoundingBoxes(), T2.SanitizeBoundingBoxes()]), "XYWH"),
            calls=5),
        "v2/det_affine_xywh": seeded(torch, det(T2.Compose([
            T2.RandomRotation(30), T2.RandomAffine(15, (0.1, 0.2), (0.8, 1.2), (5, 10, -5, 5)),
            T2.RandomRotation(45, expand=True), T2.SanitizeBoundingBoxes()]), "XYWH"), calls=4),
        "v2/det_cxcywh": seeded(torch, det(T2.Compose([
            T2.ScaleJitter((32, 32)), T2.RandomResizedCrop(20), T2.Pad(2), T2.CenterCrop(22),
            T2.RandomChannelPermutation(), T2.ConvertBoundingBoxFormat("XYXY")]), "CXCYWH"), calls=5),
    }
    # ---------------------------------------------------------------- v1 random transforms, seeded
    for name, img in (("u8", u8), ("su8", su8), ("f32", f32), ("pil", pil)):
        c |= {
            f"v1/random_rotation_{name}": seeded(torch, lambda img=img: T1.RandomRotation(15)(img)),
            f"v1/random_affine_{name}": seeded(torch, lambda img=img: T1.RandomAffine(
                10, (0.1, 0.1), (0.9, 1.1), 5, interpolation=I.BILINEAR)(img)),
            f"v1/random_perspective_{name}": seeded(torch, lambda img=img: T1.RandomPerspective(p=0.7)(img)),
            f"v1/gaussian_blur_{name}": seeded(torch, lambda img=img: T1.GaussianBlur(5)(img)),
            f"v1/random_resized_crop_{name}": seeded(torch, lambda img=img: T1.RandomResizedCrop(20)(img)),
            f"v1/pixel_ops_{name}": seeded(torch, lambda img=img: T1.Compose([
                T1.RandomInvert(), T1.RandomAdjustSharpness(2.0), T1.RandomAutocontrast()])(img), calls=6),
        }
    for name, img in (("u8", u8), ("su8", su8), ("pil", pil)):
        for policy in T1.AutoAugmentPolicy:
            c[f"v1/autoaugment_{policy.value}_{name}"] = seeded(torch, lambda img=img, p=policy: T1.AutoAugment(p)(img),
                                                               calls=6)
        c[f"v1/randaugment_{name}"] = seeded(torch, lambda img=img: T1.RandAugment()(img), calls=6)
        c[f"v1/augmix_{name}"] = seeded(torch, lambda img=img: T1.AugMix(severity=4)(img), calls=3)
        c[f"v1/elastic_{name}"] = seeded(torch, lambda img=img: T1.ElasticTransform(30.0, 4.0)(img), calls=2)
        c[f"v1/trivialaugment_{name}"] = seeded(torch, lambda img=img: T1.TrivialAugmentWide()(img), calls=6)
        c[f"v1/posterize_solarize_equalize_{name}"] = seeded(torch, lambda img=img: T1.Compose([
            T1.RandomPosterize(4), T1.RandomSolarize(150), T1.RandomEqualize()])(img), calls=6)
    c |= {
        "v1/random_erasing": seeded(torch, lambda: T1.RandomErasing(p=1.0)(f32)),
        "v1/random_erasing_random": seeded(torch, lambda: T1.RandomErasing(p=1.0, value="random")(f32)),
        "v1/random_erasing_u8": seeded(torch, lambda: T1.RandomErasing(p=0.7, value=(10, 20, 30))(u8)),
        "v1/random_choice_order": lambda: (random.seed(7), torch.manual_seed(7), [T1.RandomOrder([
            T1.RandomChoice([T1.RandomRotation(10), T1.RandomInvert(1.0), T1.GaussianBlur(3)], p=[0.5, 0.3, 0.2]),
            T1.RandomAdjustSharpness(2.0, p=1.0), T1.RandomAutocontrast(p=1.0)])(su8) for _ in range(6)])[2],
        "v1/ten_crop": lambda: T1.TenCrop(12, vertical_flip=True)(su8),
        "v1/linear_transformation": lambda: T1.LinearTransformation(
            torch.from_numpy(np.random.default_rng(3).standard_normal((48, 48)).astype(np.float32)),
            torch.from_numpy(np.random.default_rng(4).standard_normal(48).astype(np.float32)))(
                f32[:, :4, :4].contiguous()),
        "v1/train_pipeline": seeded(torch, lambda: T1.Compose([
            T1.RandomResizedCrop(32), T1.RandomHorizontalFlip(), T1.RandAugment(), T1.ToTensor(),
            T1.Normalize([0.5] * 3, [0.25] * 3), T1.RandomErasing()])(pil_rgb), calls=6),
    }
    return c
