"""tapelab.vision's transforms, utils and ops against torchvision's outputs on the same inputs.

The reference values come from torchvision (tests/fixtures/vision/transforms.npz, written by
scripts/vision_references.py in the oracle venv); tests/vision_cases.py holds the calls, run here
with tapelab.vision. Random transforms are checked by their seed-independent properties.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL")

import tapelab  # noqa: E402
import tapelab.vision as tv  # noqa: E402
from vision_cases import as_array, images, ops_cases, transform_cases, utils_cases  # noqa: E402

REF = np.load(Path(__file__).parent / "fixtures" / "vision" / "transforms.npz")
CASES = transform_cases(tv, tapelab) | utils_cases(tv, tapelab) | ops_cases(tv, tapelab)

# integer outputs resampled in float may round the other way where the float sum lands on .5
ROUNDING: set[str] = set()


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torchvision(name):
    value = CASES[name]()
    got, want = as_array(value), REF[name]
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    if name + "/mode" in REF.files:
        assert value.mode == str(REF[name + "/mode"])
    if got.dtype.kind in "iub" and name.rsplit("/", 1)[-1] in ROUNDING:
        assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1, name
    elif got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_every_reference_is_checked():
    refs = {k for k in REF.files if not k.endswith("/mode")}
    assert refs == set(CASES)


def test_random_transforms_are_seeded_by_tapelab():
    T = tv.transforms
    img = images()["rgb"]
    pipeline = T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4, 0.1),
                          T.RandomCrop(12, padding=2), T.ToTensor()])
    tapelab.manual_seed(3)
    first = pipeline(img)
    tapelab.manual_seed(3)
    again = pipeline(img)
    assert first.shape == (3, 12, 12)
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    tapelab.manual_seed(4)
    assert not np.array_equal(pipeline(img).numpy(), first.numpy())


def test_random_resized_crop_params_in_range():
    T = tv.transforms
    img = images()["smooth"]   # 31 wide, 40 high
    tapelab.manual_seed(0)
    for _ in range(50):
        i, j, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
        assert 0 <= i and i + h <= 40 and 0 <= j and j + w <= 31
        assert 0.08 * 40 * 31 * 0.8 <= h * w <= 40 * 31


def test_random_flip_and_crop_are_the_functional_forms():
    T, F = tv.transforms, tv.transforms.functional
    img = images()["rgb"]
    assert np.array_equal(np.asarray(T.RandomHorizontalFlip(p=1.0)(img)), np.asarray(F.hflip(img)))
    assert T.RandomHorizontalFlip(p=0.0)(img) is img
    tapelab.manual_seed(1)
    out = T.RandomCrop(10)(img)
    tapelab.manual_seed(1)
    i, j, h, w = T.RandomCrop.get_params(img, (10, 10))
    assert np.array_equal(np.asarray(out), np.asarray(F.crop(img, i, j, h, w)))


def test_color_jitter_order_and_ranges():
    T = tv.transforms
    jitter = T.ColorJitter(brightness=0.5, hue=0.1)
    assert jitter.brightness == (0.5, 1.5) and jitter.hue == (-0.1, 0.1) and jitter.contrast is None
    tapelab.manual_seed(0)
    order, b, c, s, h = T.ColorJitter.get_params(jitter.brightness, None, None, jitter.hue)
    assert sorted(order) == [0, 1, 2, 3] and 0.5 <= b <= 1.5 and c is None and -0.1 <= h <= 0.1
    with pytest.raises(ValueError, match="hue"):
        T.ColorJitter(hue=0.7)


def test_errors_name_the_function():
    F = tv.transforms.functional
    with pytest.raises(TypeError, match="resize: img should be a PIL Image or a Tensor"):
        F.resize([1, 2], 3)
    with pytest.raises(TypeError, match="normalize: input tensor should be a float tensor"):
        F.normalize(tapelab.zeros(3, 2, 2, dtype=tapelab.uint8), [0.5] * 3, [0.5] * 3)
    with pytest.raises(ValueError, match="adjust_hue"):
        F.adjust_hue(images()["rgb"], 0.9)


def test_roi_align_gradient_matches_finite_differences():
    x = tapelab.randn(1, 2, 6, 7, dtype=tapelab.float64, requires_grad=True)
    rois = tapelab.tensor([[0, 0.5, 1.0, 5.0, 4.5]], dtype=tapelab.float64)
    assert tapelab.autograd.gradcheck(lambda x: tv.ops.roi_align(x, rois, 2, 1.0, 2), (x,))
