"""Gaps found by running vision and generative programs unchanged under ``install_aliases()``
(milesial/Pytorch-UNet, kuangliu/pytorch-cifar, eriklindernoren/PyTorch-GAN, facebookresearch/DiT),
each checked against real torch: the ``torch.cuda`` exception types a training script names in an
``except`` clause."""
from __future__ import annotations

import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- torch.cuda exception types
@BOTH
def test_cuda_out_of_memory_error_is_torch_out_of_memory_error(m):
    """Pytorch-UNet's train.py wraps training in ``except torch.cuda.OutOfMemoryError``."""
    assert m.cuda.OutOfMemoryError is m.OutOfMemoryError
    assert issubclass(m.cuda.OutOfMemoryError, RuntimeError)
    with pytest.raises(AssertionError):
        try:
            raise AssertionError("not an OOM")
        except m.cuda.OutOfMemoryError:
            pytest.fail("an AssertionError was taken for an OutOfMemoryError")
    try:
        raise m.OutOfMemoryError("CUDA out of memory.")
    except m.cuda.OutOfMemoryError as e:
        assert str(e) == "CUDA out of memory."


@BOTH
def test_cuda_error_classes(m):
    assert issubclass(m.cuda.CudaError, RuntimeError)
    assert m.cuda.DeferredCudaCallError.__mro__[1] is Exception
