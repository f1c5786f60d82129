"""Quantized tensors: integer codes with a scale and zero point (one, or one per channel along an axis).

A ``QuantizedTensor`` is a Tensor whose array holds the codes (int8 for ``qint8``, uint8 for ``quint8``, int32
for ``qint32``) and whose ``dtype`` is the quantized dtype. It answers PyTorch's quantized-tensor methods
(``dequantize``, ``int_repr``, ``q_scale``, ...) and prints as PyTorch prints one; any other operation is
refused through ``__torch_function__`` as PyTorch's QuantizedCPU backend refuses it, so the codes are never
read as plain integers by mistake. Rounding is ATen's: ``nearbyint`` of the fused ``x * float32(1 / scale) +
zero_point`` per tensor, of ``x * float32(1 / scale)`` then the zero point per channel.
"""
from __future__ import annotations

import warnings
import weakref

import numpy as np

from ..base import dtype as _dt
from ..base.repr import _add_suffixes, array_str
from ..core.creation import from_numpy
from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import _disabled_torch_function_impl, handle_torch_function, has_tensor_like
from ..core.tensor import Tensor
from ..serialization import register_quantized_constructor

__all__ = ["QuantizedTensor", "quantize_per_tensor", "quantize_per_channel", "dequantize"]

_CODES = {_dt.qint8: np.int8, _dt.quint8: np.uint8, _dt.qint32: np.int32}
_DEPRECATED = ("torch.quantize_per_tensor, torch.quantize_per_channel and other quantized tensor creation functions "
               "that produce tensors with dtype torch.quint8, torch.qint8, and torch.qint32 are deprecated and will "
               "be removed in a future PyTorch release. Please see https://github.com/pytorch/pytorch/issues/184982 "
               "for more information.")
# what a quantized tensor answers besides its own methods: metadata and copies that keep it quantized
_METADATA = {"size", "dim", "numel", "shape", "ndim", "nelement", "is_contiguous", "stride", "__len__", "element_size"}
# ops PyTorch runs on per-tensor quantized tensors that only move or select codes (or take their max), so they
# run on the codes and keep the scale and zero point; relu clamps at the zero point
_ON_CODES = {"reshape", "view", "flatten", "contiguous", "permute", "transpose", "squeeze", "unsqueeze", "__getitem__",
             "max_pool1d", "max_pool2d", "adaptive_max_pool2d", "relu", "chunk", "split", "unbind", "avg_pool", "slice", "select"}


def _round_div(total: np.ndarray, count) -> np.ndarray:
    """``nearbyint(total / count)`` of integer sums, exactly (ties to even)."""
    q, r = np.divmod(total, count)
    return q + ((2 * r > count) | ((2 * r == count) & (q % 2 == 1)))


