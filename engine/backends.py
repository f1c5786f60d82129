"""``tapelab.backends``: PyTorch's backend switches, so scripts that set them run unchanged.

tapelab has no cuDNN, no TF32 and no MPS: cupy's kernels and numpy's BLAS compute in the
dtype asked for. The flags are kept (scripts read back what they set) and change nothing;
``mps.is_available()`` is False.
"""
from __future__ import annotations

import types

__all__ = ["cudnn", "cuda", "mps", "cpu"]

cudnn = types.SimpleNamespace(enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
                              is_available=lambda: False, version=lambda: None)
cuda = types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True),
                             is_built=lambda: True)
mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cpu = types.SimpleNamespace(get_cpu_capability=lambda: "DEFAULT")
