"""Whether the fused loops are on, and the loop modules, each imported when a loop first runs:
the package and ``gemm.py`` (whose own GEMM is a loop module) both ask here."""
from __future__ import annotations

import importlib
import importlib.util
import os

__all__ = ["enabled", "set_enabled", "loops", "native", "set_native"]

_ON = [os.environ.get("TAPELAB_EAGER_KERNELS", "1") != "0" and importlib.util.find_spec("numba") is not None]
_LOOPS: dict = {}
# Off unless TAPELAB_NATIVE_POOL=1: the loops' and our GEMM's parallel parts on numba's OpenMP threads
# (kernels/regions.py) instead of the Python pool's workers. The loaded hosts of sessions 19 and 23 did
# not prove it faster for every step (bench/README.md, issue 17); the default stays the pool until a
# quiet host measures it.
_NATIVE = [os.environ.get("TAPELAB_NATIVE_POOL", "0") == "1"]


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
    """Whether parallel parts run as OpenMP regions on numba's threads (``TAPELAB_NATIVE_POOL=1``)."""
    return _NATIVE[0]


def set_native(flag: bool) -> bool:
    """Turn the regions on numba's threads on or off for this process (A/B timing, tests); returns
    the old setting."""
    old = _NATIVE[0]
    _NATIVE[0] = bool(flag)
    return old


def loops(name: str):
    """The loop module ``name`` ("rowwise", "pointwise", "optim", "pool", "winograd", "batchnorm",
    "rnn", "conv", "sgemm", "scatter", "shuffle", "normal", "cascade", "sum_order", "vecnorm",
    "heapselect", "twister", "libm", "upsample", "vml_call", "regions"),
    imported when a loop first runs (importing numba costs about half a second), then kept: ``import_module`` cost 1 us a call, 63 calls a ResNet step."""
    module = _LOOPS.get(name)
    if module is None:
        module = _LOOPS[name] = importlib.import_module(f"{__package__}.{name}")
    return module