def _average_codes(codes: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, ceil_mode: bool,
                   divisor, **_) -> np.ndarray:
    """2-d average pooling (the ``avg_pool`` op, which adaptive pooling also runs) on the codes, the output keeping
    the input's qparams: integer window sums over the window size, rounded to nearest even, as ATen's quantized
    kernel."""
    if len(kernel) != 2 or any(padding) or ceil_mode or divisor is not None:
        raise NotImplementedError("quantized avg_pool: tapelab pools 2-d codes without padding, ceil_mode or "
                                  "divisor_override")
    x = codes.astype(np.int64)
    (kh, kw), (sh, sw) = kernel, stride
    oh, ow = (x.shape[-2] - kh) // sh + 1, (x.shape[-1] - kw) // sw + 1
    out = np.empty(x.shape[:-2] + (oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            window = x[..., i * sh:i * sh + kh, j * sw:j * sw + kw]
            out[..., i, j] = _round_div(window.sum(axis=(-2, -1)), kh * kw)
    return out


class QuantizedTensor(Tensor):
    """Integer codes read through a scale and zero point: ``value = (code - zero_point) * scale``."""

    @classmethod
    def _make(cls, codes: np.ndarray, dtype, qscheme, scale, zero_point, axis: int | None = None) -> QuantizedTensor:
        q = from_numpy(np.array(codes, order="C")).as_subclass(_made_class())
        q.__dict__.update(_qdtype=dtype, _qscheme=qscheme, _scale=scale, _zero_point=zero_point, _axis=axis)
        return q

    @property
    def dtype(self):
        return self._qdtype

    @property
    def is_quantized(self) -> bool:
        return True

    def qscheme(self):
        return self._qscheme

    def _per_tensor(self, method: str) -> None:
        if self._axis is not None:
            raise RuntimeError("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.  "
                               "(Could this error message be improved?  If so, please report an enhancement "
                               "request to PyTorch.)")

    def _per_channel(self) -> None:
        if self._axis is None:
            raise RuntimeError("Expected quantizer->qscheme() == kPerChannelAffine || quantizer->qscheme() == "
                               "kPerChannelAffineFloatQParams to be true, but got false.  (Could this error message "
                               "be improved?  If so, please report an enhancement request to PyTorch.)")

    def q_scale(self) -> float:
        self._per_tensor("q_scale")
        return float(self._scale)

    def q_zero_point(self) -> int:
        self._per_tensor("q_zero_point")
        return int(self._zero_point)

    def q_per_channel_scales(self) -> Tensor:
        self._per_channel()
        return from_numpy(self._scale.copy())

    def q_per_channel_zero_points(self) -> Tensor:
        self._per_channel()
        return from_numpy(self._zero_point.copy())

    def q_per_channel_axis(self) -> int:
        self._per_channel()
        return self._axis

    def int_repr(self) -> Tensor:
        """The codes as a plain integer tensor (a copy)."""
        return from_numpy(self._data.copy())

    def _values(self) -> np.ndarray:
        codes = self._data.astype(np.int64)
        if self._axis is None:
            return (codes - self._zero_point).astype(np.float32) * np.float32(self._scale)
        shape = [1] * codes.ndim
        shape[self._axis] = -1
        return ((codes - self._zero_point.reshape(shape)) * self._scale.reshape(shape)).astype(np.float32)

    def dequantize(self) -> Tensor:
        """The float32 values the codes stand for."""
        return from_numpy(self._values())

    def _like(self, codes: np.ndarray) -> QuantizedTensor:
        return QuantizedTensor._make(codes, self._qdtype, self._qscheme, self._scale, self._zero_point, self._axis)

    def clone(self, *, memory_format=None) -> QuantizedTensor:
        return self._like(self._data.copy())

    def detach(self) -> QuantizedTensor:
        return self._like(self._data)

    def __deepcopy__(self, memo) -> QuantizedTensor:
        return self.clone()

    def __reduce_ex__(self, protocol):
        return (QuantizedTensor._make, (self._data.copy(), self._qdtype, self._qscheme, self._scale,
                                        self._zero_point, self._axis))

    def __repr__(self) -> str:
        values = self._values()
        suffixes = [f"size={tuple(values.shape)}", f"dtype={self._qdtype!r}",
                    f"quantization_scheme={self._qscheme!r}"]
        if self._axis is None:
            suffixes += [f"scale={float(self._scale)}", f"zero_point={int(self._zero_point)}"]
        else:
            suffixes += [f"scale={from_numpy(self._scale)!r}", f"zero_point={from_numpy(self._zero_point)!r}",
                         f"axis={self._axis}"]
        return _add_suffixes("tensor(" + array_str(values, len("tensor(")), suffixes, len("tensor("))

    def _on_codes(self, func, args: tuple, kwargs: dict, name: str):
        if name == "avg_pool":
            return self._like(_average_codes(self._data, **kwargs).astype(self._data.dtype))
        codes = Tensor._wrap(self._data.astype(np.float64), False, None, 0, [0], self._device)
        if name == "relu":
            out = codes.clamp(min=float(self._zero_point))
        else:
            out = func(codes, *args, **{k: v for k, v in kwargs.items() if k != "inplace"})
        # values come back as float64 codes; anything else (max pooling's indices) is a plain tensor
        wrap = lambda t: self._like(t.numpy().astype(self._data.dtype)) if t.dtype is _dt.float64 else t  # noqa: E731
        return type(out)(wrap(t) for t in out) if isinstance(out, (tuple, list)) else wrap(out)

    # the class itself takes no part in dispatch: a Tensor subclass with its own __torch_function__ makes the
    # dispatcher ask the hook on every op while the class lives, so the refusing subclass the tensors are made
    # as is created with the first quantized tensor (and collected with the last), not at import
    __torch_function__ = _disabled_torch_function_impl


def _refusing_torch_function(cls, func, types, args=(), kwargs=None):
    """Ops that only move, select or take the max of codes run on them; metadata passes; the rest is refused as
    PyTorch's QuantizedCPU backend refuses it."""
    name = getattr(func, "__name__", str(func))
    q = args[0] if args else None
    if (name in _ON_CODES or name.startswith("max_pool")) and isinstance(q, QuantizedTensor) and q._axis is None:
        return q._on_codes(func, args[1:], kwargs or {}, name)
    if name in _METADATA or name.startswith("q_") or name in ("dequantize", "int_repr", "qscheme"):
        return func(*[Tensor._wrap(a._data, False, None, 0, a._vc, a._device) if isinstance(a, QuantizedTensor)
                      else a for a in args], **(kwargs or {}))
    raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the 'QuantizedCPU' backend. "
                              f"tapelab's quantized tensors hold codes, scales and zero points only: "
                              f"dequantize() first")


_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _made_class() -> type:
    """The QuantizedTensor subclass whose __torch_function__ refuses float ops: one while quantized tensors
    exist."""
    cls = _LIVE.get("class")
    if cls is None:
        cls = _LIVE["class"] = type("QuantizedTensor", (QuantizedTensor,), {
            "__torch_function__": classmethod(_refusing_torch_function), "__module__": __name__,
            "__doc__": QuantizedTensor.__doc__})
    return cls


def _warn_deprecated_once() -> None:
    """PyTorch's deprecation of quantized tensor creation is a TORCH_WARN_ONCE: the first call in a process warns,
    wherever it comes from (a user's quantize_per_tensor or a layer's conversion), and no later one."""
    if not _WARNED:
        _WARNED.append(True)
        warnings.warn(_DEPRECATED, UserWarning, stacklevel=3)


_WARNED: list = []


def _from_checkpoint(codes: Tensor, quantizer: tuple) -> QuantizedTensor:
    """A quantized tensor a checkpoint holds: its integer codes and PyTorch's quantizer parameters
    (``torch._utils._rebuild_qtensor``); float zero points mean float qparams."""
    array = codes.numpy()
    dtype = {np.dtype(np.int8): _dt.qint8, np.dtype(np.uint8): _dt.quint8, np.dtype(np.int32): _dt.qint32}[array.dtype]
    scheme, *params = quantizer
    if scheme is _dt.per_tensor_affine:
        scale, zero_point = params
        return QuantizedTensor._make(array, dtype, scheme, float(scale), int(zero_point))
    scales, zero_points, axis = params
    zero_points = zero_points.numpy()
    if zero_points.dtype.kind == "f":
        scheme = _dt.per_channel_affine_float_qparams
    return QuantizedTensor._make(array, dtype, scheme, scales.numpy().astype(np.float64), zero_points, int(axis))


register_quantized_constructor(_from_checkpoint)


def _check_input(input: Tensor, dtype) -> None:
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"Quantize only works on Float Tensor, got {input.dtype.scalar_type}")
    if dtype not in _CODES:
        raise RuntimeError(f"ScalarType {getattr(dtype, 'scalar_type', dtype)} is not supported in new_qtensor.")


