"""``torch.__config__``: the build description libraries read to pick code paths (torch_geometric
imports ``'USE_MKL=OFF' in torch.__config__.show()``). tapelab computes with numpy (and cupy on a
GPU), not MKL, so its build settings say ``USE_MKL=OFF``."""
from __future__ import annotations

import os

import numpy as np

from ._torch_extra import get_num_interop_threads
from .base.runtime import get_num_threads
from .version import API, TAPELAB

__all__ = ["show", "parallel_info"]


def show() -> str:
    """What tapelab is built on, in the layout of PyTorch's ``show()``."""
    return (f"tapelab {TAPELAB} (the PyTorch {API} API) built with:\n"
            f"  - numpy {np.__version__}\n"
            f"  - Build settings: BLAS_INFO=numpy, TORCH_VERSION={API}, USE_CUDA=cupy, USE_CUDNN=OFF, "
            f"USE_MKL=OFF, USE_MKLDNN=OFF, USE_MPI=OFF, USE_NCCL=OFF, USE_OPENMP=OFF, \n")


def parallel_info() -> str:
    """The thread counts, in the layout of PyTorch's ``parallel_info()``."""
    env = "".join(f"\t{name} : {os.environ.get(name, '[not set]')}\n" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"))
    return (f"ATen/Parallel:\n\tat::get_num_threads() : {get_num_threads()}\n"
            f"\tat::get_num_interop_threads() : {get_num_interop_threads()}\n"
            f"Environment variables:\n{env}ATen parallel backend: tapelab's thread pool\n")
