"""Quantized modules (``torch.ao.nn.quantized``): what ``convert`` turns an observed model into. ``Quantize`` and
``DeQuantize`` replace the stubs; ``Linear`` and ``Conv2d`` take quint8 activations and int8 weights and give
quint8 outputs with the output observer's scale and zero point, computed as PyTorch's fbgemm/x86 kernels do: an
exact integer accumulation, the float bias divided by ``x_scale * w_scale`` and added in float32, the sum times
``float32(x_scale * w_scale / out_scale)`` rounded to nearest even, plus the output zero point. ``dynamic`` holds
the dynamically quantized Linear."""
from __future__ import annotations

import numpy as np

from ....base import dtype as _dt
from ....core.creation import tensor
from ....core.tensor import Tensor
from ....nn.modules.container import Sequential
from ....nn.modules.linear import Identity
from ....ops.elementwise import add, mul
from ....ops.movement import cat
from ....nn import functional as F
from ....nn.modules.module import Module
from ....nn.utils.fusion import fuse_conv_bn_weights
from ...quantized_tensor import QuantizedTensor, quantize_per_channel, quantize_per_tensor
from . import dynamic  # noqa: F401
from ._weight_bias import WeightBias

__all__ = ["Quantize", "DeQuantize", "Linear", "Conv2d", "FloatFunctional", "QFunctional"]

_PER_CHANNEL = (_dt.per_channel_affine, _dt.per_channel_symmetric)


def _quantize_weight(weight: Tensor, observer) -> QuantizedTensor:
    """``weight``'s int8 codes with the observer's qparams (per tensor or per channel), clamped to its range."""
    scale, zero_point = observer.calculate_qparams()
    if observer.qscheme in _PER_CHANNEL:
        q = quantize_per_channel(weight, scale.double(), zero_point.long(), observer.ch_axis, _dt.qint8)
    else:
        q = quantize_per_tensor(weight, float(scale), int(zero_point), _dt.qint8)
    return q._like(np.clip(q._data, observer.quant_min, observer.quant_max).astype(q._data.dtype))


def _requantize(acc: np.ndarray, x: QuantizedTensor, w: QuantizedTensor, bias: Tensor | None, scale: float,
                zero_point: int, relu: bool, channel_axis: int) -> QuantizedTensor:
    """quint8 output codes of an int accumulation along ``channel_axis`` (fbgemm's ReQuantizeOutput, float bias)."""
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    w_scale = (np.float32(w._scale) if w._axis is None else w._scale.astype(np.float32).reshape(shape))
    act_times_w = np.float32(x._scale) * w_scale
    raw = acc.astype(np.float32)
    if bias is not None:
        raw = raw + (bias.detach().numpy(force=True).astype(np.float32).reshape(shape) / act_times_w)
    codes = np.rint(raw * (act_times_w / np.float32(scale)).astype(np.float32)) + zero_point
    codes = np.clip(codes, zero_point if relu else 0, 255)
    return QuantizedTensor._make(codes.astype(np.uint8), _dt.quint8, _dt.per_tensor_affine, float(scale),
                                 int(zero_point))


def _weight_codes(w: QuantizedTensor) -> np.ndarray:
    codes = w._data.astype(np.int64)
    if w._axis is None:
        return codes - int(w._zero_point)
    shape = [1] * codes.ndim
    shape[w._axis] = -1
    return codes - w._zero_point.reshape(shape)


def _check_input(x, name: str) -> QuantizedTensor:
    if not isinstance(x, QuantizedTensor) or x.dtype is not _dt.quint8:
        raise RuntimeError(f"{name}: expected a quint8 quantized input (the output of a Quantize module), got "
                           f"{getattr(x, 'dtype', type(x).__name__)}")
    return x


def _observers(mod):
    """(float module, weight observer, output observer) of an observed float or QAT module, as ``from_float``
    reads them: a QAT module's weight fake quant, else a fresh ``qconfig.weight()``; the first layer of a fused
    module."""
    if not hasattr(mod, "qconfig"):
        raise AssertionError("Input float module must have qconfig defined")
    output = mod.activation_post_process
    if hasattr(mod, "weight_fake_quant"):
        return mod, mod.weight_fake_quant, output
    return (mod[0] if isinstance(mod, Sequential) else mod), mod.qconfig.weight(), output


class Quantize(Module):
    """Quantizes its float input per tensor with a fixed scale and zero point."""

    def __init__(self, scale: float, zero_point: int, dtype, factory_kwargs=None) -> None:
        super().__init__()
        self.register_buffer("scale", tensor([scale]))
        self.register_buffer("zero_point", tensor([zero_point], dtype=_dt.int64))
        self.dtype = dtype

    def forward(self, X: Tensor) -> QuantizedTensor:
        return quantize_per_tensor(X, float(self.scale), int(self.zero_point), self.dtype)

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant: bool = False) -> Quantize:
        """From a QuantStub: its observer's qparams."""
        observer = mod.activation_post_process
        scale, zero_point = observer.calculate_qparams()
        return Quantize(scale.float().item(), zero_point.long().item(), observer.dtype)

    def extra_repr(self) -> str:
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(Module):
    """Dequantizes its input to float32."""

    def forward(self, Xq: QuantizedTensor) -> Tensor:
        return Xq.dequantize()

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant: bool = False) -> DeQuantize:
        return DeQuantize()