def _codes(q: np.ndarray, dtype) -> np.ndarray:
    info = np.iinfo(_CODES[dtype])
    return np.clip(q, info.min, info.max).astype(_CODES[dtype])


def quantize_per_tensor(input: Tensor, scale, zero_point, dtype) -> QuantizedTensor:
    """``clamp(nearbyint(x / scale + zero_point))`` as ``dtype``'s codes (ATen's fused multiply-add with the float32
    reciprocal of the scale); a list of tensors quantizes each."""
    if _DISPATCH.functions is not None and has_tensor_like((input, scale, zero_point)):
        return handle_torch_function(quantize_per_tensor, (input, scale, zero_point), input, scale, zero_point, dtype)
    if isinstance(input, (list, tuple)):
        return [quantize_per_tensor(t, float(s), int(z), dtype) for t, s, z in zip(input, scale, zero_point)]
    _check_input(input, dtype)
    _warn_deprecated_once()
    scale, zero_point = float(scale), int(zero_point)
    inv = np.float64(np.float32(1.0) / np.float32(scale))
    x = input.detach().numpy(force=True).astype(np.float64)
    q = np.rint((x * inv + zero_point).astype(np.float32))   # one rounding after the product and the sum: an FMA
    return QuantizedTensor._make(_codes(q, dtype), dtype, _dt.per_tensor_affine, scale, zero_point)


def quantize_per_channel(input: Tensor, scales: Tensor, zero_points: Tensor, axis: int, dtype) -> QuantizedTensor:
    """Per-channel codes along ``axis``: ``clamp(nearbyint(x * float32(1 / scale)) + zero_point)``."""
    if _DISPATCH.functions is not None and has_tensor_like((input, scales, zero_points)):
        return handle_torch_function(quantize_per_channel, (input, scales, zero_points), input, scales, zero_points,
                                     axis, dtype)
    _check_input(input, dtype)
    if scales.dim() != 1 or zero_points.dim() != 1 or scales.numel() != input.shape[axis] or \
            zero_points.numel() != scales.numel():
        raise RuntimeError(f"quantize_per_channel: expected {input.shape[axis]} scales and zero points along axis "
                           f"{axis}, got {tuple(scales.shape)} and {tuple(zero_points.shape)}")
    _warn_deprecated_once()
    scale64 = scales.detach().numpy(force=True).astype(np.float64)
    zp64 = zero_points.detach().numpy(force=True).astype(np.int64)
    shape = [1] * input.dim()
    shape[axis] = -1
    inv = (np.float32(1.0) / scale64.astype(np.float32)).reshape(shape)
    q = np.rint(input.detach().numpy(force=True).astype(np.float32) * inv) + zp64.reshape(shape)
    return QuantizedTensor._make(_codes(q, dtype), dtype, _dt.per_channel_affine, scale64, zp64, axis)


def dequantize(tensor) -> Tensor:
    """The float values of a quantized tensor (a float tensor is returned as it is; a list maps over)."""
    if _DISPATCH.functions is not None and has_tensor_like((tensor,)):
        return handle_torch_function(dequantize, (tensor,), tensor)
    if isinstance(tensor, (list, tuple)):
        return [dequantize(t) for t in tensor]
    return tensor.dequantize() if isinstance(tensor, QuantizedTensor) else tensor
