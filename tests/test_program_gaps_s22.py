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


# ---------------------------------------------------------------- functional's warnings and argument checks
def _warned(fn, lib):
    """``fn(lib)``'s outcome (as ``_outcome``) and the messages of the warnings it gave, in order, with
    tapelab's package name written as PyTorch's."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = _outcome(fn, lib)
    res = tuple(x.replace("tapelab.", "torch.") if isinstance(x, str) else x for x in res)
    return res, [(w.category.__name__, str(w.message)) for w in caught]


def _logp(lib):
    return lib.log_softmax(lib.tensor([[0.0, 1.0, 2.0], [3.0, 1.0, 0.5]]), 1)


_WARN_CASES = {
    # kornia's and RL code's KLDivLoss() with the default reduction: PyTorch's deprecation warning
    "kl_mean": lambda L: L.nn.functional.kl_div(_logp(L), L.full((2, 3), 1 / 3)),
    "kl_module": lambda L: L.nn.KLDivLoss()(_logp(L), L.full((2, 3), 1 / 3)),
    "kl_batchmean": lambda L: L.nn.functional.kl_div(_logp(L), L.full((2, 3), 1 / 3), reduction="batchmean"),
    "kl_sum_log_target": lambda L: L.nn.functional.kl_div(_logp(L), _logp(L).flip(0), reduction="sum",
                                                          log_target=True),
    "gumbel_eps": lambda L: L.nn.functional.gumbel_softmax(L.zeros(2, 3), eps=1e-5, hard=True).sum(1),
    "gumbel_default_eps": lambda L: L.nn.functional.gumbel_softmax(L.zeros(2, 3), hard=True).sum(1),
    # embedding_bag(weight, input): PyTorch warns and swaps them back
    "bag_swapped": lambda L: L.nn.functional.embedding_bag(_data(L, 5, 4) / 10, L.tensor([[0, 2], [1, 4]])),
    "bag_swapped_sum": lambda L: L.nn.functional.embedding_bag(_data(L, 5, 4), L.tensor([[0, 2], [1, 4]]),
                                                               mode="sum"),
    "bag_int32_weight": lambda L: L.nn.functional.embedding_bag(_data(L, 5, 4), L.tensor([[0, 2]], dtype=L.int32)),
    "bag_weights_shape": lambda L: L.nn.functional.embedding_bag(L.tensor([[0, 2], [1, 4]]), _data(L, 5, 4),
                                                                 per_sample_weights=L.ones(3), mode="sum"),
    "bag_weight_1d": lambda L: L.nn.functional.embedding_bag(L.tensor([[0, 2], [1, 4]]), L.ones(5)),
    "bag_weight_3d": lambda L: L.nn.functional.embedding_bag(L.tensor([[0, 2], [1, 4]]), L.ones(5, 2, 2)),
    "bag_ok": lambda L: L.nn.functional.embedding_bag(L.tensor([[0, 2], [1, 4]]), _data(L, 5, 4),
                                                      per_sample_weights=L.tensor([[1.0, 2.0], [0.5, 3.0]]), mode="sum"),
    # batch/instance norm of one value per channel name the input's torch.Size
    "bn_one_value": lambda L: L.nn.functional.batch_norm(L.ones(1, 3), None, None, training=True),
    "bn_module": lambda L: L.nn.BatchNorm2d(3)(L.ones(1, 3, 1, 1)),
    "in_one_value": lambda L: L.nn.functional.instance_norm(L.ones(2, 3, 1), use_input_stats=True),
}


@pytest.mark.parametrize("case", sorted(_WARN_CASES))
def test_functional_warnings_and_checks_as_pytorch(case):
    fn = _WARN_CASES[case]
    torch.manual_seed(0)
    tapelab.manual_seed(0)
    assert _warned(fn, tapelab) == _warned(fn, torch)


@pytest.mark.parametrize("size", [(2, 3, 1, 5), (2, 3, 7, 1), (2, 3, 1, 1), (1, 1, 3, 1, 4), (1, 1, 1, 1, 1),
                                  (2, 1, 4, 6), (1, 2, 3, 4, 5)])
@pytest.mark.parametrize("align_corners", [True, False])
def test_affine_grid_of_a_unit_size_dim_is_its_centre(size, align_corners):
    """ATen's ``linspace_from_neg_one`` puts the one point of a unit-size dim at 0 (linspace's is -1):
    ``affine_grid`` of an (N, C, 1, W) image sampled its first row, not its middle. A unit size with
    ``align_corners=True`` also warns, as PyTorch does."""
    nd = len(size) - 2

    def grid(lib):
        theta = lib.linspace(-1, 1, nd * (nd + 1) * size[0]).reshape(size[0], nd, nd + 1) * 0.7
        return lib.nn.functional.affine_grid(theta, size, align_corners=align_corners)

    (want_shape, want), want_warn = _warned(grid, torch)
    (got_shape, got), got_warn = _warned(grid, tapelab)
    assert got_shape == want_shape and got_warn == want_warn
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)      # values rounded to 6 places
    if 1 in size[2:]:
        assert got == want            # the unit dims' coordinates and those built from them are exact


def test_torch_kl_div_gives_no_reduction_warning():
    """``torch.kl_div`` is ATen's op (a reduction enum; 1 is the mean): only ``F.kl_div`` warns. (The
    enum is passed: PyTorch 2.13's binding reads an omitted one as 0, 'none', unlike its schema's 1.)"""
    case = lambda L: L.kl_div(_logp(L), L.full((2, 3), 1 / 3), 1)     # noqa: E731
    want = _warned(case, torch)
    assert want[1] == [] and _warned(case, tapelab) == want


# ---------------------------------------------------------------- adaptive pooling's output sizes and checks
def _adaptive_cases():
    cases = {}
    for kind in ("avg", "max"):
        def f(n, kind=kind):
            return lambda L, *a: getattr(L.nn.functional, f"adaptive_{kind}_pool{n}d")(*a)
        f1, f2, f3 = f(1), f(2), f(3)
        cases.update({
            f"{kind}1_zero": lambda L, f1=f1: f1(L, _data(L, 1, 2, 4), 0),
            f"{kind}1_negative": lambda L, f1=f1: f1(L, _data(L, 1, 2, 4), -1),
            f"{kind}1_empty": lambda L, f1=f1: f1(L, _data(L, 1, 2, 0), 2),
            f"{kind}1_empty_channels": lambda L, f1=f1: f1(L, _data(L, 1, 0, 4), 2),
            f"{kind}1_empty_batch": lambda L, f1=f1: f1(L, _data(L, 0, 2, 4), 2),
            f"{kind}1_rank4": lambda L, f1=f1: f1(L, _data(L, 1, 2, 4, 4), 2),
            f"{kind}1_rank1": lambda L, f1=f1: f1(L, _data(L, 4), 2),
            f"{kind}1_pair": lambda L, f1=f1: f1(L, _data(L, 1, 2, 4), (2, 2)),
            f"{kind}1_ok": lambda L, f1=f1: f1(L, _data(L, 2, 3, 7), 3),
            f"{kind}2_zero": lambda L, f2=f2: f2(L, _data(L, 1, 1, 4, 4), 0),
            f"{kind}2_zero_h": lambda L, f2=f2: f2(L, _data(L, 1, 1, 4, 4), (0, 2)),
            f"{kind}2_negative": lambda L, f2=f2: f2(L, _data(L, 1, 1, 4, 4), -1),
            f"{kind}2_negative_w": lambda L, f2=f2: f2(L, _data(L, 1, 1, 4, 4), (2, -3)),
            f"{kind}2_negative_unbatched": lambda L, f2=f2: f2(L, _data(L, 2, 4, 4), (2, -3)),
            f"{kind}2_empty": lambda L, f2=f2: f2(L, _data(L, 1, 1, 0, 4), 2),
            f"{kind}2_empty_w": lambda L, f2=f2: f2(L, _data(L, 1, 1, 4, 0), 2),
            f"{kind}2_empty_channels": lambda L, f2=f2: f2(L, _data(L, 1, 0, 4, 4), 2),
            f"{kind}2_empty_batch": lambda L, f2=f2: f2(L, _data(L, 0, 1, 4, 4), 2),
            f"{kind}2_unbatched_no_channels": lambda L, f2=f2: f2(L, _data(L, 0, 4, 4), 2),
            f"{kind}2_one_of_empty": lambda L, f2=f2: f2(L, _data(L, 1, 1, 0, 4), 1),
            f"{kind}2_rank5": lambda L, f2=f2: f2(L, _data(L, 1, 1, 1, 4, 4), 2),
            f"{kind}2_rank2": lambda L, f2=f2: f2(L, _data(L, 4, 4), 2),
            f"{kind}2_rank2_one": lambda L, f2=f2: f2(L, _data(L, 4, 6), 1),
            f"{kind}2_triple": lambda L, f2=f2: f2(L, _data(L, 1, 1, 4, 4), (2, 2, 2)),
            f"{kind}2_none": lambda L, f2=f2: f2(L, _data(L, 1, 1, 4, 6), (None, 2)),
            f"{kind}2_none_too_long": lambda L, f2=f2: f2(L, _data(L, 4, 6), (None, 2, 2)),
            f"{kind}2_ok": lambda L, f2=f2: f2(L, _data(L, 2, 3, 7, 5), (3, 2)),
            f"{kind}3_zero": lambda L, f3=f3: f3(L, _data(L, 1, 1, 4, 4, 4), 0),
            f"{kind}3_negative": lambda L, f3=f3: f3(L, _data(L, 1, 1, 4, 4, 4), -1),
            f"{kind}3_negative_t": lambda L, f3=f3: f3(L, _data(L, 1, 1, 4, 4, 4), (-2, 1, 3)),
            f"{kind}3_empty": lambda L, f3=f3: f3(L, _data(L, 1, 1, 4, 0, 4), 2),
            f"{kind}3_empty_channels": lambda L, f3=f3: f3(L, _data(L, 1, 0, 4, 4, 4), 2),
            f"{kind}3_empty_batch": lambda L, f3=f3: f3(L, _data(L, 0, 1, 4, 4, 4), 2),
            f"{kind}3_rank3": lambda L, f3=f3: f3(L, _data(L, 4, 4, 4), 2),
            f"{kind}3_one_of_empty": lambda L, f3=f3: f3(L, _data(L, 1, 1, 0, 4, 4), 1),
            f"{kind}3_ok": lambda L, f3=f3: f3(L, _data(L, 1, 2, 5, 4, 6), (2, 3, 4)),
        })
    return cases


_ADAPTIVE_CASES = _adaptive_cases()


@pytest.mark.parametrize("case", sorted(_ADAPTIVE_CASES))
def test_adaptive_pooling_output_sizes_and_checks_as_aten(case):
    """An output size of 0 gives an empty result (a ZeroDivisionError or torch.cat error before),
    negative sizes and empty inputs raise ATen's errors, an all-ones size is a mean of any rank."""
    import warnings
    fn = _ADAPTIVE_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # numpy's mean of an empty slice (torch's is silent)
        got = _outcome(lambda lib: fn(lib), tapelab)
    want = _outcome(lambda lib: fn(lib), torch)
    if isinstance(want[0], str):                             # an exception: its type and message
        assert got == want
    else:                                                    # the separable average's last bit may differ
        assert got[0] == want[0]
        np.testing.assert_allclose(np.array(got[1], dtype=float), np.array(want[1], dtype=float), rtol=1e-6,
                                   atol=2e-6, equal_nan=True)



