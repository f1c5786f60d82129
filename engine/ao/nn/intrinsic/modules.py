"""The fused float modules of ``torch.ao.nn.intrinsic``: a sequence of float modules that quantization treats as
one (``fuse_modules`` makes them; ``prepare_qat`` swaps them for their ``intrinsic.qat`` versions)."""
from __future__ import annotations

from ....nn.modules.activation import ReLU
from ....nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from ....nn.modules.container import Sequential
from ....nn.modules.conv import Conv1d, Conv2d, Conv3d
from ....nn.modules.linear import Linear

__all__ = ["_FusedModule", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU", "ConvBn1d", "ConvBn2d",
           "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d", "BNReLU2d", "BNReLU3d", "LinearBn1d"]


class _FusedModule(Sequential):
    """A Sequential of the modules fused, checked for their types."""

    _types: tuple = ()

    def __init__(self, *modules) -> None:
        if len(modules) != len(self._types) or not all(type(m) is t for m, t in zip(modules, self._types)):
            raise AssertionError(f"Incorrect types for input modules{''.join(str(type(m)) for m in modules)}")
        super().__init__(*modules)


def _fused(name: str, *types: type) -> type:
    doc = f"{' followed by '.join(t.__name__ for t in types)}, fused: quantization treats it as one module."
    return type(name, (_FusedModule,), {"_types": types, "__doc__": doc, "__module__": __name__.rpartition(".")[0]})


ConvReLU1d, ConvReLU2d, ConvReLU3d = (_fused(f"ConvReLU{n}d", c, ReLU) for n, c in ((1, Conv1d), (2, Conv2d),
                                                                                   (3, Conv3d)))
LinearReLU = _fused("LinearReLU", Linear, ReLU)
ConvBn1d, ConvBn2d, ConvBn3d = (_fused(f"ConvBn{n}d", c, b) for n, c, b in ((1, Conv1d, BatchNorm1d),
                                                                           (2, Conv2d, BatchNorm2d),
                                                                           (3, Conv3d, BatchNorm3d)))
ConvBnReLU1d, ConvBnReLU2d, ConvBnReLU3d = (_fused(f"ConvBnReLU{n}d", c, b, ReLU)
                                            for n, c, b in ((1, Conv1d, BatchNorm1d), (2, Conv2d, BatchNorm2d),
                                                            (3, Conv3d, BatchNorm3d)))
BNReLU2d, BNReLU3d = _fused("BNReLU2d", BatchNorm2d, ReLU), _fused("BNReLU3d", BatchNorm3d, ReLU)
LinearBn1d = _fused("LinearBn1d", Linear, BatchNorm1d)
