"""Intel MKL's vector math (VML): the library PyTorch's cpu kernels call for ``exp``, ``log``, ``sqrt``,
``sin``, ``tanh``, ``erf`` and their kin on float32 and float64 (``vmsExp``/``vmdExp`` in high-accuracy
mode, non-contiguous operands copied through a contiguous buffer first).

With the ``mkl`` package installed (``pip install tapelab[mkl]``, x86-64) these ops give PyTorch's numbers
bit for bit from ``MIN_SIZE`` numbers up (below it a call costs more than the difference is worth);
numpy's own SIMD functions are within an ulp or two but differ in the last bit of up to 40% of float32
results (``exp``), 20% of float64 ones (``tanh``). PyTorch keeps ``expm1``, ``log1p``, ``sinh``,
``cosh`` and ``exp2`` off VML, and so does this. The library is loaded through ctypes on first use with
sequential threading (tapelab's pool splits work itself), its calls made from one numba function; without
MKL or numba, or with ``TAPELAB_VML=0``, the ops keep numpy's functions. ``TAPELAB_EAGER_KERNELS=0`` leaves
it on: the loops' numpy forms then read the same square roots.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np

from . import mkl
from .switch import loops

__all__ = ["available", "unary", "unary_out", "unary_split"]

# op name -> VML's function name
NAMES = {"exp": "Exp", "log": "Ln", "log10": "Log10", "log2": "Log2", "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos",
         "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "tanh": "Tanh", "erf": "Erf", "erfc": "Erfc",
         "erfinv": "ErfInv"}
_MODE = 0x2 | 0x00140000 | 0x100   # VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE, as ATen's calls
# Below this many numbers the ops keep numpy's function: a VML call through numba's dispatcher costs
# ~0.9 us more than numpy's on 16 numbers, which the per-op rows (a 16-element chain) paid at every op.
MIN_SIZE = 64
_FUNCS: dict = {}


_ON = os.environ.get("TAPELAB_VML", "1") != "0"


def _library():
    """MKL (``mkl.py``), unless ``TAPELAB_VML=0`` keeps these ops on numpy's functions."""
    return mkl.library() if _ON else None


def available() -> bool:
    """Whether MKL's vector math is loaded (and not turned off)."""
    return _library() is not None


def _address(name: str, dtype: np.dtype) -> int:
    """The address of VML's ``vms<Name>``/``vmd<Name>`` for ``dtype``."""
    key = (name, dtype.char)
    address = _FUNCS.get(key)
    if address is None:
        address = _FUNCS[key] = mkl.address(("vms" if dtype.char == "f" else "vmd") + NAMES[name])
    return address


def _call(name: str, src: np.ndarray, out: np.ndarray) -> None:
    """VML's ``name`` from C-contiguous ``src`` into C-contiguous ``out`` (through the numba loop's call:
    a ctypes call from Python cost ~2 us of argument conversion on a 16-element ``tanh``, this ~0.4)."""
    address = _FUNCS.get((name, src.dtype.char)) or _address(name, src.dtype)
    loops("vml_call").vml_call(address, src, out, _MODE)


def _takes(xp, a) -> bool:
    return type(a) is np.ndarray and a.dtype.char in "fd" and _library() is not None


def unary(name: str, fallback: Callable, min_size: int = MIN_SIZE) -> Callable:
    """The forward of op ``name``: VML on a float32 or float64 numpy array of ``min_size`` numbers or
    more when MKL is loaded, else ``fallback(xp, a)``."""
    keys = {"f": (name, "f"), "d": (name, "d")}

    def fwd(xp, a):
        if type(a) is not np.ndarray or a.size < min_size or _library() is None:
            return fallback(xp, a)
        key = keys.get(a.dtype.char)
        if key is None:
            return fallback(xp, a)
        if a.flags.c_contiguous:
            res = np.empty_like(a)
            _into(_FUNCS.get(key) or _address(name, a.dtype), a, res)
            return res
        out = np.empty_like(a)   # the input's layout, as PyTorch's result
        if a.size:
            res = np.empty(a.shape, a.dtype)
            _call(name, np.ascontiguousarray(a), res)
            out[...] = res
        return out
    fwd.__name__ = f"{name}_fwd"
    return fwd


def unary_split(name: str, a: np.ndarray) -> np.ndarray:
    """VML's ``name`` of a 1-D C-contiguous float32 or float64 array (``available()`` checked), cut over
    the threads above ATen's grain as ATen's vml ops cut theirs (``kernels.parallel``): each number is
    VML's, as from one call."""
    from . import parallel
    out = np.empty_like(a)
    parallel(loops("vml_call").vml_rows, 2, a, out, _FUNCS.get((name, a.dtype.char)) or _address(name, a.dtype), _MODE)
    return out


# (dtype char, rank) -> vml_call's compiled code for aligned writeable C-contiguous arrays (kernels.entry)
_ENTRIES: dict = {}


def _into(address: int, a: np.ndarray, res: np.ndarray) -> None:
    """VML's function at ``address`` over C-contiguous ``a`` into ``res``, a new array of numpy's: one numba
    allocated carries a dtype object of its own, which the dispatcher's identity tests (``y.dtype is
    x.dtype``) refuse, so the op after a VML ``tanh`` left the compiled path (issue 17, session 34). The
    loop's compiled code is called without numba's dispatcher where ``a`` is aligned and writeable."""
    run = _ENTRIES.get((a.dtype.char, a.ndim)) if a.flags.carray else None
    if run is not None:
        run(address, a, res, _MODE)
    elif a.flags.carray:
        from . import entry
        _ENTRIES[a.dtype.char, a.ndim] = entry(loops("vml_call").vml_call, address, a, res, _MODE)   # (runs it)
    else:
        loops("vml_call").vml_call(address, a, res, _MODE)


def unary_out(name: str, ufunc: str, min_size: int = MIN_SIZE) -> Callable:
    """The op's ``fwd_out`` (in-place updates outside autograd, capture's replay): VML into the given
    contiguous array where ``unary`` (with the same ``min_size``) would take VML, else the array
    namespace's ``ufunc`` with ``out=``."""
    def fwd_out(xp, a, *, out):
        (res,) = out
        if res.size >= min_size and _takes(xp, a) and res.dtype == a.dtype and res.flags.c_contiguous:
            if res.size:
                src = a if a.flags.c_contiguous and a.shape == res.shape else \
                    np.ascontiguousarray(np.broadcast_to(a, res.shape))
                _call(name, src, res)
            return
        getattr(xp, ufunc)(a, out=res)
    fwd_out.__name__ = f"{name}_fwd_out"
    return fwd_out