@pytest.mark.parametrize("nd, shape, output_size", [
    (2, (1, 1, 1, 1), 1), (2, (1, 1, 4, 1), 1), (2, (1, 1, 1, 4), 1), (2, (1, 1, 4, 4), 3), (2, (1, 1, 4, 4), (3, 2)),
    (2, (1, 1, 5, 4), (4, 3)), (3, (1, 1, 1, 4, 4), 1), (3, (1, 1, 4, 4, 4), 3), (3, (1, 1, 5, 4, 5), 3),
    (3, (1, 1, 5, 5, 4), 3), (3, (1, 1, 4, 4, 4), 2), (3, (1, 1, 5, 4, 4), (3, 2, 2))])
def test_fractional_max_pool_checks_the_pool_size_as_aten(nd, shape, output_size):
    """ATen names the dim (height/width, time in 3-d) and, in 3-d only, wants the last window to end
    before the input's end (a strict '<'): (4, 4, 4) pooled by 2 to 3 is refused there, not in 2-d."""
    def pool(lib):
        x = _data(lib, *shape)
        samples = lib.full((shape[0], shape[1], nd), 0.5)
        return getattr(lib.nn.functional, f"fractional_max_pool{nd}d")(x, 2, output_size=output_size,
                                                                         _random_samples=samples)
    assert _outcome(pool, tapelab) == _outcome(pool, torch)


