"""``tapelab.fft``: ``torch.fft``'s transforms, frequencies and shifts.

Every transform canonicalises ``s``/``n``, ``dim`` and ``norm`` as PyTorch does, resizes the input
(zero padding or trimming each transformed dim from its start), then applies one of the three
primitives of ``ops/fft.py`` (c2c, r2c, c2r), so the tape shows ``fft_c2c``/``fft_r2c``/``fft_c2r``
as PyTorch's profiler does. Real input to a complex transform is cast to complex first; integer
input to the default float dtype first.

>>> x = tapelab.randn(8, requires_grad=True)
>>> y = tapelab.fft.irfft(tapelab.fft.rfft(x) * 2, n=8)
>>> y.sum().backward()
"""
from __future__ import annotations

from .base import dtype as _dtype
from .core.creation import arange
from .core.tensor import Tensor
from .ops import fft as _ops
from .ops.conjugation import conj
from .ops.movement import constant_pad_nd, narrow, roll
from .ops.out import out_variants as _out_variants
from .ops._util import accepts_axis as _accepts_axis
from .base.dispatch_state import STATE as _DISPATCH
from .base.pytype import tp_name
from .core.overrides import handle_torch_function as _handle, has_tensor_like as _has_tensor_like

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "forward", "ortho")
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(norm: str | None, what: str) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise RuntimeError(f'{what}: Invalid normalization mode: "{norm}" (expected "forward", "backward" or "ortho")')
    return norm


