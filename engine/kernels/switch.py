"""Whether the fused loops are on, and the loop modules, each imported when a loop first runs:
the package and ``gemm.py`` (whose own GEMM is a loop module) both ask here."""
from __future__ import annotations

import importlib
import importlib.util
import os

import numpy as np

__all__ = ["enabled", "set_enabled", "loops", "native", "set_native", "use"]

_ON = [os.environ.get("TAPELAB_EAGER_KERNELS", "1") != "0" and importlib.util.find_spec("numba") is not None]
_LOOPS: dict = {}
# The loops' and our GEMM's parallel parts on numba's OpenMP threads (kernels/regions.py) instead of the
# Python pool's workers: TAPELAB_NATIVE_POOL=1 or 0 says; unset, on where MKL runs on GNU OpenMP
# (kernels/mkl.py), whose GEMMs keep libgomp's threads spinning between ops, so a region starts at
# once. Quiet host, two threads, session 26: MLP b64 1.13x, CNN 1.12x, Transformer 1.06x, GPT d128
# 1.07x, LSTM 1.01x, ResNet 0.97x, MLP b512 1.03x against the pool. Without MKL the loaded hosts of
# sessions 19 and 23 did not prove it (bench/README.md, issue 17), so there the pool stays.
_NATIVE: list = [{"1": True, "0": False}.get(os.environ.get("TAPELAB_NATIVE_POOL", ""))]


def enabled() -> bool:
    """Whether eager ops may take the fused loops (numba installed, ``TAPELAB_EAGER_KERNELS`` not 0)."""
    return _ON[0]


def set_enabled(flag: bool) -> bool:
    """Turn the fused loops on or off for this process (A/B timing, tests); returns the old setting.
    Turning them on without numba installed leaves them off."""
    old = _ON[0]
    _ON[0] = bool(flag) and importlib.util.find_spec("numba") is not None
    return old


def native() -> bool:
    """Whether parallel parts run as OpenMP regions on numba's threads (``TAPELAB_NATIVE_POOL``; by
    default where MKL runs on GNU OpenMP)."""
    on = _NATIVE[0]
    if on is None:
        from . import mkl
        on = _NATIVE[0] = _ON[0] and mkl.threading_layer() == "gnu"
    return on


def set_native(flag: bool) -> bool:
    """Turn the regions on numba's threads on or off for this process (A/B timing, tests); returns
    the old setting."""
    old = native()
    _NATIVE[0] = bool(flag)
    return old


def loops(name: str):
    """The loop module ``name`` ("rowwise", "pointwise", "optim", "pool", "winograd", "batchnorm",
    "rnn", "conv", "sgemm", "scatter", "shuffle", "normal", "cascade", "sum_order", "vecnorm",
    "heapselect", "twister", "gamma_draws", "libm", "upsample", "vml_call", "regions", "depthwise", "grouped",
    "sparse_rows", "groupnorm"),
    imported when a loop first runs (importing numba costs about half a second), then kept: ``import_module`` cost 1 us a call, 63 calls a ResNet step."""
    module = _LOOPS.get(name)
    if module is None:
        module = _LOOPS[name] = importlib.import_module(f"{__package__}.{name}")
    return module


_F32 = np.dtype(np.float32)


def use(xp, *arrays) -> bool:
    """Whether the loops take these arrays: on, ``xp`` numpy (not cupy or the meta namespace), and
    each a C-contiguous float32 array (the loops are written for float32; other dtypes keep
    numpy's formula)."""
    if not enabled() or xp is not np:
        return False
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != _F32 or not a.flags.c_contiguous:
            return False
    return True
