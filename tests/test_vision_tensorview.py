"""TensorView draws a tensor of images (N, C, H, W or C, H, W with C in 1 or 3) as a grid of pictures."""
from __future__ import annotations

import base64

import numpy as np
import pytest

import tapelab

pytest.importorskip("anywidget")
from tapelab.widgets import TensorView  # noqa: E402
from tapelab.widgets.tensor_view import image_grid, summary_html, tensor_summary  # noqa: E402


def test_a_batch_of_images_is_tiled_like_make_grid():
    x = tapelab.zeros(5, 3, 4, 6)
    x[1, 0] = 1.0                              # image 1 is pure red after per-image scaling
    grid = tensor_summary(x)["images"]
    # 5 images, 5 per row (nrow 8 caps at N), 1-pixel padding: 1 + 5 * 7 wide, 1 + 5 high
    assert (grid["rows"], grid["cols"], grid["count"]) == (6, 36, 5)
    px = np.asarray(grid["pixels"], dtype=np.uint8).reshape(6, 36, 3)
    assert px[1:5, 8:14].tolist() == [[[255, 0, 0]] * 6] * 4
    assert px[0].max() == 0 and px[1:5, 1:7].max() == 0   # padding and the constant image 0 are black


def test_grayscale_batch_rows_and_a_single_image():
    x = tapelab.arange(10 * 16, dtype=tapelab.float32).reshape(10, 1, 4, 4)
    grid = image_grid(x.numpy())
    assert (grid["rows"], grid["cols"]) == (1 + 2 * 5, 1 + 8 * 5)
    px = np.asarray(grid["pixels"]).reshape(grid["rows"], grid["cols"], 3)
    assert (px[..., 0] == px[..., 1]).all() and px[1, 1].tolist() == [0, 0, 0] and px[4, 4].tolist() == [255] * 3
    assert image_grid(tapelab.rand(3, 8, 8).numpy())["count"] == 1


def test_big_grids_are_downsampled_and_other_shapes_have_none():
    assert max(image_grid(np.random.rand(64, 3, 32, 32))[k] for k in ("rows", "cols")) <= 128
    for shape in [(4, 2, 8, 8), (8, 8), (2, 3, 1, 5), (5,)]:
        assert tensor_summary(tapelab.rand(*shape))["images"] is None, shape


def test_the_widget_and_its_saved_html_carry_the_grid():
    view = TensorView(tapelab.rand(4, 3, 8, 8), name="batch")
    assert view.data["images"]["count"] == 4
    html = summary_html(view.data)
    src = html.split("src='", 1)[1].split("'", 1)[0]
    bmp = base64.b64decode(src.split(",", 1)[1])
    assert src.startswith("data:image/bmp;base64,") and bmp[:2] == b"BM"
    width, height = np.frombuffer(bmp[18:26], "<i4")
    assert (height, width) == (view.data["images"]["rows"], view.data["images"]["cols"])
