"""Fake quantization: quantize to integer codes and back in floating point, the core of quantization-aware training.

Each forward rounds as ATen's CPU kernels do (``nearbyint`` of ``x * (1 / scale)`` with the reciprocal in
float32, then the zero point added), so values equal PyTorch's bit for bit; the gradient is the
straight-through estimator masked to the codes that fell inside ``[quant_min, quant_max]`` (one backward op,
``grad * mask``, differentiable in ``grad`` as PyTorch's is). ``fused_moving_avg_obs_fake_quant`` is the
composite that ``FusedMovingAvgObsFakeQuantize`` (the default QAT fake quant) runs: it updates the running
min/max, chooses the qparams with ATen's ``ChooseQuantizationParams`` rule and fake-quantizes.
"""
from __future__ import annotations

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..base.grad_mode import no_grad
from ..core.overrides import handle_torch_function, has_tensor_like
from ..core.creation import from_numpy
from ..core.dispatch import apply
from ..core.registry import ALL, Op
from ._util import Tensor
from .reduce import array_sum

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine", "fused_moving_avg_obs_fake_quant",
           "_fake_quantize_learnable_per_tensor_affine"]
COMPOSITES = {"fused_moving_avg_obs_fake_quant": "the running min/max update and the qparams rule, then the "
                                                 "fused_moving_avg_obs_fq_helper op (fake quantization)"}

_INT64_LIMIT = 2.0 ** 63


def _per_tensor_arrays(xp, x, scale: float, zero_point: int, quant_min: int, quant_max: int):
    """(output, mask) of ATen's per-tensor kernel: the code is clamped as a float (so +-inf and huge values
    land on the bounds, NaN on ``quant_min``) and the output is computed in float32."""
    inv = np.float32(1.0) / np.float32(scale)
    q = xp.rint((x if x.dtype == np.float64 else x.astype(np.float32)) * inv) + np.float32(zero_point)
    clamped = xp.fmin(xp.fmax(q, np.float32(quant_min)), np.float32(quant_max))
    out = (clamped - np.float32(zero_point)).astype(np.float32) * np.float32(scale)
    return out.astype(x.dtype), (q >= quant_min) & (q <= quant_max)


def _per_channel_arrays(xp, x, scale, zero_point, axis: int, quant_min: int, quant_max: int):
    """(output, mask) of ATen's per-channel kernel: the code goes through int64 (a non-finite or huge one
    becomes INT64_MIN, so ``quant_min`` and masked), a float zero point is added before rounding, and the
    output is computed in double, then rounded to the input's dtype."""
    shape = [1] * x.ndim
    shape[axis] = -1
    scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    inv = np.float32(1.0) / scale.astype(np.float32)
    xs = (x if x.dtype == np.float64 else x.astype(np.float32)) * inv
    if zero_point.dtype.kind == "f":
        zero_point = zero_point.astype(np.float32)
        q = xp.rint(xs + zero_point)
    else:
        q = xp.rint(xs) + zero_point.astype(np.float64)
    wrapped = ~(xp.abs(q) < _INT64_LIMIT)
    q = xp.where(wrapped, float(quant_min), q)
    mask = ~wrapped & (q >= quant_min) & (q <= quant_max)
    out = (xp.clip(q, quant_min, quant_max) - zero_point.astype(np.float64)) * scale.astype(np.float64)
    return (out if x.dtype == np.float64 else out.astype(np.float32).astype(x.dtype)), mask


def _arrays(xp, x, qparams, scale, zero_point, axis, quant_min, quant_max):
    if axis is not None:
        return _per_channel_arrays(xp, x, *qparams, axis, quant_min, quant_max)
    if qparams:
        scale, zero_point = float(qparams[0].reshape(())), int(qparams[1].reshape(()))
    return _per_tensor_arrays(xp, x, scale, zero_point, quant_min, quant_max)


def _backward_fwd(xp, g, x, *qparams, scale=None, zero_point=None, axis=None, quant_min, quant_max):
    return g * _arrays(xp, x, qparams, scale, zero_point, axis, quant_min, quant_max)[1]


