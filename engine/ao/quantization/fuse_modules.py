"""Module fusion: replace a run of modules (conv-bn-relu, linear-relu, ...) by one fused module, the others by
Identity. For inference (``fuse_modules``) batch norm is folded into the convolution's weight; for QAT
(``fuse_modules_qat``) the modules are kept side by side in an ``intrinsic`` module."""
from __future__ import annotations

import copy

from ...nn.modules.activation import ReLU
from ...nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from ...nn.modules.conv import Conv1d, Conv2d, Conv3d
from ...nn.modules.linear import Identity, Linear
from ...nn.modules.module import Module
from ...nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval
from ..nn import intrinsic as nni

__all__ = ["fuse_modules", "fuse_modules_qat", "fuse_known_modules", "get_fuser_method", "fuse_conv_bn",
           "fuse_conv_bn_relu", "fuse_linear_bn"]

_CONV_BN = {Conv1d: nni.ConvBn1d, Conv2d: nni.ConvBn2d, Conv3d: nni.ConvBn3d}
_CONV_BN_RELU = {Conv1d: nni.ConvBnReLU1d, Conv2d: nni.ConvBnReLU2d, Conv3d: nni.ConvBnReLU3d}
_CONV_RELU = {Conv1d: nni.ConvReLU1d, Conv2d: nni.ConvReLU2d, Conv3d: nni.ConvReLU3d}


def _check_bn(conv, bn, what: str, bn_name: str, message: str) -> None:
    if bn.num_features != getattr(conv, what):
        raise AssertionError(message)
    if not bn.affine:
        raise AssertionError(f"Only support fusing {bn_name} with affine set to True")
    if not bn.track_running_stats:
        raise AssertionError(f"Only support fusing {bn_name} with tracking_running_stats set to True")


def fuse_conv_bn(is_qat: bool, conv, bn):
    """Conv + BatchNorm: kept together for QAT, folded into one convolution for inference."""
    if conv.training != bn.training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if not is_qat:
        return fuse_conv_bn_eval(conv, bn)
    _check_bn(conv, bn, "out_channels", "BatchNorm2d", "Output channel of Conv2d must match num_features of "
                                                        "BatchNorm2d.")
    if type(conv) not in _CONV_BN:
        raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn)}")
    return _CONV_BN[type(conv)](conv, bn)


def fuse_conv_bn_relu(is_qat: bool, conv, bn, relu):
    """Conv + BatchNorm + ReLU: kept together for QAT; for inference the folded convolution and the ReLU."""
    if not conv.training == bn.training == relu.training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if is_qat:
        _check_bn(conv, bn, "out_channels", "BatchNorm2d", "Output channel of Conv2d must match num_features of "
                                                            "BatchNorm2d")
        if type(conv) not in _CONV_BN_RELU:
            raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn, relu)}")
        return _CONV_BN_RELU[type(conv)](conv, bn, relu)
    if type(conv) not in _CONV_RELU:
        raise NotImplementedError(f"Cannot fuse eval modules: {(conv, bn, relu)}")
    return _CONV_RELU[type(conv)](fuse_conv_bn_eval(conv, bn), relu)


def fuse_linear_bn(is_qat: bool, linear, bn):
    """Linear + BatchNorm1d: kept together for QAT, folded into one Linear for inference."""
    if linear.training != bn.training:
        raise AssertionError("Linear and BN both must be in the same mode (train or eval).")
    if not is_qat:
        return fuse_linear_bn_eval(linear, bn)
    _check_bn(linear, bn, "out_features", "BatchNorm1d", "Output features of Linear must match num_features of "
                                                         "BatchNorm1d")
    return nni.LinearBn1d(linear, bn)


def _sequential(fused: type):
    def fuse(is_qat: bool, *modules):
        return fused(*modules)
    return fuse


_FUSERS = {
    **{(c, b): fuse_conv_bn for c, b in ((Conv1d, BatchNorm1d), (Conv2d, BatchNorm2d), (Conv3d, BatchNorm3d))},
    **{(c, b, ReLU): fuse_conv_bn_relu for c, b in ((Conv1d, BatchNorm1d), (Conv2d, BatchNorm2d),
                                                    (Conv3d, BatchNorm3d))},
    **{(c, ReLU): _sequential(f) for c, f in _CONV_RELU.items()},
    (Linear, BatchNorm1d): fuse_linear_bn,
    (Linear, ReLU): _sequential(nni.LinearReLU),
    (BatchNorm2d, ReLU): _sequential(nni.BNReLU2d),
    (BatchNorm3d, ReLU): _sequential(nni.BNReLU3d),
}


def get_fuser_method(op_list: tuple, additional_fuser_method_mapping: dict | None = None):
    """The function fusing modules of these types (None when there is none)."""
    return {**_FUSERS, **(additional_fuser_method_mapping or {})}.get(op_list)


def fuse_known_modules(mod_list: list, is_qat: bool, additional_fuser_method_mapping: dict | None = None) -> list:
    """The fused module followed by Identities (in the first module's mode); the first module's pre-hooks and
    the last one's hooks move to the fused module."""
    types = tuple(type(m) for m in mod_list)
    fuser = get_fuser_method(types, additional_fuser_method_mapping)
    if fuser is None:
        raise NotImplementedError(f"Cannot fuse modules: {types}")
    fused = fuser(is_qat, *mod_list)
    for hook in mod_list[0]._forward_pre_hooks.values():
        fused.register_forward_pre_hook(hook)
    mod_list[0]._forward_pre_hooks.clear()
    for hook in mod_list[-1]._forward_hooks.values():
        fused.register_forward_hook(hook)
    mod_list[-1]._forward_hooks.clear()
    rest = []
    for _ in mod_list[1:]:
        identity = Identity()
        identity.training = mod_list[0].training
        rest.append(identity)
    return [fused, *rest]


def _get(model: Module, key: str) -> Module:
    for name in key.split("."):
        model = getattr(model, name)
    return model


def _set(model: Module, key: str, module: Module) -> None:
    *path, last = key.split(".")
    setattr(_get(model, ".".join(path)) if path else model, last, module)


def _fuse(model: Module, modules_to_fuse: list, is_qat: bool, inplace: bool, fuser_func,
          fuse_custom_config_dict: dict | None) -> Module:
    if not inplace:
        model = copy.deepcopy(model)
    extra = (fuse_custom_config_dict or {}).get("additional_fuser_method_mapping", {})
    groups = [modules_to_fuse] if all(isinstance(m, str) for m in modules_to_fuse) else modules_to_fuse
    for group in groups:
        for key, module in zip(group, fuser_func([_get(model, k) for k in group], is_qat, extra)):
            _set(model, key, module)
    return model


def fuse_modules(model: Module, modules_to_fuse: list, inplace: bool = False, fuser_func=fuse_known_modules,
                 fuse_custom_config_dict: dict | None = None) -> Module:
    """Fuse each list of named submodules for inference (``[['conv', 'bn', 'relu'], ['fc', 'relu1']]``)."""
    return _fuse(model, modules_to_fuse, False, inplace, fuser_func, fuse_custom_config_dict)


def fuse_modules_qat(model: Module, modules_to_fuse: list, inplace: bool = False, fuser_func=fuse_known_modules,
                     fuse_custom_config_dict: dict | None = None) -> Module:
    """Fuse each list of named submodules for quantization-aware training (batch norm kept)."""
    return _fuse(model, modules_to_fuse, True, inplace, fuser_func, fuse_custom_config_dict)
