"""Short-time Fourier transforms, ``stft`` and ``istft``: compositions of pad, unfold, the FFT
primitives of ``ops/fft.py`` and an overlap-add (``index_add``), so their gradients come from those
ops and the tape shows each step. PyTorch's argument rules and errors, its frame layout
(``(..., freq, frames)``) and its window-envelope normalisation in ``istft``."""
from __future__ import annotations

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..core.creation import arange, ones, zeros
from . import fft as _fft
from .conjugation import view_as_real
from ._util import Tensor, warn_once
from .indexing import index_add
from .movement import constant_pad_nd, pad as _pad

__all__ = ["stft", "istft"]

def _window(window, n_fft: int, win_length: int, like: Tensor, what: str) -> Tensor:
    """The window of ``win_length`` (ones by default), zero-padded on both sides to ``n_fft``."""
    if win_length <= 0 or win_length > n_fft:
        raise RuntimeError(f"{what}: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is None:
        window = ones(win_length, dtype=like.dtype.to_real(), device=like.device)
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{what}: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    left = (n_fft - win_length) // 2
    return constant_pad_nd(window, [left, n_fft - win_length - left]) if win_length < n_fft else window


def stft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None, window=None,
         center: bool = True, pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None) -> Tensor:
    """The short-time Fourier transform of a 1-D signal or a batch of them: ``(..., n_fft // 2 + 1, frames)``
    (onesided) complex values, or their real view with ``return_complex=False``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, window)):
        return handle_torch_function(stft, (input, window), input, n_fft, hop_length=hop_length,
                                     win_length=win_length, window=window, center=center, pad_mode=pad_mode,
                                     normalized=normalized, onesided=onesided, return_complex=return_complex)
    if window is None:
        warn_once("A window was not provided. A rectangular window will be applied,which is known to cause spectral "
                   "leakage. Other windows such as torch.hann_window or torch.hamming_window are recommended to "
                   "reduce spectral leakage.To suppress this warning and use a rectangular window, explicitly set "
                   "`window=torch.ones(n_fft, device=<device>)`.")
    complex_in = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warn_once("stft with return_complex=False is deprecated. In a future pytorch release, stft will return "
                   "complex tensors for all inputs, and return_complex=False will raise an error.\nNote: you can "
                   "still call torch.view_as_real on the complex output to recover the old return format.")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D tensor of shape "
                           f"{list(input.shape)}")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    if not (x.is_complex() or x.is_floating_point()):
        x = x.to(_dtype.get_default_dtype())
    if center:
        half = n_fft // 2
        x = _pad(x.unsqueeze(1), [half, half], mode=pad_mode).squeeze(1)
    if not 0 < n_fft <= x.shape[-1]:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop) * _window(window, n_fft, win_length, x, "stft")   # (batch, frames, n_fft)
    norm = "ortho" if normalized else "backward"
    onesided = not complex_in if onesided is None else onesided
    if onesided and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    if onesided:
        spec = _fft.r2c(frames, (2,), norm)
    else:
        spec = _fft.c2c(frames if frames.is_complex() else frames.to(frames.dtype.to_complex()), (2,), norm, True)
    spec = spec.transpose(1, 2)
    if input.ndim == 1:
        spec = spec.squeeze(0)
    return spec if return_complex else view_as_real(spec)


def istft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None, window=None,
          center: bool = True, normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """The inverse of ``stft`` by windowed overlap-add, divided by the summed squared window."""
    if _DISPATCH.functions is not None and has_tensor_like((input, window)):
        return handle_torch_function(istft, (input, window), input, n_fft, hop_length=hop_length,
                                     win_length=win_length, window=window, center=center, normalized=normalized,
                                     onesided=onesided, length=length, return_complex=return_complex)
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex, but got {input.ndim}D")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    spec = input.unsqueeze(0) if input.ndim == 2 else input
    n_frames = spec.shape[-1]
    onesided = spec.shape[-2] != n_fft if onesided is None else onesided
    expected = n_fft // 2 + 1 if onesided else n_fft
    if spec.shape[-2] != expected:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {spec.shape[-2]}" if onesided else
                           f"istft: expected the frequency dimension to equal n_fft={n_fft}, but got {spec.shape[-2]}")
    norm = "ortho" if normalized else "backward"
    cols = spec.transpose(1, 2)                                              # (batch, frames, freq)
    if onesided:
        frames = _fft.c2r(cols, (2,), norm, n_fft)
    else:
        frames = _fft.c2c(cols, (2,), norm, False)
        if not return_complex:
            frames = frames.real
    w = _window(window, n_fft, win_length, frames, "istft")
    frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    index = (arange(n_frames, device=spec.device).unsqueeze(1) * hop + arange(n_fft, device=spec.device)).reshape(-1)
    y = index_add(zeros(spec.shape[0], total, dtype=frames.dtype, device=spec.device), 1, index,
                  frames.reshape(spec.shape[0], -1))
    envelope = index_add(zeros(total, dtype=w.dtype, device=spec.device), 0, index,
                         (w * w).reshape(1, -1).expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    end = min(end, total)
    y, envelope = y[:, start:end], envelope[start:end]
    if envelope.numel() and bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: the summed squared window is (nearly) zero somewhere; "
                           "choose a window and hop_length that satisfy the NOLA constraint")
    y = y / envelope
    if length is not None and y.shape[-1] < length:
        y = constant_pad_nd(y, [0, length - y.shape[-1]])
    return y.squeeze(0) if input.ndim == 2 else y


METHODS = ("stft", "istft")
COMPOSITES = {"stft": "pad, unfold, a window product and the rfft/fft primitives",
              "istft": "the irfft/ifft primitives, a window product and an overlap-add (index_add)"}
