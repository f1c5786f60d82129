"""Quant/DeQuant stubs: the points where an eager-mode model's tensors enter and leave quantized form. Identity
in float; ``prepare`` observes a QuantStub's output and ``convert`` swaps the stubs for real (de)quantizers."""
from __future__ import annotations

from ...core.tensor import Tensor
from ...nn.modules.module import Module

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper"]


class _Stub(Module):
    """A place ``convert`` swaps for a quantizing module; identity until then."""

    def __init__(self, qconfig=None) -> None:
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x: Tensor) -> Tensor:
        return x


class QuantStub(_Stub):
    """Where a tensor is to be quantized; identity until ``convert``."""


class DeQuantStub(_Stub):
    """Where a tensor is to be dequantized; identity until ``convert``."""


class QuantWrapper(Module):
    """``module`` between a QuantStub and a DeQuantStub (with the module's qconfig)."""

    def __init__(self, module: Module) -> None:
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X: Tensor) -> Tensor:
        return self.dequant(self.module(self.quant(X)))