def _backward_vjp(g, out, grad, x, *qparams, **params):
    return (apply(_backward, g, x, *qparams, **params), None) + (None,) * len(qparams)


_backward = Op("fake_quantize_backward", _backward_fwd, _backward_vjp, saves=ALL)


def _fq_vjp(g, out, x, *qparams, **params):
    return (apply(_backward, g, x, *qparams, **params),) + (None,) * len(qparams)



_per_tensor = Op("fake_quantize_per_tensor_affine",
                 lambda xp, x, *, scale, zero_point, quant_min, quant_max:
                 _per_tensor_arrays(xp, x, scale, zero_point, quant_min, quant_max)[0],
                 _fq_vjp, saves=ALL, backward_name="FakeQuantizePerTensorAffineCachemaskBackward0")
_per_tensor_qparams = Op("fake_quantize_per_tensor_affine_tensor_qparams",
                         lambda xp, x, scale, zero_point, *, quant_min, quant_max:
                         _arrays(xp, x, (scale, zero_point), None, None, None, quant_min, quant_max)[0],
                         _fq_vjp, saves=ALL, backward_name="FakeQuantizePerTensorAffineCachemaskTensorQparamsBackward0")
_per_channel = Op("fake_quantize_per_channel_affine",
                  lambda xp, x, scale, zero_point, *, axis, quant_min, quant_max:
                  _per_channel_arrays(xp, x, scale, zero_point, axis, quant_min, quant_max)[0],
                  _fq_vjp, saves=ALL, backward_name="FakeQuantizePerChannelAffineCachemaskBackward0")


def _check_floating(input: Tensor, kernel: str) -> None:
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{input.dtype.scalar_type}\'')


def _check_range(quant_min: int, quant_max: int) -> None:
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")


def _check_ints(name: str, types: str, args: tuple, *ints) -> None:
    """PyTorch's argument parser refuses a float where the schema says int (``args``: all the arguments)."""
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in ints):
        got = ", ".join(type(v).__name__ for v in args)
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), but "
                        f"expected one of:\n * (Tensor input, {types})")


def _no_qparam_grad(name: str, *qparams: Tensor) -> None:
    for arg, t in zip(("scale", "zero_point"), qparams):
        if t.requires_grad:
            raise RuntimeError(f"The function '{name}' is not differentiable with respect to argument '{arg}'. "
                               f"This input cannot have requires_grad True.")


def fake_quantize_per_tensor_affine(input: Tensor, scale, zero_point, quant_min: int, quant_max: int) -> Tensor:
    """``(clamp(round(x / scale) + zero_point, quant_min, quant_max) - zero_point) * scale`` with one scale and
    zero point (numbers, or one-element tensors), gradient passed straight through inside the clamp range."""
    if _DISPATCH.functions is not None and has_tensor_like((input, scale, zero_point)):
        return handle_torch_function(fake_quantize_per_tensor_affine, (input, scale, zero_point), input, scale,
                                     zero_point, quant_min, quant_max)
    if isinstance(scale, Tensor) or isinstance(zero_point, Tensor):
        if not (isinstance(scale, Tensor) and isinstance(zero_point, Tensor)):
            raise TypeError("fake_quantize_per_tensor_affine(): scale and zero_point are both numbers or both "
                            "Tensors")
        _check_ints("fake_quantize_per_tensor_affine", "Tensor scale, Tensor zero_point, int quant_min, "
                    "int quant_max", (input, scale, zero_point, quant_min, quant_max), quant_min, quant_max)
        for t in (scale, zero_point):
            if t.numel() != 1:
                raise RuntimeError(f"a Tensor with {t.numel()} elements cannot be converted to Scalar")
        _check_floating(input, "fake_quantize_tensor_cachemask_kernel_type_handling")
        _check_range(quant_min, quant_max)
        _no_qparam_grad("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", scale, zero_point)
        return apply(_per_tensor_qparams, input, scale, zero_point, quant_min=quant_min, quant_max=quant_max)
    _check_ints("fake_quantize_per_tensor_affine", "float scale, int zero_point, int quant_min, int quant_max",
                (input, scale, zero_point, quant_min, quant_max), zero_point, quant_min, quant_max)
    _check_floating(input, "fake_quantize_tensor_cachemask_kernel_type_handling")
    _check_range(quant_min, quant_max)
    if not quant_min <= zero_point <= quant_max:
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    return apply(_per_tensor, input, scale=float(scale), zero_point=int(zero_point),
                 quant_min=int(quant_min), quant_max=int(quant_max))


