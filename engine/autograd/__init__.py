"""Reverse-mode autodiff: the graph, the resumable backward walk, grad modes."""
from __future__ import annotations

from .engine import BackwardStep, backward, backward_steps, grad
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import AccumulateGrad, Node, OpNode

__all__ = ["backward", "backward_steps", "grad", "BackwardStep", "Node", "OpNode", "AccumulateGrad",
           "gradcheck", "gradgradcheck", "GradcheckError", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled"]
