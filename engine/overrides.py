"""``torch.overrides``: PyTorch's ``__torch_function__`` protocol (``TorchFunctionMode``,
``handle_torch_function``, ...). The mechanism is ``core/overrides.py``, on the dispatcher: see
its docstring for who takes part and what a handler's ``func`` is."""
from __future__ import annotations

from .core.overrides import (BaseTorchFunctionMode, DisableTorchFunction, DisableTorchFunctionSubclass, OpFunction,  # noqa: F401
                             TorchFunctionMode, _get_current_function_mode, _get_current_function_mode_stack,
                             _is_torch_function_mode_enabled, _len_torch_function_stack, _pop_mode_temporarily,
                             get_default_nowrap_functions, get_ignored_functions, get_overridable_functions,
                             handle_torch_function, wrap_torch_function,
                             has_torch_function, has_torch_function_unary, has_torch_function_variadic,
                             is_tensor_like, is_tensor_method_or_property, resolve_name)

__all__ = ["TorchFunctionMode", "handle_torch_function", "has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "is_tensor_like", "is_tensor_method_or_property",
           "get_default_nowrap_functions", "get_ignored_functions", "get_overridable_functions", "resolve_name",
           "BaseTorchFunctionMode", "wrap_torch_function"]