def _learnable_zero_point(zero_point: np.ndarray, quant_min: int, quant_max: int, forward: bool) -> int:
    """ATen's zero point of the learnable fake quant: rounded to nearest for the forward, ``+ 0.5`` then truncated
    for the backward, clamped to the range as a float."""
    value = np.float32(zero_point.reshape(-1)[0])
    value = np.rint(value) if forward else value + np.float32(0.5)
    return int(min(max(value, np.float32(quant_min)), np.float32(quant_max)))


def _learnable_fwd(xp, x, scale, zero_point, *, quant_min, quant_max, grad_factor):
    zp = _learnable_zero_point(zero_point, quant_min, quant_max, True)
    return _per_tensor_arrays(xp, x, float(np.float32(scale.reshape(-1)[0])), zp, quant_min, quant_max)[0]


def _learnable_grads_fwd(xp, g, x, scale, zero_point, *, quant_min, quant_max, grad_factor):
    """(dx, dscale, dzero_point) of ATen's CPU kernel (LSQ's gradients): the code ``nearbyint(zero_point +
    x * (1 / scale))`` and ``(code - zero_point) * scale - x`` each one fused multiply-add as the compiler
    contracts them; the scale and zero-point gradients summed over all elements in float32 (the sum op's order)."""
    sc = np.float32(scale.reshape(-1)[0])
    inv = np.float32(1.0) / sc
    zp = _learnable_zero_point(zero_point, quant_min, quant_max, False)
    factor = np.float32(grad_factor)
    xf = x.astype(np.float32)
    code = xp.rint((xf.astype(np.float64) * np.float64(inv) + zp).astype(np.float32))
    inside = (code >= quant_min) & (code <= quant_max)
    error = ((xp.clip(code, quant_min, quant_max) - zp) * np.float64(sc) - xf).astype(np.float32)
    edge = xp.where(code < quant_min, np.float32(quant_min - zp), np.float32(quant_max - zp))
    dscale = xp.where(inside, (g * error).astype(np.float32) * inv, g * edge) * factor
    dzero = xp.where(inside, np.float32(0), g * np.float32(-1) * sc * factor)
    return ((g * inside).astype(g.dtype), array_sum(xp, dscale.astype(np.float32).reshape(-1), None).reshape(1),
            array_sum(xp, dzero.astype(np.float32).reshape(-1), None).reshape(1))


_learnable_grads = Op("fake_quantize_learnable_per_tensor_affine_backward", _learnable_grads_fwd, n_extra=2)


def _learnable_vjp(g, out, x, scale, zero_point, **params):
    dx, dscale, dzero = apply(_learnable_grads, g, x, scale, zero_point, **params)
    return dx, dscale, dzero


_learnable = Op("fake_quantize_learnable_per_tensor_affine", _learnable_fwd, _learnable_vjp, saves=ALL,
                aliases=("_fake_quantize_learnable_per_tensor_affine",))


def _fake_quantize_learnable_per_tensor_affine(self: Tensor, scale: Tensor, zero_point: Tensor, quant_min: int,
                                               quant_max: int, grad_factor: float = 1.0) -> Tensor:
    """Fake quantization whose scale and zero point are learned (LSQ): per-tensor values as
    ``fake_quantize_per_tensor_affine`` with the zero point rounded, and gradients for input, scale and zero
    point as ATen's CPU kernel computes them."""
    _check_floating(self, "fake_quantize_tensor_cachemask_kernel_type_handling")
    _check_range(quant_min, quant_max)
    return apply(_learnable, self, scale, zero_point, quant_min=int(quant_min), quant_max=int(quant_max),
                 grad_factor=float(grad_factor))


_ZERO_POINT_TYPES = ("Int", "Float", "Half")


