"""Reverse-mode autodiff: the graph, the resumable backward walk, grad modes, custom Functions."""
from __future__ import annotations

from . import forward_ad, function, functional, grad_mode, graph  # noqa: F401  (public submodules)
from .anomaly import (AnomalyWarning, detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                      set_detect_anomaly)
from .engine import BackwardStep, backward, backward_steps, grad
from .function import Function, FunctionCtx, once_differentiable
from ..base.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                             set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from ..core.node import AccumulateGrad, Node, OpNode
from .variable import Variable

__all__ = ["backward", "backward_steps", "grad", "BackwardStep", "Node", "OpNode", "AccumulateGrad",
           "Function", "FunctionCtx", "once_differentiable", "gradcheck", "gradgradcheck",
           "GradcheckError", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "is_inference_mode_enabled", "detect_anomaly", "set_detect_anomaly",
           "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "AnomalyWarning", "Variable"]
