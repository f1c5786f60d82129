"""Discrete Fourier transforms: three primitives under PyTorch's ATen names, on ``scipy.fft`` for
the cpu (``workers=`` from ``set_num_threads``) and ``cupy.fft`` for cuda.

- ``fft_c2c``: complex to complex over ``dims``, forward or inverse (fftn, ifftn);
- ``fft_r2c``: real to the onesided complex half-spectrum (rfftn; ihfftn is its conjugate);
- ``fft_c2r``: a half-spectrum to real values of length ``n`` along the last dim (irfftn; hfftn).

Their vjps are transforms too, so every gradient differentiates again. With the conjugate Wirtinger
convention the vjp of a transform is its adjoint: the opposite direction under the dual norm
("backward" and "forward" swap, "ortho" stays). r2c's adjoint reads the half-spectrum gradient
zero-padded to the full length, then keeps the real part (its input is real); c2r's is r2c of the
gradient with the entries that stand for two bins (all but 0 and, for even n, n/2) doubled, as
PyTorch's ``fft_c2r_backward``. ``tapelab.fft`` (``engine/fft.py``) resizes inputs to ``s``/``n``
with pad and narrow before these run, so the primitives only ever see their exact sizes.
"""
from __future__ import annotations

import importlib
import math

from ..base import dtype as _dtype
from ..base.backend import is_numpy
from ..base.meta import has_data
from ..base.runtime import fft_workers
from ..core.dispatch import apply
from ..core.registry import NONE, Op
from ._util import Tensor
from .movement import constant_pad_nd

__all__: list = []   # the public names are tapelab.fft's (engine/fft.py)

_LIBS: dict = {}
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _run(xp, name: str, x, out_shape, out_dtype, **kw):
    """``scipy.fft.<name>`` on ``x`` for numpy, the namespace's own ``fft`` (``cupy.fft``, whose plans
    cuFFT caches) elsewhere; on the meta device only the result's shape."""
    if is_numpy(xp):
        lib = _LIBS.get("scipy") or _LIBS.setdefault("scipy", importlib.import_module("scipy.fft"))
        return getattr(lib, name)(x, workers=fft_workers(), **kw)
    if not has_data(xp):
        return xp.empty(out_shape, out_dtype)
    return getattr(xp.fft, name)(x, **kw)


def _complex_np(x):
    return _dtype.from_np(x.dtype).to_complex().np


def _c2c_fwd(xp, x, *, dims, norm, forward):
    return _run(xp, "fftn" if forward else "ifftn", x, x.shape, x.dtype, axes=dims, norm=norm)


def _c2c_vjp(g, out, x, *, dims, norm, forward):
    return (apply(fft_c2c, g, dims=dims, norm=_DUAL[norm], forward=not forward),)


def _half(shape, dim, n):
    return shape[:dim] + (n,) + shape[dim + 1:]


def _r2c_fwd(xp, x, *, dims, norm):
    out = _half(x.shape, dims[-1], x.shape[dims[-1]] // 2 + 1)
    return _run(xp, "rfftn", x, out, _complex_np(x), axes=dims, norm=norm)


def _r2c_vjp(g, out, x, *, dims, norm):
    last = dims[-1]
    full = x.shape[last]
    missing = full - g.shape[last]
    if missing:   # the bins rfft leaves out get no gradient: zeros, not their Hermitian mirror
        pad = [0, 0] * (g.ndim - 1 - last) + [0, missing]
        g = constant_pad_nd(g, pad)
    return (apply(fft_c2c, g, dims=dims, norm=_DUAL[norm], forward=False).real,)


def _c2r_fwd(xp, x, *, dims, norm, n):
    s = [x.shape[d] for d in dims[:-1]] + [n]
    real = _dtype.from_np(x.dtype).to_real().np
    return _run(xp, "irfftn", x, _half(x.shape, dims[-1], n), real, s=s, axes=dims, norm=norm)


def _c2r_vjp(g, out, x, *, dims, norm, n):
    gi = apply(fft_r2c, g, dims=dims, norm=_DUAL[norm])
    m = gi.shape[dims[-1]]
    doubled = n - m   # bins 1 .. n - m stand for a bin and its mirror image
    if doubled > 0:
        w = [1.0] + [2.0] * doubled + [1.0] * (m - 1 - doubled)
        shape = [1] * gi.ndim
        shape[dims[-1]] = m
        gi = gi * gi.new_tensor(w, dtype=_dtype.from_np(g._data.dtype)).reshape(shape)
    return (gi,)


def _fft_cost(input_shapes, output_shape) -> int:
    """About 5 N log2 N real FLOPs over the transformed elements (the radix-2 count)."""
    n = max(math.prod(output_shape), math.prod(input_shapes[0]) if input_shapes else 1)
    return int(5 * n * math.log2(n)) if n > 1 else 0


fft_c2c = Op("fft_c2c", _c2c_fwd, _c2c_vjp, saves=NONE, cost=_fft_cost)
fft_r2c = Op("fft_r2c", _r2c_fwd, _r2c_vjp, saves=NONE, cost=_fft_cost)
fft_c2r = Op("fft_c2r", _c2r_fwd, _c2r_vjp, saves=NONE, cost=_fft_cost)


def c2c(x: Tensor, dims: tuple, norm: str, forward: bool) -> Tensor:
    return apply(fft_c2c, x, dims=dims, norm=norm, forward=forward)


def r2c(x: Tensor, dims: tuple, norm: str) -> Tensor:
    return apply(fft_r2c, x, dims=dims, norm=norm)


def c2r(x: Tensor, dims: tuple, norm: str, n: int) -> Tensor:
    return apply(fft_c2r, x, dims=dims, norm=norm, n=n)