def fake_quantize_per_channel_affine(input: Tensor, scale: Tensor, zero_point: Tensor, axis: int, quant_min: int,
                                     quant_max: int) -> Tensor:
    """Fake quantization with one scale and zero point per slice along ``axis`` (``zero_point`` int32, or
    float/half for float qparams); gradient passed straight through inside the clamp range."""
    if _DISPATCH.functions is not None and has_tensor_like((input, scale, zero_point)):
        return handle_torch_function(fake_quantize_per_channel_affine, (input, scale, zero_point), input, scale,
                                     zero_point, axis, quant_min, quant_max)
    _check_ints("fake_quantize_per_channel_affine", "Tensor scale, Tensor zero_point, int axis, int quant_min, "
                "int quant_max", (input, scale, zero_point, axis, quant_min, quant_max), axis, quant_min, quant_max)
    _check_floating(input, "fake_quantize_channel_cachemask_cpu_type_handling")
    if scale.dtype.scalar_type not in ("Float", "BFloat16"):
        raise RuntimeError(f"Scale must be Float or BFloat16, found {scale.dtype.scalar_type}")
    if zero_point.dtype.scalar_type not in _ZERO_POINT_TYPES:
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found {zero_point.dtype.scalar_type}")
    if scale.dim() != 1:
        raise RuntimeError("scale should be a 1-D tensor")
    if zero_point.dim() != 1:
        raise RuntimeError("zero point should be a 1-D tensor")
    if scale.numel() != zero_point.numel():
        raise RuntimeError("scale and zero-point need to have the same dimensions")
    if not 0 <= axis < input.dim():
        raise RuntimeError("`axis` must be between 0 and number of dimensions of input")
    if scale.numel() != input.shape[axis]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input tensor")
    _check_range(quant_min, quant_max)
    if zero_point.dtype.scalar_type == "Int" and zero_point.numel() and not bool(
            ((zero_point >= quant_min) & (zero_point <= quant_max)).all()):
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    _no_qparam_grad("fake_quantize_per_channel_affine", scale, zero_point)
    return apply(_per_channel, input, scale, zero_point, axis=int(axis), quant_min=int(quant_min),
                 quant_max=int(quant_max))


_SMALL_SCALE = np.float32(6.1e-5)


