"""torchvision's tagged tensors without the dispatcher's slow path: ``TVTensor`` is not asked by every op
(``_asked_by_ops = False``), so importing ``tapelab.vision`` (every CV program's ``import torchvision``)
leaves the ``__torch_function__`` hook off; ops on an Image give plain Tensors and the methods that keep
the tag (clone, to, detach, requires_grad_) keep it with its metadata, as torchvision's."""
from __future__ import annotations

import subprocess
import sys

import tapelab
from tapelab.vision import tv_tensors


def test_importing_vision_leaves_the_function_hook_off():
    code = ("import tapelab, tapelab.vision, tapelab.vision.transforms.v2\n"
            "from tapelab.base.dispatch_state import STATE\n"
            "print(STATE.functions is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "True"


def test_ops_unwrap_and_tag_keeping_methods_rewrap():
    image = tv_tensors.Image(tapelab.rand(3, 4, 5))
    assert type(image + 1) is tapelab.Tensor and type(image.flip(-1)) is tapelab.Tensor
    for kept in (image.clone(), image.to(tapelab.float64), image.detach(), image.requires_grad_()):
        assert type(kept) is tv_tensors.Image
    boxes = tv_tensors.BoundingBoxes([[0, 0, 2, 2]], format="XYXY", canvas_size=(4, 5))
    copy = boxes.clone()
    assert type(copy) is tv_tensors.BoundingBoxes and copy.format is boxes.format and copy.canvas_size == (4, 5)