# ---------------------------------------------------------------- torch.backends submodules
@pytest.mark.parametrize("name", ["opt_einsum", "mkl", "openmp", "nnpack", "mha"])
def test_backends_submodules_import_as_pytorchs(name):
    """timm's Kron optimizer does ``import torch.backends.opt_einsum`` and sets its strategy: every
    PyTorch backends module a script touches is there, with PyTorch's public names."""
    import importlib
    mod = importlib.import_module(f"tapelab.backends.{name}")
    real = importlib.import_module(f"torch.backends.{name}")
    public = {n for n in dir(real) if not n.startswith("_") and n not in ("torch", "sys", "warnings", "contextmanager",  # m: PropModule's module
                                                                          "Any", "PropModule", "ContextProp", "m")}
    assert public <= set(dir(mod)), public - set(dir(mod))
    assert getattr(tapelab.backends, name) is mod


def test_opt_einsum_switches_as_pytorch():
    """With opt_einsum installed a bad strategy is refused and ``flags`` sets one for its block; without
    it PyTorch refuses to set any strategy: either way tapelab's module answers as PyTorch's."""
    oe = tapelab.backends.opt_einsum
    assert oe.is_available() == torch.backends.opt_einsum.is_available()
    assert (oe.enabled, oe.strategy) == (torch.backends.opt_einsum.enabled, torch.backends.opt_einsum.strategy)

    def outcome(lib, action):
        try:
            return ("ok", action(lib.backends.opt_einsum))
        except Exception as e:  # noqa: BLE001 - the outcome compared is the exception itself
            return (type(e).__name__, str(e))

    def in_flags(mod):
        with mod.flags(strategy="greedy"):
            inside = mod.strategy
        return inside, mod.strategy

    for action in (lambda mod: mod.set_flags(None, "auto-hq"), in_flags):
        assert outcome(tapelab, action) == outcome(torch, action)
    if torch.backends.opt_einsum.is_available():
        assert outcome(tapelab, in_flags) == ("ok", ("greedy", "auto"))
        assert "must be one of the following: [auto, greedy, optimal] but is auto-hq" in \
            outcome(tapelab, lambda mod: mod.set_flags(None, "auto-hq"))[1]


