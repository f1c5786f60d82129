"""Which float module becomes which QAT module, and which module types receive a qconfig and an observer."""
from __future__ import annotations

from ...nn.modules import activation, batchnorm, conv, dropout, instancenorm, linear, normalization, sparse
from ...nn.modules.container import Sequential
from ..nn import intrinsic as nni, qat as nnqat
from ..nn.intrinsic import qat as nniqat
from ..nn import quantized as nnq
from ..nn.intrinsic import quantized as nniq
from ..nn.quantized import dynamic as nnqd
from .stubs import DeQuantStub, QuantStub

__all__ = ["DEFAULT_QAT_MODULE_MAPPINGS", "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS", "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS",
           "get_default_static_quant_module_mappings", "get_default_qat_module_mappings",
           "get_default_dynamic_quant_module_mappings", "get_default_qconfig_propagation_list", "no_observer_set"]

DEFAULT_QAT_MODULE_MAPPINGS = {
    linear.Linear: nnqat.Linear, conv.Conv1d: nnqat.Conv1d, conv.Conv2d: nnqat.Conv2d, conv.Conv3d: nnqat.Conv3d,
    nni.LinearReLU: nniqat.LinearReLU, nni.ConvReLU1d: nniqat.ConvReLU1d, nni.ConvReLU2d: nniqat.ConvReLU2d,
    nni.ConvReLU3d: nniqat.ConvReLU3d, nni.ConvBn1d: nniqat.ConvBn1d, nni.ConvBn2d: nniqat.ConvBn2d,
    nni.ConvBn3d: nniqat.ConvBn3d, nni.ConvBnReLU1d: nniqat.ConvBnReLU1d, nni.ConvBnReLU2d: nniqat.ConvBnReLU2d,
    nni.ConvBnReLU3d: nniqat.ConvBnReLU3d,
}
DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS = {linear.Linear: nnqd.Linear}
# what convert makes of observed float, fused and QAT modules (the quantized kernels tapelab has)
DEFAULT_STATIC_QUANT_MODULE_MAPPINGS = {
    QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize, linear.Linear: nnq.Linear, conv.Conv2d: nnq.Conv2d,
    nni.LinearReLU: nniq.LinearReLU, nni.ConvReLU2d: nniq.ConvReLU2d, nnqat.Linear: nnq.Linear,
    nnqat.Conv2d: nnq.Conv2d, nniqat.LinearReLU: nniq.LinearReLU, nniqat.ConvReLU2d: nniq.ConvReLU2d,
    nniqat.ConvBn2d: nnq.Conv2d, nniqat.ConvBnReLU2d: nniq.ConvReLU2d, nnq.FloatFunctional: nnq.QFunctional,
}
# the float modules PyTorch's eager quantization has quantized counterparts of (its static mapping's keys):
# they receive a qconfig and an output observer
_STATIC_QUANTIZABLE = {
    QuantStub, DeQuantStub, batchnorm.BatchNorm2d, batchnorm.BatchNorm3d, dropout.Dropout, conv.Conv1d, conv.Conv2d,
    conv.Conv3d, conv.ConvTranspose1d, conv.ConvTranspose2d, conv.ConvTranspose3d, activation.ELU,
    sparse.Embedding, sparse.EmbeddingBag, normalization.GroupNorm, activation.Hardswish,
    instancenorm.InstanceNorm1d, instancenorm.InstanceNorm2d, instancenorm.InstanceNorm3d, normalization.LayerNorm,
    activation.LeakyReLU, linear.Linear, activation.ReLU6, activation.PReLU, nni.BNReLU2d, nni.BNReLU3d,
    nni.ConvReLU1d, nni.ConvReLU2d, nni.ConvReLU3d, nni.LinearReLU, nni.ConvBn1d, nni.ConvBn2d, nni.ConvBn3d,
    nni.ConvBnReLU1d, nni.ConvBnReLU2d, nni.ConvBnReLU3d, nni.LinearBn1d, nnq.FloatFunctional,
}


def get_default_qat_module_mappings() -> dict:
    """Float module type -> its QAT module type (``prepare_qat`` swaps by it)."""
    return dict(DEFAULT_QAT_MODULE_MAPPINGS)


def get_default_static_quant_module_mappings() -> dict:
    """Observed module type -> its quantized type (``convert`` swaps by it)."""
    return dict(DEFAULT_STATIC_QUANT_MODULE_MAPPINGS)


def get_default_dynamic_quant_module_mappings() -> dict:
    """Float module type -> its dynamically quantized type (``quantize_dynamic`` swaps by it)."""
    return dict(DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS)


def get_default_qconfig_propagation_list() -> set:
    """The module types that ``prepare`` attaches an output observer to."""
    return _STATIC_QUANTIZABLE | set(DEFAULT_QAT_MODULE_MAPPINGS) | set(DEFAULT_QAT_MODULE_MAPPINGS.values()) | {
        Sequential}


def no_observer_set() -> set:
    """Module types whose output is never observed."""
    return set()
