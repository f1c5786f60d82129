"""tapelab.vision.ops against torchvision.ops: RoIPool, MultiScaleRoIAlign, FeaturePyramidNetwork,
MLP and Conv3dNormActivation (values and input gradients, from tests/fixtures/vision/ops_extra.npz,
written by scripts/vision_references.py), and DropBlock's contract (it is random, so by its properties).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tapelab
from tapelab.vision import ops
from vision_cases import extra_ops_cases

REF = np.load(Path(__file__).parent / "fixtures" / "vision" / "ops_extra.npz")
CASES = extra_ops_cases(tapelab.vision, tapelab)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torchvision(name):
    want = REF[name]
    got = CASES[name]()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_roi_pool_picks_the_first_maximum_and_gives_empty_bins_zero():
    x = tapelab.tensor([[[[1.0, 3.0, 3.0], [0.0, 2.0, 1.0]]]], requires_grad=True)
    out = ops.roi_pool(x, tapelab.tensor([[0, 0.0, 0.0, 2.0, 1.0], [0, 10.0, 10.0, 12.0, 12.0]]), (1, 1))
    assert out.flatten().tolist() == [3.0, 0.0]
    out.sum().backward()
    assert x.grad.flatten().tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]   # torchvision's kernel: first max wins


def test_drop_block_drops_whole_blocks_and_rescales():
    tapelab.manual_seed(0)
    x = tapelab.ones(4, 3, 16, 16, requires_grad=True)
    out = ops.drop_block2d(x, 0.3, 5)
    values = np.unique(out.detach().numpy())
    assert len(values) == 2 and values[0] == 0.0
    kept = (out.detach().numpy() > 0).mean()
    np.testing.assert_allclose(values[1], 1 / kept, rtol=1e-5)   # numel / (eps + kept)
    zero = out.detach().numpy()[0, 0] == 0
    rows, cols = np.nonzero(zero)
    assert zero[rows.min():rows.min() + 5, cols[rows == rows.min()].min():][:, :5].all()   # a 5x5 block
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), out.detach().numpy())
    block = ops.DropBlock3d(0.2, 3)
    y = tapelab.ones(2, 2, 6, 6, 6)
    assert block(y).shape == y.shape
    block.eval()
    assert block(y) is y and ops.drop_block2d(x, 0.5, 3, training=False) is x


def test_drop_block_rejects_what_torchvision_rejects():
    x = tapelab.ones(1, 1, 8, 8)
    with pytest.raises(ValueError, match="drop probability has to be between 0 and 1, but got 1.5"):
        ops.drop_block2d(x, 1.5, 3)
    with pytest.raises(ValueError, match="block size should be odd. Got 4 which is even."):
        ops.drop_block2d(x, 0.1, 4)
    with pytest.raises(ValueError, match="input should be 5 dimensional. Got 4 dimensions."):
        ops.drop_block3d(x, 0.1, 3)
    assert repr(ops.DropBlock2d(0.1, 3)) == "DropBlock2d(p=0.1, block_size=3, inplace=False)"


def test_fpn_state_dict_keys_are_torchvision_s():
    net = ops.FeaturePyramidNetwork([3, 5], 4, norm_layer=tapelab.nn.BatchNorm2d)
    assert list(net.state_dict())[:3] == ["inner_blocks.0.0.weight", "inner_blocks.0.1.weight",
                                          "inner_blocks.0.1.bias"]
    with pytest.raises(TypeError, match="extra_blocks should be of type ExtraFPNBlock"):
        ops.FeaturePyramidNetwork([3], 4, extra_blocks=tapelab.nn.ReLU())


def test_fpn_loads_version_1_keys():
    old = ops.FeaturePyramidNetwork([3, 5], 4)
    state = {k.replace(".0.", ".", 1) if k.split(".")[2] == "0" else k: v for k, v in old.state_dict().items()}
    assert "inner_blocks.1.weight" in state   # torchvision before 0.13: plain convolutions
    new = ops.FeaturePyramidNetwork([3, 5], 4)
    new.load_state_dict(state)
    for (k, a), b in zip(new.state_dict().items(), old.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
