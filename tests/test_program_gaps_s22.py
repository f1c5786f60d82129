"""Gaps found in session 22 running researchers' libraries (stable-baselines3, kornia,
segmentation_models_pytorch, peft) under tapelab, each pattern written directly and checked
against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _outcome(fn, lib):
    """``fn(lib)``'s shape and values, or its exception type and message."""
    try:
        r = fn(lib)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).split("\n")[0]
    r = r[0] if isinstance(r, tuple) else r
    return tuple(r.shape), np.round(r.detach().numpy().astype(np.float64), 6).tolist()


def _data(lib, *shape):
    return lib.tensor(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) % 7)


# ---------------------------------------------------------------- pooling's argument checks
# smp's PAN decoder max-pools a 1x1 map with a 2x2 window (a 64x64 input through a resnet encoder):
# PyTorch raises its "Output size is too small"; tapelab failed inside numpy's window view.
_POOL_CASES = {
    # too small an output
    "mp1": lambda L, F: F.max_pool1d(_data(L, 2, 1, 1), 2),
    "mp1_grad": lambda L, F: F.max_pool1d(_data(L, 2, 1, 1).requires_grad_(), 2),
    "mp1_idx": lambda L, F: F.max_pool1d(_data(L, 2, 1, 1), 2, return_indices=True),
    "mp2": lambda L, F: F.max_pool2d(_data(L, 2, 1, 1, 1), 2),
    "mp2_unbatched": lambda L, F: F.max_pool2d(_data(L, 3, 1, 5), 2),
    "mp2_rect": lambda L, F: F.max_pool2d(_data(L, 1, 3, 1, 1), (2, 1)),
    "mp2_dilated": lambda L, F: F.max_pool2d(_data(L, 1, 1, 3, 3), 2, dilation=3),
    "mp2_module": lambda L, F: L.nn.MaxPool2d(2)(_data(L, 2, 1, 1, 1)),
    "mp3": lambda L, F: F.max_pool3d(_data(L, 2, 1, 1, 1, 1), 2),
    "mp3_idx": lambda L, F: F.max_pool3d(_data(L, 2, 1, 1, 1, 1), 2, return_indices=True),
    "ap1": lambda L, F: F.avg_pool1d(_data(L, 2, 1, 1), 2),
    "ap2": lambda L, F: F.avg_pool2d(_data(L, 2, 1, 1, 1), 2),
    "ap2_rect": lambda L, F: F.avg_pool2d(_data(L, 1, 2, 5, 1), (2, 2)),
    "ap3": lambda L, F: F.avg_pool3d(_data(L, 2, 1, 1, 1, 1), 2),
    "ap3_padded": lambda L, F: F.avg_pool3d(_data(L, 2, 1, 1, 3, 3), 2, padding=1),
    "lp1": lambda L, F: F.lp_pool1d(_data(L, 2, 1, 1), 2, 2),
    "lp2": lambda L, F: F.lp_pool2d(_data(L, 2, 1, 1, 1), 2, 2),
    "lp3": lambda L, F: F.lp_pool3d(_data(L, 2, 1, 1, 1, 1), 2, 2),
    # kernel, stride, padding, dilation out of range
    "mp1_k0": lambda L, F: F.max_pool1d(_data(L, 2, 1, 4), 0),
    "mp1_s0": lambda L, F: F.max_pool1d(_data(L, 2, 1, 4), 2, 0),
    "mp1_pneg": lambda L, F: F.max_pool1d(_data(L, 2, 1, 4), 2, 1, -1),
    "mp1_d0": lambda L, F: F.max_pool1d(_data(L, 2, 1, 4), 2, dilation=0),
    "mp1_pad": lambda L, F: F.max_pool1d(_data(L, 2, 1, 4), 2, padding=2),
    "mp1_dilation_big": lambda L, F: F.max_pool1d(_data(L, 1, 1, 4), 2, dilation=4),
    "mp1_idx_k0": lambda L, F: F.max_pool1d(_data(L, 1, 1, 4), 0, 1, return_indices=True),
    "mp2_k0": lambda L, F: F.max_pool2d(_data(L, 2, 1, 4, 4), 0),
    "mp2_k0_s1": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), 0, 1),
    "mp2_kneg": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), -1, 1),
    "mp2_s0": lambda L, F: F.max_pool2d(_data(L, 2, 1, 4, 4), 2, 0),
    "mp2_sneg": lambda L, F: F.max_pool2d(_data(L, 2, 1, 4, 4), 2, -1),
    "mp2_d0": lambda L, F: F.max_pool2d(_data(L, 2, 1, 4, 4), 2, dilation=0),
    "mp2_pneg": lambda L, F: F.max_pool2d(_data(L, 2, 1, 4, 4), 2, padding=-1),
    "mp2_pad_w": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), (2, 2), padding=(0, 2)),
    "mp2_dilated_pad": lambda L, F: F.max_pool2d(_data(L, 1, 1, 9, 9), 3, padding=2, dilation=2),
    "mp3_k0_s1": lambda L, F: F.max_pool3d(_data(L, 1, 1, 4, 4, 4), 0, 1),
    "mp3_s0": lambda L, F: F.max_pool3d(_data(L, 2, 1, 4, 4, 4), 2, 0),
    "mp3_sneg": lambda L, F: F.max_pool3d(_data(L, 1, 1, 4, 4, 4), 2, -1),
    "mp3_d0": lambda L, F: F.max_pool3d(_data(L, 2, 1, 4, 4, 4), 2, dilation=0),
    "mp3_dilated_pad": lambda L, F: F.max_pool3d(_data(L, 1, 1, 9, 9, 9), 3, padding=2, dilation=2),
    "ap1_k0": lambda L, F: F.avg_pool1d(_data(L, 2, 1, 4), 0),
    "ap2_s0": lambda L, F: F.avg_pool2d(_data(L, 2, 1, 4, 4), 2, 0),
    "ap2_sneg": lambda L, F: F.avg_pool2d(_data(L, 1, 1, 4, 4), 2, -1),
    "ap2_pneg": lambda L, F: F.avg_pool2d(_data(L, 2, 1, 4, 4), 2, padding=-1),
    "ap2_divisor0": lambda L, F: F.avg_pool2d(_data(L, 2, 1, 4, 4), 2, divisor_override=0),
    "ap3_k0_s1": lambda L, F: F.avg_pool3d(_data(L, 1, 1, 4, 4, 4), 0, 1),
    "ap3_pad": lambda L, F: F.avg_pool3d(_data(L, 1, 1, 4, 4, 4), 2, padding=(0, 0, 2)),
    "ap3_divisor0": lambda L, F: F.avg_pool3d(_data(L, 1, 1, 4, 4, 4), 2, divisor_override=0),
    "ap3_divisor0_rank": lambda L, F: F.avg_pool3d(_data(L, 4, 4, 4), 2, divisor_override=0),
    # the input's rank and empty dims
    "mp1_rank": lambda L, F: F.max_pool1d(_data(L, 2, 1, 4, 4), 2),
    "mp1_rank1": lambda L, F: F.max_pool1d(_data(L, 4), 2),
    "mp1_empty": lambda L, F: F.max_pool1d(_data(L, 2, 1, 0), 2),
    "mp1_empty_channels": lambda L, F: F.max_pool1d(_data(L, 2, 0, 4), 2),
    "mp1_unbatched_empty": lambda L, F: F.max_pool1d(_data(L, 0, 4), 2),
    "mp1_idx_empty": lambda L, F: F.max_pool1d(_data(L, 2, 1, 0), 2, return_indices=True),
    "mp1_idx_rank": lambda L, F: F.max_pool1d(_data(L, 2, 1, 4, 4), 2, return_indices=True),
    "mp2_empty": lambda L, F: F.max_pool2d(_data(L, 2, 1, 0, 4), 2),
    "mp2_empty_channels": lambda L, F: F.max_pool2d(_data(L, 2, 0, 4, 4), 2),
    "mp2_rank5": lambda L, F: F.max_pool2d(_data(L, 1, 2, 1, 4, 4), 2),
    "mp2_rank2": lambda L, F: F.max_pool2d(_data(L, 4, 4), 2),
    "mp3_empty": lambda L, F: F.max_pool3d(_data(L, 2, 1, 0, 4, 4), 2),
    "mp3_empty_w": lambda L, F: F.max_pool3d(_data(L, 2, 1, 4, 4, 0), 2),
    "mp3_unbatched_empty": lambda L, F: F.max_pool3d(_data(L, 0, 4, 4, 4), 2),
    "mp3_rank3": lambda L, F: F.max_pool3d(_data(L, 4, 4, 4), 2),
    "ap1_empty": lambda L, F: F.avg_pool1d(_data(L, 2, 1, 0), 2),
    "ap1_rank": lambda L, F: F.avg_pool1d(_data(L, 2, 1, 4, 4), 2),
    "ap2_empty": lambda L, F: F.avg_pool2d(_data(L, 2, 1, 0, 4), 2),
    "ap2_unbatched_empty": lambda L, F: F.avg_pool2d(_data(L, 0, 4, 4), 2),
    "ap2_rank5": lambda L, F: F.avg_pool2d(_data(L, 1, 2, 1, 4, 4), 2),
    "ap2_rank2": lambda L, F: F.avg_pool2d(_data(L, 4, 4), 2),
    "ap3_empty": lambda L, F: F.avg_pool3d(_data(L, 2, 1, 0, 4, 4), 2),
    "ap3_rank3": lambda L, F: F.avg_pool3d(_data(L, 4, 4, 4), 2),
    "lp1_rank": lambda L, F: F.lp_pool1d(_data(L, 2, 1, 4, 4), 2, 2),
    # tuple lengths
    "mp1_kernel_pair": lambda L, F: F.max_pool1d(_data(L, 1, 1, 4), (2, 2)),
    "mp1_stride_pair": lambda L, F: F.max_pool1d(_data(L, 1, 1, 4), 2, (1, 1)),
    "mp1_padding_pair": lambda L, F: F.max_pool1d(_data(L, 1, 1, 4), 2, 1, (0, 0)),
    "mp1_dilation_pair": lambda L, F: F.max_pool1d(_data(L, 1, 1, 4), 2, 1, 0, (1, 1)),
    "mp1_idx_kernel_pair": lambda L, F: F.max_pool1d(_data(L, 1, 1, 4), (2, 2), return_indices=True),
    "ap1_padding_pair": lambda L, F: F.avg_pool1d(_data(L, 1, 1, 4), 2, 1, (0, 0)),
    "mp2_kernel_triple": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), (2, 2, 2)),
    "mp2_stride_triple": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), 2, (1, 1, 1)),
    "mp2_dilation_triple": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), 2, 1, 0, (1, 1, 1)),
    "ap2_padding_triple": lambda L, F: F.avg_pool2d(_data(L, 1, 1, 4, 4), 2, 1, (0, 0, 0)),
    "mp3_kernel_pair": lambda L, F: F.max_pool3d(_data(L, 1, 1, 4, 4, 4), (2, 2)),
    "mp3_padding_pair": lambda L, F: F.max_pool3d(_data(L, 1, 1, 4, 4, 4), 2, 1, (0, 0)),
    "ap3_kernel_pair": lambda L, F: F.avg_pool3d(_data(L, 1, 1, 4, 4, 4), (2, 2)),
    "ap3_stride_pair": lambda L, F: F.avg_pool3d(_data(L, 1, 1, 4, 4, 4), 2, (1, 1)),
    # valid edge cases still pool
    "mp2_ceil_one": lambda L, F: F.max_pool2d(_data(L, 1, 1, 1, 1), 2, ceil_mode=True),
    "mp2_padded_one": lambda L, F: F.max_pool2d(_data(L, 1, 1, 1, 1), 2, padding=1),
    "ap2_ceil_one": lambda L, F: F.avg_pool2d(_data(L, 1, 1, 1, 1), 2, ceil_mode=True),
    "ap3_ceil": lambda L, F: F.avg_pool3d(_data(L, 1, 1, 1, 1, 1), 1, 2, ceil_mode=True),
    "ap3_small_but_strided": lambda L, F: F.avg_pool3d(_data(L, 2, 1, 3, 3, 3), 2, padding=1, stride=5),
    "mp2_empty_batch": lambda L, F: F.max_pool2d(_data(L, 0, 1, 4, 4), 2),
    "mp3_empty_batch": lambda L, F: F.max_pool3d(_data(L, 0, 1, 4, 4, 4), 2),
    "mp1_empty_batch": lambda L, F: F.max_pool1d(_data(L, 0, 2, 4), 2),
    "ap1_empty_batch": lambda L, F: F.avg_pool1d(_data(L, 0, 1, 4), 2),
    "mp2_kernel_list1": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), [2]),
    "mp2_stride_empty": lambda L, F: F.max_pool2d(_data(L, 1, 1, 4, 4), 2, []),
    "mp1_stride_empty": lambda L, F: F.max_pool1d(_data(L, 1, 1, 5), 2, []),
    "ap1_stride_empty": lambda L, F: F.avg_pool1d(_data(L, 1, 1, 5), 2, []),
    "mp2_dilated_indices": lambda L, F: F.max_pool2d(_data(L, 1, 2, 7, 7), 3, 2, 1, dilation=2, return_indices=True),
    "ap2_divisor": lambda L, F: F.avg_pool2d(_data(L, 1, 2, 5, 5), 3, 2, 1, divisor_override=4),
}


@pytest.mark.parametrize("case", sorted(_POOL_CASES))
def test_pooling_checks_its_arguments_as_aten(case):
    fn = _POOL_CASES[case]
    want = _outcome(lambda lib: fn(lib, lib.nn.functional), torch)
    got = _outcome(lambda lib: fn(lib, lib.nn.functional), tapelab)
    assert got == want


def test_pooling_checks_raise_again_after_a_cached_success():
    """Valid argument sets are remembered; a bad one raises every time, also after a good one."""
    F = tapelab.nn.functional
    x = _data(tapelab, 1, 1, 4, 4)
    assert F.max_pool2d(x, 2).shape == (1, 1, 2, 2)
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"Given input size: \(1x1x1\). Calculated output size: \(1x0x0\)"):
            F.max_pool2d(_data(tapelab, 1, 1, 1, 1), 2)
    assert F.max_pool2d(x, 2).tolist() == torch.nn.functional.max_pool2d(_data(torch, 1, 1, 4, 4), 2).tolist()
