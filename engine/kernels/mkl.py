"""Intel MKL, loaded once through ctypes from the ``mkl`` wheel (``pip install tapelab[mkl]``, x86-64):
the library PyTorch's cpu kernels call for float32/float64 GEMMs (``cblas_sgemm``/``cblas_dgemm``) and
vector math (VML). Sequential threading: tapelab's intra-op pool splits work itself. Its functions are
called by address from compiled loops (``blas_call.py``, ``vml_call.py``), so the calls need numba.
``TAPELAB_MKL=0`` keeps MKL unloaded (numpy's OpenBLAS and functions then do all of it)."""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import sys

__all__ = ["library", "address"]

_SEQUENTIAL = 1                    # MKL_THREADING_SEQUENTIAL
_LIB: list = []
_ADDRESSES: dict = {}


def library():
    """libmkl_rt, or None (not installed, no numba, or turned off)."""
    if not _LIB:
        lib = None
        if os.environ.get("TAPELAB_MKL", "1") != "0" and importlib.util.find_spec("numba") is not None:
            for path in sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")), reverse=True):
                try:
                    lib = ctypes.CDLL(path)
                    lib.MKL_Set_Threading_Layer(ctypes.c_int(_SEQUENTIAL))
                    break
                except (OSError, AttributeError):
                    lib = None
        _LIB.append(lib)
    return _LIB[0]


def address(name: str) -> int:
    """The address of MKL's C function ``name`` (the library must be loaded)."""
    found = _ADDRESSES.get(name)
    if found is None:
        found = _ADDRESSES[name] = ctypes.cast(getattr(library(), name), ctypes.c_void_p).value
    return found
