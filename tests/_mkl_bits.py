"""Comparing a result that runs through MKL with PyTorch's: bit for bit where MKL runs its AVX-512 code (the
Xeons the floats were matched on, ``kernels.mkl.avx512``), within a few ulps elsewhere. On an AMD EPYC with
AVX-512 MKL names no ISA branch, and PyTorch's statically linked MKL rounds some last bits otherwise than the
``[mkl]`` extra's library (a batched float64 product's, a singular matrix's log-determinant: session 32)."""
import numpy as np

from tapelab.kernels import mkl


def assert_torchs_floats(got, want, ulps: int = 8) -> None:
    """``got`` equals ``want`` bit for bit where MKL runs AVX-512 code, else within ``ulps`` units of its dtype's
    rounding, relative to each value and to the largest (a sum's rounding is relative to its terms)."""
    got, want = np.asarray(got), np.asarray(want)
    if mkl.avx512():
        np.testing.assert_array_equal(got, want)
        return
    eps = np.finfo(want.dtype).eps * ulps
    finite = np.abs(want[np.isfinite(want)])
    np.testing.assert_allclose(got, want, rtol=eps, atol=eps * (finite.max() if finite.size else 0.0))