class _Quantized(WeightBias):
    """Shared state of the static quantized layers: int8 weight, float bias, output scale and zero point."""

    _RELU = False

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False):
        """From an observed float (or QAT, or fused) module: the weight quantized with its weight observer's
        qparams, the output scale and zero point from its output observer."""
        mod = cls._fold_bn(mod)
        layer, weight_observer, output_observer = _observers(mod)
        if not use_precomputed_fake_quant:
            weight_observer(layer.weight)
        if weight_observer.dtype is not _dt.qint8:
            raise AssertionError(f"Weight observer must have dtype torch.qint8, got {weight_observer.dtype}")
        out_scale, out_zero_point = output_observer.calculate_qparams()
        made = cls._like_float(layer)
        made.set_weight_bias(_quantize_weight(layer.weight.detach().float(), weight_observer), layer.bias)
        made.scale, made.zero_point = float(out_scale), int(out_zero_point)
        return made

    @classmethod
    def _fold_bn(cls, mod):
        return mod


class Linear(_Quantized):
    """Quantized Linear: quint8 in, int8 weight, quint8 out."""

    _PACKED_KEYS = True
    _version = 3   # PyTorch's: scale and zero_point in the state dict, the weight and bias in _packed_params

    def __init__(self, in_features: int, out_features: int, bias_: bool = True, dtype=_dt.qint8) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.scale, self.zero_point = 1.0, 0
        self._weight = quantize_per_tensor(tensor(np.zeros((out_features, in_features), np.float32)), 1.0, 0,
                                           _dt.qint8)
        self._bias = tensor(np.zeros(out_features, np.float32)) if bias_ else None

    def _get_name(self) -> str:
        return "QuantizedLinearReLU" if self._RELU else "QuantizedLinear"

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, scale={self.scale}, "
                f"zero_point={self.zero_point}, qscheme={self._weight.qscheme()}")

    @classmethod
    def _like_float(cls, layer):
        return cls(layer.in_features, layer.out_features)

    def forward(self, x: QuantizedTensor) -> QuantizedTensor:
        x = _check_input(x, self._get_name())
        rows = x._data.astype(np.int64).reshape(-1, self.in_features) - int(x._zero_point)
        acc = rows @ _weight_codes(self._weight).T
        out = _requantize(acc, x, self._weight, self._bias, self.scale, self.zero_point, self._RELU, 1)
        return out._like(out._data.reshape(*x.shape[:-1], self.out_features))


