"""Dynamically quantized modules (``torch.ao.nn.quantized.dynamic``): int8 weights, each input quantized to uint8
with qparams chosen from its own range, an exact int32 product, then float output, as PyTorch's fbgemm/x86
kernels compute it."""
from __future__ import annotations

import numpy as np

from .....base import dtype as _dt
from .....core.creation import from_numpy
from .....core.tensor import Tensor
from .....nn.modules.linear import Linear as _FloatLinear
from .....ops.quantize import choose_qparams
from ....quantized_tensor import quantize_per_channel, quantize_per_tensor
from .._weight_bias import WeightBias

__all__ = ["Linear"]


def _quantize_input(x: np.ndarray, reduce_range: bool) -> tuple[np.ndarray, np.float32, int]:
    """uint8 codes of ``x`` with qparams from its min and max (range 0..127 with ``reduce_range``), fbgemm's fused
    ``nearbyint(x * (1 / scale) + zero_point)``."""
    qmax = 127 if reduce_range else 255
    scale, zero_point = choose_qparams(float(x.min()) if x.size else 0.0, float(x.max()) if x.size else 0.0, 0,
                                       qmax, False)
    inv = np.float64(np.float32(1.0) / scale)
    codes = np.clip(np.rint((x.astype(np.float64) * inv + zero_point).astype(np.float32)), 0, qmax)
    return codes.astype(np.int64), scale, zero_point


class Linear(WeightBias):
    """``y = x W^T + b`` with ``W`` int8 (per tensor or per output channel) and ``x`` quantized per call; the
    int32 accumulation is exact and the float output is ``fma(acc, x_scale * w_scale, b)``, fbgemm's rounding."""

    _version = 4
    _PACKED_KEYS = True

    def __init__(self, in_features: int, out_features: int, bias_: bool = True, dtype=_dt.qint8) -> None:
        super().__init__()
        if dtype is not _dt.qint8:
            raise RuntimeError("Unsupported dtype specified for quantized Linear!")
        self.in_features, self.out_features = in_features, out_features
        self._dtype = dtype
        self._weight = quantize_per_tensor(from_numpy(np.zeros((out_features, in_features), np.float32)), 1.0, 0,
                                           _dt.qint8)
        self._bias = from_numpy(np.zeros(out_features, np.float32)) if bias_ else None

    def _get_name(self) -> str:
        return "DynamicQuantizedLinear"

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, dtype={self._dtype}, "
                f"qscheme={self._weight.qscheme()}")

    def forward(self, x: Tensor) -> Tensor:
        w = self._weight
        xs = x.detach().numpy(force=True).astype(np.float32)
        codes, x_scale, x_zp = _quantize_input(xs, reduce_range=True)
        rows = codes.reshape(-1, self.in_features) - x_zp
        acc = (rows @ w._data.astype(np.int64).T).astype(np.float64)   # exact: the int32 accumulation
        w_scale = (np.float32(w._scale) if w._axis is None else w._scale.astype(np.float32))
        out = acc * np.float64(np.float32(x_scale * w_scale))
        if self._bias is not None:
            out = out + self._bias.detach().numpy(force=True).astype(np.float64)
        return from_numpy(out.astype(np.float32).reshape(*xs.shape[:-1], self.out_features))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False) -> Linear:
        """The dynamic Linear of a float Linear: its weight observed by ``mod.qconfig.weight()`` and quantized
        with those qparams (per tensor or per channel), the float bias kept."""
        if not isinstance(mod, _FloatLinear):
            raise AssertionError("nn.quantized.dynamic.Linear.from_float only works for nn.Linear")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        observer = mod.qconfig.weight()
        dtype = observer.dtype
        if dtype is not _dt.qint8:
            raise RuntimeError(f"Unsupported dtype specified for dynamic quantized Linear: {dtype}")
        observer(mod.weight)
        scale, zero_point = observer.calculate_qparams()
        weight = mod.weight.detach().float()
        if observer.qscheme in (_dt.per_channel_affine, _dt.per_channel_symmetric):
            qweight = quantize_per_channel(weight, scale.double(), zero_point.long(), 0, _dt.qint8)
        else:
            qweight = quantize_per_tensor(weight, float(scale), int(zero_point), _dt.qint8)
        made = cls(mod.in_features, mod.out_features, dtype=dtype)
        made.set_weight_bias(qweight, mod.bias)
        return made
