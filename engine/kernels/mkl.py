"""Intel MKL, loaded once through ctypes from the ``mkl`` wheel (``pip install tapelab[mkl]``, x86-64):
the library PyTorch's cpu kernels call for float32/float64 GEMMs (``cblas_sgemm``/``cblas_dgemm``) and
vector math (VML). Its functions are called by address from compiled loops (``blas_call.py``,
``vml_call.py``), so the calls need numba. ``TAPELAB_MKL=0`` keeps MKL unloaded (numpy's OpenBLAS and
functions then do all of it).

MKL runs on GNU OpenMP (``libgomp``, PyTorch's threading layer for MKL, and numba's) at one thread by
default, so VML, LAPACK and every GEMM called from a pool block stay on their thread; a GEMM asks for
the intra-op threads for that call alone (``threads`` in ``blas_call.py``, MKL's thread-local setting).
OpenMP's threads spin between regions, so a GEMM's split starts at once, where this project's pool
hands a block over in tens of microseconds and then runs it on the caller: a 64x784x512 float32 product
took ~150 us on two threads this way, 265 through the pool's two blocks and 266 on one thread (torch:
138; bench/README.md, issue 17, session 26). On GNU OpenMP MKL cuts a product among threads as it does
in PyTorch, so two threads give torch's floats at two threads too (Intel's OpenMP, ``libiomp5``, cut
64x784x512 otherwise); without ``libgomp`` MKL runs on ``libiomp5``, and without either, sequential."""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import sys

__all__ = ["library", "address", "threaded", "threading_layer", "avx512"]

_LAYERS = {"intel": 0, "sequential": 1, "gnu": 3}     # MKL_THREADING_INTEL, _SEQUENTIAL, _GNU
_LIB: list = []
_LAYER: list = []
_FORKED: list = []
_THREADED: list = []
_ADDRESSES: dict = {}
_AVX512: list = []
MKL_CBWR_AVX512 = 12     # mkl_cbwr.h: 12 AVX512, 13 AVX512_MIC_E1, 14 AVX512_E1 (below: AUTO 2 ... AVX2 10)


def library():
    """libmkl_rt, or None (not installed, no numba, or turned off)."""
    if not _LIB:
        lib = None
        if os.environ.get("TAPELAB_MKL", "1") != "0" and importlib.util.find_spec("numba") is not None:
            for path in sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")), reverse=True):
                try:
                    lib = ctypes.CDLL(path)
                    layer = _choose_layer()
                    lib.MKL_Set_Threading_Layer(ctypes.c_int(_LAYERS[layer]))
                    lib.MKL_Set_Num_Threads(ctypes.c_int(1))
                    _LAYER.append(layer)
                    break
                except (OSError, AttributeError):
                    lib = None
        _LIB.append(lib)
    return _LIB[0]


def _choose_layer() -> str:
    """GNU OpenMP where ``libgomp`` loads, else Intel's where the wheel brought it, else sequential."""
    try:
        ctypes.CDLL("libgomp.so.1")
        return "gnu"
    except OSError:
        return "intel" if glob.glob(os.path.join(sys.prefix, "lib", "libiomp5.so*")) else "sequential"


def threading_layer() -> str | None:
    """The OpenMP MKL runs on: ``"gnu"``, ``"intel"`` or ``"sequential"``; None where MKL is not loaded."""
    return _LAYER[-1] if library() is not None else None


def threaded() -> bool:
    """Whether MKL's GEMM can run one call on several threads: loaded on an OpenMP, and not in a
    forked child (GNU OpenMP's threads do not survive a fork: a child's first threaded call would
    wait for them forever; PyTorch's DataLoader workers keep to one thread too)."""
    if not _THREADED:   # decided once (every GEMM asks): the library and its layer do not change after loading
        _THREADED.append(threading_layer() not in (None, "sequential"))
    return _THREADED[0] and not _FORKED


os.register_at_fork(after_in_child=lambda: _FORKED.append(True))


def avx512() -> bool:
    """Whether MKL runs its AVX-512 code on this CPU: the branch its dispatcher picks
    (``mkl_cbwr_get_auto_branch``) is AVX512 or later. On an AMD EPYC with AVX-512 it names no branch
    (``MKL_CBWR_AUTO``, 2), and its 20 x 200 x 800 product took 74 us against our AVX-512 GEMM's 57
    (bench/README.md, issue 17, session 32); False where MKL is not loaded."""
    if not _AVX512:
        lib = library()
        _AVX512.append(lib is not None and lib.mkl_cbwr_get_auto_branch() >= MKL_CBWR_AVX512)
    return _AVX512[0]


def address(name: str) -> int:
    """The address of MKL's C function ``name`` (the library must be loaded)."""
    found = _ADDRESSES.get(name)
    if found is None:
        found = _ADDRESSES[name] = ctypes.cast(getattr(library(), name), ctypes.c_void_p).value
    return found
