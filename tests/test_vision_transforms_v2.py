"""tapelab.vision's augmentation transforms (v1's newer ones, v2, tv_tensors) against torchvision.

tests/fixtures/vision/transforms_v2.npz holds torchvision 0.28's results of tests/vision_cases_v2.py
(written by ``scripts/vision_references.py transforms_v2``); the random cases seed the generator, so
they also check that the parameters are drawn as torchvision draws them. Results are bit for bit
torchvision's but for the cases listed below.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL")

import tapelab  # noqa: E402
import tapelab.vision as tv  # noqa: E402
import tapelab.vision.transforms.v2  # noqa: E402,F401
from vision_cases_v2 import cases, flat  # noqa: E402

REF = np.load(Path(__file__).parent / "fixtures" / "vision" / "transforms_v2.npz")
CASES = cases(tv, tapelab)

# float32 results that go through ops the engine rounds otherwise than PyTorch in the last bit: antialiased
# interpolate (resize), softmax (v2's Gaussian kernel, so v2's blur and elastic displacement), pow and mm,
# exp under 64 numbers (v1's Gaussian kernel: numpy's function, not MKL's, for a small call's cost)
# (within 3e-7 of values in [0, 1]; elastic's sampling points move by as much, within 5e-6)
LAST_BIT = {"v2/blur_f32", "v2/gaussian_blur_f32", "v1/blur_f32", "v1/gaussian_blur_f32", "v2/elastic_f32",
            "v2/random_resized_crop_f32",
            "v1/random_resized_crop_f32", "v2/resize_f32", "v2/resize_f32_up", "v2/resize_f32_short",
            "v2/resize_f32_bicubic", "v1/linear_transformation", "v2/linear_transformation", "v1/gamma_f32"}
# v1 resizes uint8 tensors through the float antialiased interpolation: a last-bit difference can round to the
# next integer
OFF_BY_ONE = {"v1/random_resized_crop_u8", "v1/random_resized_crop_su8"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torchvision(name):
    got, want = flat(CASES[name]()), REF[name]
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    if name in LAST_BIT:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 if 'elastic' in name else 1e-6, err_msg=name)
    elif name in OFF_BY_ONE:
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01, name
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_every_reference_is_checked():
    assert set(REF.files) == set(CASES)


def test_tv_tensors_keep_their_type_and_masks_skip_colour():
    T = tv.transforms.v2
    img = tv.tv_tensors.Image(tapelab.randint(0, 256, (3, 20, 24), dtype=tapelab.uint8))
    mask = tv.tv_tensors.Mask(tapelab.zeros(20, 24, dtype=tapelab.int64))
    out_img, out_mask = T.Compose([T.RandomHorizontalFlip(1.0), T.ColorJitter(0.5), T.Resize(10)])(img, mask)
    assert type(out_img) is tv.tv_tensors.Image and type(out_mask) is tv.tv_tensors.Mask
    assert out_img.shape == (3, 10, 12) and out_mask.shape == (10, 12)
    assert type(img + 1) is tapelab.Tensor and type(img.clone()) is tv.tv_tensors.Image
    plain = T.ToPureTensor()(out_img)
    assert type(plain) is tapelab.Tensor


def test_only_the_first_plain_tensor_is_an_image():
    T = tv.transforms.v2
    x, other = tapelab.rand(3, 8, 8), tapelab.rand(3, 8, 8)
    out, passed = T.RandomHorizontalFlip(1.0)(x, other)
    assert np.array_equal(out.numpy(), x.flip(-1).numpy()) and passed is other
    sample = {"image": x, "label": 3}
    assert T.RandomVerticalFlip(1.0)(sample)["label"] == 3


def test_boxes_are_refused_where_not_supported_not_passed_through():
    T = tv.transforms.v2
    boxes = tv.tv_tensors.BoundingBoxes([[1, 2, 5, 6]], format="XYXY", canvas_size=(8, 8))
    with pytest.raises(NotImplementedError):
        T.RandomPerspective(p=1.0)(tv.tv_tensors.Image(tapelab.rand(3, 8, 8)), boxes)
    flipped = T.RandomHorizontalFlip(1.0)(boxes)
    assert flipped.tolist() == [[3.0, 2.0, 7.0, 6.0]] and flipped.canvas_size == (8, 8)


def test_custom_v2_transform():
    T = tv.transforms.v2

    class AddDraw(T.Transform):
        def make_params(self, flat_inputs):
            return {"v": float(tapelab.rand(()).item())}

        def transform(self, inpt, params):
            return inpt + params["v"]

    tapelab.manual_seed(5)
    a = AddDraw()(tapelab.zeros(2))
    tapelab.manual_seed(5)
    assert np.array_equal(a.numpy(), AddDraw()(tapelab.zeros(2)).numpy())


def test_repr_is_torchvisions():
    T = tv.transforms.v2
    pipeline = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4),
                          T.ToDtype(tapelab.float32, scale=True), T.Normalize([0.5] * 3, [0.2] * 3), T.RandomErasing(),
                          T.RandAugment(), T.RandomRotation(15)])
    expected = (
        "Compose(\n"
        "      RandomResizedCrop(size=(32, 32), scale=(0.08, 1.0), ratio=(0.75, 1.3333333333333333)"
        ", interpolation=bilinear, antialias=True)\n"
        "      RandomHorizontalFlip(p=0.5)\n"
        "      ColorJitter(brightness=(0.6, 1.4), contrast=(0.6, 1.4))\n"
        "      ToDtype(scale=True)\n"
        "      Normalize(mean=[0.5, 0.5, 0.5], std=[0.2, 0.2, 0.2], inplace=False)\n"
        "      RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0.0], inplace=False)\n"
        "      RandAugment(interpolation=nearest, num_ops=2, magnitude=9, num_magnitude_bins=31)\n"
        "      RandomRotation(degrees=[-15.0, 15.0], interpolation=nearest, expand=False, fill=0)\n"
        ")\n")
    assert repr(pipeline) == expected.rstrip("\n")


def test_v1_reprs_are_torchvisions():
    T = tv.transforms
    got = [repr(t) for t in (T.RandomRotation(15), T.RandomAffine(10, (0.1, 0.1), (0.9, 1.1), 5), T.RandomErasing(),
                             T.RandomPosterize(4), T.RandomChoice([T.RandomInvert()]), T.AutoAugment())]
    assert got == ["RandomRotation(degrees=[-15.0, 15.0], interpolation=nearest, expand=False, fill=0)",
                   "RandomAffine(degrees=[-10.0, 10.0], translate=(0.1, 0.1), scale=(0.9, 1.1), shear=[-5.0, 5.0])",
                   "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False)",
                   "RandomPosterize(bits=4,p=0.5)", "RandomChoice(\n    RandomInvert(p=0.5)\n)(p=None)",
                   "AutoAugment(policy=AutoAugmentPolicy.IMAGENET, fill=None)"]
