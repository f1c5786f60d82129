"""The window functions of ``torch.signal.windows``.

Each window is computed as PyTorch computes it: a ``linspace`` of the window's argument in the
requested dtype, then the waveform as tensor ops on it (``exp``, ``sin``, ``i0``, a weighted sum of
cosines), so float32 windows round as PyTorch's do and ``requires_grad=True`` gives the same
(non-leaf) result. ``sym=False`` gives the periodic window: the symmetric window of ``M + 1``
points without its last point. The checks (``M``, layout, dtype, each window's parameters) raise
PyTorch's ``ValueError`` with its text.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

from ...base.dtype import float32, float64, get_default_dtype
from ...base.layout import strided
from ...core.creation import arange, empty, linspace, ones, tensor
from ...core.tensor import Tensor
from ...ops.compare import minimum
from ...ops.elementwise import abs as _abs, cos, exp, sin, sqrt
from ...ops.special import i0

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _checked(name: str, M: int, dtype, layout):
    """The dtype to compute in, after PyTorch's common checks of every window."""
    dtype = get_default_dtype() if dtype is None else dtype
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (float32, float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtype


def _span(M: int, sym: bool) -> int:
    """The denominator of the window's argument: ``M - 1`` for a symmetric window, ``M`` for a periodic one."""
    return M if not sym and M > 1 else M - 1


def _trivial(M: int, dtype, device, requires_grad: bool) -> Tensor | None:
    """The windows of no point and of one point (all ones), which need no waveform."""
    if M == 0:
        return empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)
    if M == 1:
        return ones((1,), dtype=dtype, device=device, requires_grad=requires_grad)
    return None


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True, dtype=None,
                layout=strided, device=None, requires_grad: bool = False) -> Tensor:
    """The exponential (Poisson) window ``exp(-|n - center| / tau)``."""
    dtype = _checked("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)
    if center is None:
        center = _span(M, sym) / 2.0
    k = linspace(-center / tau, (M - 1 - center) / tau, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return exp(-_abs(k))


def cosine(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
           requires_grad: bool = False) -> Tensor:
    """The cosine (sine) window ``sin(pi (n + 0.5) / M)``, as SciPy's."""
    dtype = _checked("cosine", M, dtype, layout)
    if M == 0:
        return empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)
    step = math.pi / (M + 1 if not sym and M > 1 else M)
    k = linspace(0.5 * step, (M - 0.5) * step, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return sin(k)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=strided, device=None,
             requires_grad: bool = False) -> Tensor:
    """The gaussian window ``exp(-(n - c)^2 / (2 std^2))``."""
    dtype = _checked("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)
    first = -_span(M, sym) / 2.0
    scale = 1 / (std * math.sqrt(2))
    k = linspace(first * scale, (first + M - 1) * scale, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return exp(-(k ** 2))


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=strided, device=None,
           requires_grad: bool = False) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - ((n - N/2) / (N/2))^2)) / I0(beta)``."""
    dtype = _checked("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    done = _trivial(M, dtype, device, requires_grad)
    if done is not None:
        return done
    b = tensor(beta, dtype=dtype, device=device)   # beta in the window's dtype, so beta^2 - k^2 is never below 0
    step = 2.0 * b / (M - 1 if sym else M)
    last = minimum(b, -b + (M - 1) * step)
    k = linspace(-b, last, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return i0(sqrt(b * b - k ** 2)) / i0(b)


def general_cosine(M, *, a: Iterable, sym: bool = True, dtype=None, layout=strided, device=None,
                   requires_grad: bool = False) -> Tensor:
    """``sum_i (-1)^i a_i cos(2 pi i n / N)``, ``N = M - 1`` (symmetric) or ``M`` (periodic)."""
    dtype = _checked("general_cosine", M, dtype, layout)
    done = _trivial(M, dtype, device, requires_grad)
    if done is not None:
        return done
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    step = 2 * math.pi / (M - 1 if sym else M)
    k = linspace(0, (M - 1) * step, M, dtype=dtype, device=device, requires_grad=requires_grad)
    signed = tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype, device=device, requires_grad=requires_grad)
    i = arange(signed.shape[0], dtype=dtype, device=device, requires_grad=requires_grad)
    return (signed.unsqueeze(-1) * cos(i.unsqueeze(-1) * k)).sum(0)


def general_hamming(M, *, alpha: float = 0.54, sym: bool = True, dtype=None, layout=strided, device=None,
                    requires_grad: bool = False) -> Tensor:
    """``alpha - (1 - alpha) cos(2 pi n / N)``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
            requires_grad: bool = False) -> Tensor:
    """The Hamming window, ``general_hamming`` with ``alpha=0.54``."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
         requires_grad: bool = False) -> Tensor:
    """The Hann window, ``general_hamming`` with ``alpha=0.5``."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
             requires_grad: bool = False) -> Tensor:
    """``0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)``."""
    dtype = _checked("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
             requires_grad: bool = False) -> Tensor:
    """The triangular window ``1 - |2 n / N - 1|``."""
    dtype = _checked("bartlett", M, dtype, layout)
    done = _trivial(M, dtype, device, requires_grad)
    if done is not None:
        return done
    step = 2 / (M - 1 if sym else M)
    k = linspace(-1, -1 + (M - 1) * step, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return 1 - _abs(k)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
            requires_grad: bool = False) -> Tensor:
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)