def _check_input(x, what: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{what}(): argument 'input' (position 1) must be Tensor, not {tp_name(x)}")


def _floating(x: Tensor) -> Tensor:
    """Integers and bools become the default float dtype; half precision float32 (scipy has no half FFT)."""
    if x.is_complex() or x.dtype in (_dtype.float32, _dtype.float64):
        return x
    return x.to(_dtype.float32 if x.is_floating_point() else _dtype.get_default_dtype())


def _as_complex(x: Tensor) -> Tensor:
    x = _floating(x)
    return x if x.is_complex() else x.to(x.dtype.to_complex())


def _as_real(x: Tensor, what: str) -> Tensor:
    if x.is_complex():
        raise RuntimeError(f"{what} expects a real input tensor, but got {x.dtype.name} of shape {list(x.shape)}")
    return _floating(x)


def _shape_dims(x: Tensor, s, dim, what: str):
    """PyTorch's rules: ``dim`` None with ``s`` means the last len(s) dims; both None, every dim;
    ``s[i] == -1`` keeps that dim's size. Returns (sizes or None, dims)."""
    nd = x.ndim
    if isinstance(dim, int):
        dim = (dim,)
    if s is not None:
        s = tuple(int(n) for n in s)
        if dim is None:
            if len(s) > nd:
                raise RuntimeError(f"{what}: Got shape with {len(s)} values but input tensor only has {nd} "
                                   f"dimensions.")
            dim = tuple(range(nd - len(s), nd))
        elif len(s) != len(dim):
            raise RuntimeError(f"{what}: When given, dim and shape arguments must have the same length "
                               f"(got s={list(s)}, dim={list(dim)})")
    elif dim is None:
        dim = tuple(range(nd))
    dims = []
    for d in dim:
        if not -max(nd, 1) <= d < max(nd, 1) or nd == 0:
            raise IndexError(f"{what}: Dimension out of range (expected to be in range of [{-max(nd, 1)}, "
                             f"{max(nd, 1) - 1}], but got {d})")
        dims.append(d % nd)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{what}: dims must be unique (got {list(dim)})")
    if s is not None:
        s = tuple(x.shape[d] if n == -1 else n for n, d in zip(s, dims))
        for n in s:
            if n < 1:
                raise RuntimeError(f"{what}: Invalid number of data points ({n}) specified")
    return s, tuple(dims)


def _resize(x: Tensor, dims: tuple, sizes) -> Tensor:
    """``x`` trimmed or zero-padded (at the end) to ``sizes`` along ``dims``."""
    if sizes is None:
        return x
    pad = [0, 0] * x.ndim
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if n < have:
            x = narrow(x, d, 0, n)
        elif n > have:
            pad[2 * (x.ndim - 1 - d) + 1] = n - have
    if any(pad):
        while pad and not pad[-1] and not pad[-2]:
            pad = pad[:-2]
        x = constant_pad_nd(x, pad)
    return x


def _nonempty(x: Tensor, dims: tuple, what: str) -> None:
    for d in dims:
        if x.shape[d] < 1:
            raise RuntimeError(f"{what}: Invalid number of data points ({x.shape[d]}) specified")


# ---------------------------------------------------------------- n-dimensional transforms
def _c2c(what: str, forward: bool, x, s, dim, norm) -> Tensor:
    _check_input(x, what)
    s, dims = _shape_dims(x, s, dim, what)
    x = _resize(_as_complex(x), dims, s)
    _nonempty(x, dims, what)
    return _ops.c2c(x, dims, _norm(norm, what), forward)


def _r2c(what: str, x, s, dim, norm) -> Tensor:
    _check_input(x, what)
    s, dims = _shape_dims(x, s, dim, what)
    x = _resize(_as_real(x, what), dims, s)
    _nonempty(x, dims, what)
    return _ops.r2c(x, dims, norm)


def _c2r(what: str, x, s, dim, norm) -> Tensor:
    """irfftn's shape rule: the last dim's output length is ``s[-1]``, else 2 * (m - 1)."""
    _check_input(x, what)
    given = s
    s, dims = _shape_dims(x, s, dim, what)
    x = _as_complex(x)
    last = dims[-1]
    n = int(given[-1]) if given is not None and given[-1] != -1 else 2 * (x.shape[last] - 1)
    if n < 1:
        raise RuntimeError(f"{what}: Invalid number of data points ({n}) specified")
    sizes = (tuple(s[:-1]) if s is not None else tuple(x.shape[d] for d in dims[:-1])) + (n // 2 + 1,)
    x = _resize(x, dims, sizes)
    return _ops.c2r(x, dims, norm, n)


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The n-dimensional discrete Fourier transform over ``dim`` (every dim by default)."""
    return _c2c("fftn", True, input, s, dim, norm)


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of ``fftn``."""
    return _c2c("ifftn", False, input, s, dim, norm)


def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """``fftn`` of a real input, keeping the last dim's non-negative frequencies (n // 2 + 1)."""
    return _r2c("rfftn", input, s, dim, _norm(norm, "rfftn"))


def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of ``rfftn``: real output, the last dim of length ``s[-1]`` (default 2 * (m - 1))."""
    return _c2r("irfftn", input, s, dim, _norm(norm, "irfftn"))


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """``fftn`` of a Hermitian-symmetric signal given by its half: ``irfftn(conj(input))`` under the dual norm."""
    _check_input(input, "hfftn")
    return _c2r("hfftn", conj(_as_complex(input)), s, dim, _DUAL[_norm(norm, "hfftn")])


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of ``hfftn``: ``conj(rfftn(input))`` under the dual norm."""
    return conj(_r2c("ihfftn", input, s, dim, _DUAL[_norm(norm, "ihfftn")]))


# ---------------------------------------------------------------- one and two dimensions
def _one(n):
    return None if n is None else (n,)


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The one-dimensional discrete Fourier transform along ``dim``, of length ``n``."""
    return _c2c("fft", True, input, _one(n), (dim,), norm)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    return _c2c("ifft", False, input, _one(n), (dim,), norm)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    return _r2c("rfft", input, _one(n), (dim,), _norm(norm, "rfft"))


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    return _c2r("irfft", input, _one(n), (dim,), _norm(norm, "irfft"))


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    _check_input(input, "hfft")
    return _c2r("hfft", conj(_as_complex(input)), _one(n), (dim,), _DUAL[_norm(norm, "hfft")])


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    return conj(_r2c("ihfft", input, _one(n), (dim,), _DUAL[_norm(norm, "ihfft")]))


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    _check_input(input, "fft2")
    return fftn(input, s, dim, norm)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    _check_input(input, "ifft2")
    return ifftn(input, s, dim, norm)


def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    _check_input(input, "rfft2")
    return rfftn(input, s, dim, norm)


def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    _check_input(input, "irfft2")
    return irfftn(input, s, dim, norm)


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    _check_input(input, "hfft2")
    return hfftn(input, s, dim, norm)


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    _check_input(input, "ihfft2")
    return ihfftn(input, s, dim, norm)


# ---------------------------------------------------------------- frequencies and shifts
def fftfreq(n: int, d: float = 1.0, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``."""
    k = arange(n, dtype=_dtype.int64, device=device)
    k = k - (k >= (n + 1) // 2).long() * n
    out = k.to(dtype or _dtype.get_default_dtype()) / (d * n)
    return out.requires_grad_() if requires_grad else out


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """The non-negative sample frequencies of an ``n``-point ``rfft``: ``[0, ..., n // 2] / (d * n)``."""
    out = arange(n // 2 + 1, dtype=dtype or _dtype.get_default_dtype(), device=device) / (d * n)
    return out.requires_grad_() if requires_grad else out


def _shift(input: Tensor, dim, inverse: bool) -> Tensor:
    _check_input(input, "ifftshift" if inverse else "fftshift")
    dims = tuple(range(input.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    shifts = tuple(-(input.shape[d] // 2) if inverse else input.shape[d] // 2 for d in dims)
    return roll(input, shifts, dims) if dims else input


def fftshift(input: Tensor, dim=None) -> Tensor:
    """The zero frequency moved to the centre of ``dim`` (every dim by default)."""
    if _DISPATCH.functions is not None and _has_tensor_like((input,)):
        return _handle(fftshift, (input,), input, **({} if dim is None else {"dim": dim}))
    return _shift(input, dim, False)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of ``fftshift``."""
    if _DISPATCH.functions is not None and _has_tensor_like((input,)):
        return _handle(ifftshift, (input,), input, **({} if dim is None else {"dim": dim}))
    return _shift(input, dim, True)


# the transforms take out= as PyTorch's, and hand themselves to a program's Tensor subclass at their entry
globals().update(_out_variants(globals(), frozenset(n for n in __all__ if "shift" not in n and "freq" not in n)))
# ``axis=`` for ``dim``, as PyTorch's argument parser takes it (the transforms' out_variants do)
fftshift, ifftshift = _accepts_axis(fftshift), _accepts_axis(ifftshift)