def test_mha_fastpath_and_nnpack_switches_read_back():
    mha = tapelab.backends.mha
    assert mha.get_fastpath_enabled() is torch.backends.mha.get_fastpath_enabled() is True
    mha.set_fastpath_enabled(False)
    try:
        assert mha.get_fastpath_enabled() is False
    finally:
        mha.set_fastpath_enabled(True)
    with tapelab.backends.nnpack.flags(enabled=False):
        assert tapelab.backends.nnpack.set_flags(False) == (False,)
    assert tapelab.backends.nnpack.set_flags(True) == (True,)
    assert tapelab.backends.mkl.VERBOSE_ON == torch.backends.mkl.VERBOSE_ON == 1
    with tapelab.backends.mkl.verbose(tapelab.backends.mkl.VERBOSE_OFF) as v:
        assert v is None


# ---------------------------------------------------------------- reductions of too few values
_FEW_CASES = {
    "mean_empty": lambda L: L.zeros(0).mean(),
    "mean_empty_dim": lambda L: L.zeros(2, 0).mean(1),
    "mean_empty_keepdim": lambda L: L.zeros(3, 0, 2).mean((1, 2), keepdim=True),
    "mean_empty_f64": lambda L: L.zeros(0, dtype=L.float64).mean(),
    "var_empty": lambda L: L.zeros(0).var(),
    "var_one": lambda L: L.ones(1).var(),
    "std_one": lambda L: L.ones(1).std(),
    "std_two": lambda L: L.tensor([1.0, 3.0]).std(),
    "var_dim_one": lambda L: L.ones(3, 1).var(1),
    "var_dim_empty": lambda L: L.zeros(2, 0).var(1),
    "var_correction0_empty": lambda L: L.zeros(0).var(correction=0),
    "var_correction0_one": lambda L: L.ones(1).var(correction=0),
    "var_correction2": lambda L: L.ones(2, 2).var(1, correction=2),
    "var_mean_empty": lambda L: L.var_mean(L.zeros(0)),
    "std_mean_one": lambda L: L.std_mean(L.ones(1, 3), 0),
    "var_f64_one": lambda L: L.ones(1, dtype=L.float64).var(),
}


@pytest.mark.parametrize("case", sorted(_FEW_CASES))
def test_reductions_of_too_few_values_warn_as_pytorch(case):
    """A mean of nothing is NaN without numpy's 'Mean of empty slice' RuntimeWarning (MONAI/smp metrics
    average empty classes); var/std with no degrees of freedom give PyTorch's UserWarning."""
    fn = _FEW_CASES[case]
    got, got_warn = _warned(fn, tapelab)
    want, want_warn = _warned(fn, torch)
    strip = [(c, m.split(" (Triggered internally")[0]) for c, m in want_warn]
    assert got_warn == strip
    assert got[0] == want[0]
    np.testing.assert_array_equal(np.array(got[1], dtype=float), np.array(want[1], dtype=float))