def choose_qparams(min_val: float, max_val: float, quant_min: int, quant_max: int,
                   preserve_sparsity: bool) -> tuple[np.float32, int]:
    """ATen's ``ChooseQuantizationParams`` (no power-of-two scale, no range reduction): the float32 scale and
    the nudged zero point that map ``[min(min_val, 0), max(max_val, 0)]`` onto ``[quant_min, quant_max]``;
    ``preserve_sparsity`` makes the range symmetric about zero."""
    lo, hi = np.float32(min_val), np.float32(max_val)
    if lo > hi:
        raise RuntimeError(f"In ChooseQuantizationParams, min should be less than or equal to max, got "
                           f"min={lo}, max={hi}")
    if lo < 0 and hi > 0 and preserve_sparsity:
        sym_min, sym_max = -((quant_max - quant_min) // 2 + 1), (quant_max - quant_min) // 2
        max_scale = max(abs(float(lo / np.float32(sym_min))), abs(float(hi / np.float32(sym_max))))
        lo, hi = np.float32(max_scale * sym_min), np.float32(max_scale * sym_max)
    lo, hi = min(lo, np.float32(0)), max(hi, np.float32(0))
    scale = (float(hi) - float(lo)) / (quant_max - quant_min)
    if np.float32(scale) == 0 or np.isinf(np.float32(1) / np.float32(scale)):
        scale = 0.1
    if scale < _SMALL_SCALE:
        original, scale = np.float32(scale), float(_SMALL_SCALE)
        if lo == 0:
            hi = np.float32(_SMALL_SCALE * (quant_max - quant_min))
        elif hi == 0:
            lo = np.float32(-_SMALL_SCALE * (quant_max - quant_min))
        else:
            amplifier = _SMALL_SCALE / original
            lo, hi = lo * amplifier, hi * amplifier
    scale = float(np.float32(scale))
    from_min, from_max = quant_min - float(lo) / scale, quant_max - float(hi) / scale
    from_min_error = abs(quant_min) - abs(float(lo) / scale)
    from_max_error = abs(quant_max) - abs(float(hi) / scale)
    initial = from_min if from_min_error < from_max_error else from_max
    if lo < 0 and hi > 0 and preserve_sparsity:
        initial = (quant_min + quant_max) / 2
    zero_point = quant_min if initial < quant_min else quant_max if initial > quant_max else int(np.rint(initial))
    return np.float32(scale), zero_point


def _moving_average(running: np.ndarray, current: np.ndarray, averaging_const: float) -> np.ndarray:
    """ATen's moving-average min/max: the first observation (running value infinite, or none yet per channel)
    is taken as it is."""
    if running.shape != np.shape(current):
        return np.asarray(current, np.float32)
    c = np.float32(averaging_const)
    return np.where(np.isinf(running), current, running + c * (current - running)).astype(np.float32)


def _helper_vjp(g, out, x, scale, zero_point, *, axis, quant_min, quant_max, enabled):
    if not enabled:
        return g, None, None
    return _fq_vjp(g, out, x, scale, zero_point, axis=axis, quant_min=quant_min, quant_max=quant_max)


_fused_helper = Op("fused_moving_avg_obs_fq_helper",
                   lambda xp, x, scale, zero_point, *, axis, quant_min, quant_max, enabled:
                   _arrays(xp, x, (scale, zero_point), None, None, axis, quant_min, quant_max)[0] if enabled
                   else x.copy(), _helper_vjp, saves=ALL)


def fused_moving_avg_obs_fake_quant(self: Tensor, observer_on: Tensor, fake_quant_on: Tensor, running_min: Tensor,
                                    running_max: Tensor, scale: Tensor, zero_point: Tensor, averaging_const: float,
                                    quant_min: int, quant_max: int, ch_axis: int, per_row_fake_quant: bool = False,
                                    symmetric_quant: bool = False) -> Tensor:
    """Observe (moving-average min/max into ``running_min``/``running_max``, qparams into ``scale`` and
    ``zero_point``, all in place) when ``observer_on``, then fake-quantize when ``fake_quant_on`` (else pass
    ``self`` through); one node, ``FusedMovingAvgObsFqHelperBackward0``, as PyTorch's."""
    tensors = (self, observer_on, fake_quant_on, running_min, running_max, scale, zero_point)
    if _DISPATCH.functions is not None and has_tensor_like(tensors):
        return handle_torch_function(fused_moving_avg_obs_fake_quant, tensors, *tensors, averaging_const, quant_min,
                                     quant_max, ch_axis, per_row_fake_quant, symmetric_quant)
    if int(observer_on.reshape(-1)[0]):
        x = self.detach().numpy(force=True)
        if per_row_fake_quant:
            rows = np.moveaxis(x, ch_axis, 0).reshape(x.shape[ch_axis], -1).astype(np.float32)
            current_min, current_max = rows.min(axis=1), rows.max(axis=1)
        else:
            current_min, current_max = np.float32(x.min()), np.float32(x.max())
        new_min = _moving_average(running_min.numpy(force=True), current_min, averaging_const)
        new_max = _moving_average(running_max.numpy(force=True), current_max, averaging_const)
        pairs = [choose_qparams(lo, hi, quant_min, quant_max, symmetric_quant)
                 for lo, hi in zip(new_min.reshape(-1), new_max.reshape(-1))]
        with no_grad():
            for buffer, value in ((running_min, new_min), (running_max, new_max),
                                  (scale, np.array([s for s, _ in pairs], np.float32)),
                                  (zero_point, np.array([z for _, z in pairs], np.int64))):
                if per_row_fake_quant and buffer.shape != value.shape:
                    buffer.resize_(value.shape)
                buffer.copy_(from_numpy(value.reshape(buffer.shape)))
    axis = ch_axis if per_row_fake_quant else None
    return apply(_fused_helper, self, scale, zero_point, axis=axis, quant_min=int(quant_min),
                 quant_max=int(quant_max), enabled=bool(int(fake_quant_on.reshape(-1)[0])))
