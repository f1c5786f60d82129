"""Eager-mode quantization workflow: give modules their qconfig, attach observers (``prepare``), swap float
modules for QAT ones (``prepare_qat``) and, by a mapping, for others (``convert``)."""
from __future__ import annotations

import copy
import inspect
import warnings

from ...nn.modules.container import Sequential
from ...nn.modules.dropout import Dropout
from ...nn.modules.module import Module
from ..nn.intrinsic import _FusedModule
from ..nn.quantized import FloatFunctional, QFunctional
from .fake_quantize import FakeQuantizeBase
from .observer import ObserverBase
from ...base import dtype as _dt
from ...nn.modules.linear import Linear
from .qconfig import default_dynamic_qconfig
from .quantization_mappings import (get_default_dynamic_quant_module_mappings, get_default_qat_module_mappings,
                                    get_default_qconfig_propagation_list, get_default_static_quant_module_mappings)
from .stubs import DeQuantStub, QuantWrapper

__all__ = ["propagate_qconfig_", "prepare", "prepare_qat", "convert", "swap_module", "quantize_qat", "quantize_dynamic",
           "add_quant_dequant", "DEPRECATION_WARNING"]

DEPRECATION_WARNING = (
    "torch.ao.quantization is deprecated and will be removed in 2.10. \n"
    "For migrations of users: \n"
    "1. Eager mode quantization (torch.ao.quantization.quantize, torch.ao.quantization.quantize_dynamic), please "
    "migrate to use torchao eager mode quantize_ API instead \n"
    "2. FX graph mode quantization (torch.ao.quantization.quantize_fx.prepare_fx,torch.ao.quantization.quantize_fx."
    "convert_fx, please migrate to use torchao pt2e quantization API instead (prepare_pt2e, convert_pt2e) \n"
    "3. pt2e quantization has been migrated to torchao (https://github.com/pytorch/ao/tree/main/torchao/quantization/"
    "pt2e) \n"
    "see https://github.com/pytorch/ao/issues/2259 for more details")


def _deprecated() -> None:
    warnings.warn(DEPRECATION_WARNING, DeprecationWarning, stacklevel=3)


def _propagate(module: Module, qconfig_dict: dict, parent, prefix: str) -> None:
    qconfig = qconfig_dict.get(type(module), parent)
    qconfig = qconfig_dict.get(prefix, qconfig)
    qconfig = getattr(module, "qconfig", qconfig)
    module.qconfig = qconfig
    for name, child in module.named_children():
        _propagate(child, qconfig_dict, qconfig, f"{prefix}.{name}" if prefix else name)


def propagate_qconfig_(module: Module, qconfig_dict: dict | None = None,
                       prepare_custom_config_dict: dict | None = None) -> None:
    """Give every submodule a ``qconfig``: its own, else the one ``qconfig_dict`` names for its type or its
    qualified name, else its parent's (in place)."""
    _propagate(module, qconfig_dict or {}, None, "")


def _observer_forward_hook(self, input, output):
    return self.activation_post_process(output)


def _observer_forward_pre_hook(self, input):
    return self.activation_post_process(input[0])


def _is_memoryless(qconfig) -> bool:
    """An observer that keeps nothing between calls (averaging constant 1) observes the input instead."""
    act = qconfig.activation()
    observer = act.activation_post_process if isinstance(act, FakeQuantizeBase) else act
    return getattr(observer, "averaging_constant", None) == 1


def _needs_observation(m: Module) -> bool:
    return getattr(m, "qconfig", None) is not None


def _insert_observer(m: Module) -> None:
    if _needs_observation(m) and not isinstance(m, DeQuantStub):
        m.add_module("activation_post_process", m.qconfig.activation())
        if _is_memoryless(m.qconfig):
            m.register_forward_pre_hook(_observer_forward_pre_hook, prepend=True)
        else:
            m.register_forward_hook(_observer_forward_hook, prepend=True)


def _add_observer_(module: Module, propagation: set, non_leaf: set | None) -> None:
    for child in module.children():
        if type(child) is Dropout:
            continue
        if isinstance(child, (FloatFunctional, QFunctional)):
            if _needs_observation(child):   # its ops call the observer themselves
                child.activation_post_process = child.qconfig.activation()
        elif isinstance(child, _FusedModule) or (non_leaf is not None and type(child) in non_leaf):
            _insert_observer(child)
        else:
            _add_observer_(child, propagation, non_leaf)
    leaf = next(module.children(), None) is None
    if not isinstance(module, Sequential) and type(module) in propagation and (
            leaf or hasattr(module, "weight_fake_quant")):
        _insert_observer(module)


def prepare(model: Module, inplace: bool = False, allow_list: set | None = None,
            observer_non_leaf_module_list: set | None = None, prepare_custom_config_dict: dict | None = None):
    """Propagate the qconfig and attach an output observer (``activation_post_process``, run by a forward
    hook) to each quantizable module that has one."""
    _deprecated()
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    if not any(getattr(m, "qconfig", None) for m in model.modules()):
        warnings.warn("None of the submodule got qconfig applied. Make sure you passed correct configuration "
                      "through `qconfig_dict` or by assigning the `.qconfig` attribute directly on submodules",
                      stacklevel=2)
    _add_observer_(model, get_default_qconfig_propagation_list() if allow_list is None else allow_list,
                   observer_non_leaf_module_list)
    return model