class Conv2d(_Quantized):
    """Quantized Conv2d (zero padding): quint8 in, int8 weight, quint8 out."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__()
        pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)   # noqa: E731
        if padding_mode != "zeros":
            raise NotImplementedError(f"quantized Conv2d: padding_mode={padding_mode!r} (tapelab pads with zeros)")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.padding, self.dilation = (pair(kernel_size), pair(stride), pair(padding),
                                                                      pair(dilation))
        self.padding_mode = padding_mode
        self.scale, self.zero_point = 1.0, 0
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self._weight = quantize_per_tensor(tensor(np.zeros(shape, np.float32)), 1.0, 0, _dt.qint8)
        self._bias = tensor(np.zeros(out_channels, np.float32)) if bias else None

    def _get_name(self) -> str:
        return "QuantizedConvReLU2d" if self._RELU else "QuantizedConv2d"

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
             f"scale={self.scale}, zero_point={self.zero_point}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self._bias is None:
            s += ", bias=False"
        return s

    @classmethod
    def _like_float(cls, layer):
        return cls(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride, layer.padding,
                   layer.dilation, layer.groups, layer.bias is not None, layer.padding_mode)

    @classmethod
    def _fold_bn(cls, mod):
        """A QAT conv-bn module's batch norm folded into its weight and bias first, as PyTorch's from_float."""
        if hasattr(mod, "bn") and hasattr(mod, "weight_fake_quant"):
            bn = mod.bn
            mod.weight, mod.bias = fuse_conv_bn_weights(mod.weight, mod.bias, bn.running_mean, bn.running_var,
                                                        bn.eps, bn.weight, bn.bias)
        return mod

    def forward(self, x: QuantizedTensor) -> QuantizedTensor:
        x = _check_input(x, self._get_name())
        codes = x._data.astype(np.int64) - int(x._zero_point)   # zero padding is the zero point's code
        (ph, pw), (sh, sw), (dh, dw), (kh, kw) = self.padding, self.stride, self.dilation, self.kernel_size
        codes = np.pad(codes, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        n, c, h, w = codes.shape
        oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
        g, wcodes = self.groups, _weight_codes(self._weight)
        cols = np.stack([codes[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                         for i in range(kh) for j in range(kw)], axis=2)          # (n, c, kh*kw, oh, ow)
        cols = cols.reshape(n, g, c // g * kh * kw, oh * ow)
        wg = wcodes.reshape(g, self.out_channels // g, -1)
        acc = np.einsum("gok,ngkp->ngop", wg, cols).reshape(n, self.out_channels, oh, ow)
        return _requantize(acc, x, self._weight, self._bias, self.scale, self.zero_point, self._RELU, 1)


class FloatFunctional(Module):
    """Tensor arithmetic as a module, so that eager quantization can observe its output (``prepare`` replaces the
    Identity ``activation_post_process``) and ``convert`` can swap it for QFunctional: skip connections
    (``self.skip_add.add(x, y)``) and concatenations in quantizable models."""

    def __init__(self) -> None:
        super().__init__()
        self.activation_post_process = Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use the underlying "
                           "operation")

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        return self.activation_post_process(add(x, y))

    def add_scalar(self, x: Tensor, y: float) -> Tensor:
        return add(x, y)   # not observed: the quantized op derives its qparams from the input's

    def mul(self, x: Tensor, y: Tensor) -> Tensor:
        return self.activation_post_process(mul(x, y))

    def mul_scalar(self, x: Tensor, y: float) -> Tensor:
        return mul(x, y)

    def cat(self, x: list, dim: int = 0) -> Tensor:
        return self.activation_post_process(cat(x, dim=dim))

    def add_relu(self, x: Tensor, y: Tensor) -> Tensor:
        return self.activation_post_process(F.relu(add(x, y)))


def _float_values(q: QuantizedTensor) -> np.ndarray:
    """A per-tensor quantized tensor's float32 values as the vectorised dequantize computes them: one fused
    ``code * scale + (-zero_point * scale)``."""
    if q._axis is not None:
        raise RuntimeError("quantized arithmetic: expected per-tensor quantized inputs")
    scale = np.float32(q._scale)
    offset = np.float32(-int(q._zero_point) * scale)
    return (q._data.astype(np.float64) * np.float64(scale) + np.float64(offset)).astype(np.float32)


def _requantized(values: np.ndarray, scale: float, zero_point: int, dtype, relu: bool = False) -> QuantizedTensor:
    """float32 ``values`` quantized with ``nearbyint(v * float32(1 / scale) + zero_point)`` in one rounding."""
    info = np.iinfo({_dt.quint8: np.uint8, _dt.qint8: np.int8, _dt.qint32: np.int32}[dtype])
    inv = np.float64(np.float32(1.0) / np.float32(scale))
    codes = np.rint((values.astype(np.float64) * inv + zero_point).astype(np.float32))
    codes = np.clip(codes, max(zero_point, info.min) if relu else info.min, info.max)
    return QuantizedTensor._make(codes.astype(info.dtype), dtype, _dt.per_tensor_affine, float(scale),
                                 int(zero_point))


class QFunctional(Module):
    """FloatFunctional's quantized counterpart (quint8): ``add``/``add_relu`` dequantize, add in float32 and quantize
    with the observed output scale and zero point; ``mul`` multiplies the codes; ``cat`` requantizes its parts."""

    def __init__(self) -> None:
        super().__init__()
        self.scale, self.zero_point = 1.0, 0
        self.activation_post_process = Identity()

    def _get_name(self) -> str:
        return "QFunctional"

    def extra_repr(self) -> str:
        return f"scale={self.scale}, zero_point={self.zero_point}"

    def forward(self, x):
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x: QuantizedTensor, y: QuantizedTensor) -> QuantizedTensor:
        return _requantized(_float_values(x) + _float_values(y), self.scale, self.zero_point, x.dtype)

    def add_relu(self, x: QuantizedTensor, y: QuantizedTensor) -> QuantizedTensor:
        return _requantized(_float_values(x) + _float_values(y), self.scale, self.zero_point, x.dtype, relu=True)

    def mul(self, x: QuantizedTensor, y: QuantizedTensor) -> QuantizedTensor:
        """The product of the centred codes, exact in integers, times ``float32(x_scale * y_scale / scale)``."""
        for q in (x, y):
            _float_values(q)   # per tensor only
        product = (x._data.astype(np.int64) - int(x._zero_point)) * (y._data.astype(np.int64) - int(y._zero_point))
        multiplier = np.float32(float(x._scale) * float(y._scale) / self.scale)
        codes = np.clip(np.rint(product.astype(np.float32) * multiplier) + self.zero_point, 0, 255)
        return QuantizedTensor._make(codes.astype(np.uint8), x.dtype, _dt.per_tensor_affine, float(self.scale),
                                     int(self.zero_point))

    def cat(self, x: list, dim: int = 0) -> QuantizedTensor:
        parts = [q._data if (q._scale, q._zero_point) == (self.scale, self.zero_point)
                 else _requantized(_float_values(q), self.scale, self.zero_point, q.dtype)._data for q in x]
        return QuantizedTensor._make(np.concatenate(parts, axis=dim), x[0].dtype, _dt.per_tensor_affine,
                                     float(self.scale), int(self.zero_point))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False) -> QFunctional:
        """The observed FloatFunctional's output qparams."""
        if type(mod) is not FloatFunctional:
            raise AssertionError("QFunctional.from_float expects an instance of FloatFunctional")
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        made = cls()
        made.scale, made.zero_point = float(scale), int(zero_point)
        return made
