"""Whether the fused loops are on, and the loop modules, each imported when a loop first runs:
the package and ``gemm.py`` (whose own GEMM is a loop module) both ask here."""
from __future__ import annotations

import importlib
import importlib.util
import os

__all__ = ["enabled", "set_enabled", "loops"]

_ON = [os.environ.get("TAPELAB_EAGER_KERNELS", "1") != "0" and importlib.util.find_spec("numba") is not None]
_LOOPS: dict = {}


def enabled() -> bool:
    """Whether eager ops may take the fused loops (numba installed, ``TAPELAB_EAGER_KERNELS`` not 0)."""
    return _ON[0]


def set_enabled(flag: bool) -> bool:
    """Turn the fused loops on or off for this process (A/B timing, tests); returns the old setting.
    Turning them on without numba installed leaves them off."""
    old = _ON[0]
    _ON[0] = bool(flag) and importlib.util.find_spec("numba") is not None
    return old


def loops(name: str):
    """The loop module ``name`` ("rowwise", "pointwise", "optim", "pool", "winograd", "batchnorm",
    "rnn", "conv", "sgemm", "scatter", "shuffle", "normal", "cascade", "sum_order", "vecnorm",
    "heapselect", "twister", "libm", "upsample", "vml_call"),
    imported when a loop first runs (importing numba costs about half a second), then kept: ``import_module`` cost 1 us a call, 63 calls a ResNet step."""
    module = _LOOPS.get(name)
    if module is None:
        module = _LOOPS[name] = importlib.import_module(f"{__package__}.{name}")
    return module