def prepare_qat(model: Module, mapping: dict | None = None, inplace: bool = False):
    """Quantization-aware training: swap float modules for their QAT versions (weights fake-quantized) and
    attach fake-quantizing output observers. The model must be in training mode."""
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    mapping = get_default_qat_module_mappings() if mapping is None else mapping
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    convert(model, mapping=mapping, inplace=True, remove_qconfig=False)
    prepare(model, observer_non_leaf_module_list=set(mapping.values()), inplace=True)
    return model


def quantize_qat(model: Module, run_fn, run_args, inplace: bool = False):
    """``prepare_qat``, train with ``run_fn(model, *run_args)``, then ``convert``."""
    _deprecated()
    if not inplace:
        model = copy.deepcopy(model)
    model.train()
    prepare_qat(model, inplace=True)
    run_fn(model, *run_args)
    convert(model, inplace=True)
    return model


def _is_observer(m) -> bool:
    return isinstance(m, (ObserverBase, FakeQuantizeBase))


def _remove_qconfig(module: Module) -> None:
    for child in module.children():
        _remove_qconfig(child)
    if hasattr(module, "qconfig"):
        del module.qconfig
    if _is_observer(getattr(module, "activation_post_process", None)):
        delattr(module, "activation_post_process")
    for hooks, hook in ((module._forward_pre_hooks, _observer_forward_pre_hook),
                        (module._forward_hooks, _observer_forward_hook)):
        for key in [k for k, fn in hooks.items() if fn is hook]:
            del hooks[key]


def swap_module(mod: Module, mapping: dict, custom_module_class_mapping: dict | None = None,
                use_precomputed_fake_quant: bool = False) -> Module:
    """``mapping[type(mod)].from_float(mod)`` when ``mod`` has a qconfig and its type is mapped (its
    non-observer hooks carried over), else ``mod``."""
    if getattr(mod, "qconfig", None) is None or type(mod) not in mapping:
        return mod
    target = mapping[type(mod)]
    if "use_precomputed_fake_quant" in inspect.signature(target.from_float).parameters:
        new = target.from_float(mod, use_precomputed_fake_quant=use_precomputed_fake_quant)
    else:
        new = target.from_float(mod)
    for hook in mod._forward_pre_hooks.values():
        new.register_forward_pre_hook(hook)
    for hook in mod._forward_hooks.values():
        if hook is not _observer_forward_hook:
            new.register_forward_hook(hook)
    return new


def _convert(module: Module, mapping: dict, use_precomputed_fake_quant: bool) -> None:
    swapped = {}
    for name, child in module.named_children():
        if not isinstance(child, _FusedModule):
            _convert(child, mapping, use_precomputed_fake_quant)
        swapped[name] = swap_module(child, mapping, None, use_precomputed_fake_quant)
    for name, child in swapped.items():
        module._modules[name] = child


def convert(module: Module, mapping: dict | None = None, inplace: bool = False, remove_qconfig: bool = True,
            is_reference: bool = False, convert_custom_config_dict: dict | None = None,
            use_precomputed_fake_quant: bool = False):
    """Swap each submodule that has a qconfig and a mapped type for ``mapping[type].from_float(module)``
    (children first; a fused module is swapped whole; by default the static mapping to quantized modules), then
    drop the qconfigs and observers."""
    _deprecated()
    if is_reference:
        raise NotImplementedError("convert(is_reference=True): tapelab has no reference quantized modules")
    mapping = get_default_static_quant_module_mappings() if mapping is None else mapping
    if not inplace:
        module = copy.deepcopy(module)
    _convert(module, mapping, use_precomputed_fake_quant)
    if remove_qconfig:
        _remove_qconfig(module)
    return module


def quantize_dynamic(model: Module, qconfig_spec=None, dtype=_dt.qint8, mapping: dict | None = None,
                     inplace: bool = False) -> Module:
    """Swap the Linear layers (those ``qconfig_spec`` names: a set of types, or a dict from types or qualified
    names to qconfigs) for dynamically quantized ones: int8 weights, inputs quantized on each call."""
    _deprecated()
    if dtype is not _dt.qint8:
        raise NotImplementedError(f"quantize_dynamic: tapelab quantizes to qint8 weights only, got {dtype}")
    if qconfig_spec is None:
        qconfig_spec = {Linear: default_dynamic_qconfig}
    elif isinstance(qconfig_spec, set):
        qconfig_spec = dict.fromkeys(qconfig_spec, default_dynamic_qconfig)
    mapping = get_default_dynamic_quant_module_mappings() if mapping is None else mapping
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    propagate_qconfig_(model, qconfig_spec)
    convert(model, mapping, inplace=True)
    return model


def add_quant_dequant(module: Module) -> Module:
    """Wrap each leaf module that has a qconfig in a QuantWrapper."""
    if next(module.children(), None) is None and getattr(module, "qconfig", None):
        return QuantWrapper(module)
    for name, child in module.named_children():
        module._modules[name] = add_quant_dequant(child)
    return module
