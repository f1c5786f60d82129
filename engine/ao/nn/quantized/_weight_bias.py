"""The weight-and-bias accessors every quantized layer has (static and dynamic): PyTorch keeps the pair packed
and exposes it through methods, not attributes."""
from __future__ import annotations

from ....core.tensor import Tensor
from ....nn.modules.module import Module
from ...quantized_tensor import QuantizedTensor


class WeightBias(Module):
    """A layer holding a quantized ``_weight`` and a float ``_bias`` (or None)."""

    def weight(self) -> QuantizedTensor:
        return self._weight

    def bias(self) -> Tensor | None:
        return self._bias

    def set_weight_bias(self, w: QuantizedTensor, b: Tensor | None) -> None:
        self._weight, self._bias = w, b
