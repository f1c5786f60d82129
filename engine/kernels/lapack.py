"""LU factorisation and solves (``getrf``/``getrs``) through MKL's LAPACK where it is loaded
(``mkl.py``): the routines PyTorch's cpu ``linalg.lu_factor``, ``det``, ``slogdet`` and ``lu_solve``
call. On an exactly singular matrix the pivots and the last bits of U depend on the library and the
CPU's code path (MKL's AVX-512 getrf leaves 2.2e-16 where OpenBLAS's leaves 0 on the same 3x3), so
only MKL gives PyTorch's determinants and gradients there. Without MKL, SciPy's LAPACK. The calls
take SciPy's ``get_lapack_funcs`` signatures (0-based pivots), so callers use either the same way."""
from __future__ import annotations

import ctypes

import numpy as np

from . import mkl

__all__ = ["funcs", "available", "lu_diagonal"]

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
           np.dtype(np.complex128): "z"}
_TRANS = {0: b"N", 1: b"T", 2: b"C"}
_INT = ctypes.c_int
_P = ctypes.c_void_p


def funcs(name: str, a: np.ndarray):
    """``getrf(a) -> (lu, piv, info)`` or ``getrs(lu, piv, b, trans=0) -> (x, info)`` for ``a``'s dtype:
    MKL's where it is loaded, else SciPy's."""
    prefix = _PREFIX.get(a.dtype)
    lib = mkl.library() if prefix is not None else None
    if lib is None:
        import scipy.linalg.lapack as lapack
        return lapack.get_lapack_funcs(name, (a,))
    fn = getattr(lib, f"{prefix}{name}_")
    return (lambda mat: _getrf(fn, mat)) if name == "getrf" else (lambda lu, piv, b, trans=0: _getrs(fn, lu, piv, b, trans))


def available(dtype) -> bool:
    """Whether ``funcs`` runs MKL's routines for arrays of ``dtype``."""
    return np.dtype(dtype) in _PREFIX and mkl.library() is not None


def lu_diagonal(a: np.ndarray):
    """U's diagonal ``(..., n)`` and the permutation's determinant ``(...,)`` (+-1) of each square matrix
    of ``a``, factored as PyTorch's ``det``/``slogdet`` factor it: a real C-contiguous matrix through
    the LU of its transpose (its rows handed to LAPACK as columns, no copy), any other as it is."""
    *batch, n, _ = a.shape
    flat = a.reshape((-1, n, n))
    transposed = a.dtype.kind != "c" and a.flags.c_contiguous
    getrf = funcs("getrf", a)
    diag = np.empty((flat.shape[0], n), a.dtype)
    sign = np.empty(flat.shape[0], a.dtype)
    steps = np.arange(n)
    for i in range(flat.shape[0]):
        lu, piv, _ = getrf(flat[i].T if transposed else flat[i])
        diag[i] = np.diagonal(lu)
        sign[i] = -1 if np.count_nonzero(piv != steps) % 2 else 1
    return diag.reshape((*batch, n)), sign.reshape(tuple(batch))


def _ref(v: int):
    return ctypes.byref(_INT(v))


def _getrf(fn, mat):
    lu = np.array(mat, order="F", copy=True)
    m, n = lu.shape
    piv = np.zeros(max(min(m, n), 1), np.intc)
    info = _INT(0)
    if m and n:
        fn(_ref(m), _ref(n), _P(lu.ctypes.data), _ref(max(m, 1)), _P(piv.ctypes.data), ctypes.byref(info))
    return lu, piv[:min(m, n)] - 1, info.value


def _getrs(fn, lu, piv, b, trans=0):
    lu = np.asfortranarray(lu)
    x = np.array(b, dtype=lu.dtype, order="F", copy=True)
    n = lu.shape[0]
    nrhs = x.shape[1] if x.ndim > 1 else 1
    ipiv = (np.asarray(piv) + 1).astype(np.intc)
    info = _INT(0)
    if n and nrhs:
        fn(ctypes.c_char_p(_TRANS[trans]), _ref(n), _ref(nrhs), _P(lu.ctypes.data), _ref(max(n, 1)),
           _P(ipiv.ctypes.data), _P(x.ctypes.data), _ref(max(n, 1)), ctypes.byref(info), ctypes.c_size_t(1))
    return x, info.value
