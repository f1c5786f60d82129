"""``torch.nn.grad``: the gradients of a convolution with respect to its input or its weight.

A convolution is linear in each argument, so each gradient is one backward pass through the
convolution from a zero tensor of the wanted size (the values of that tensor never matter).
"""
from __future__ import annotations

from ..autograd.engine import grad as _grad
from ..core import creation
from ..core.tensor import Tensor
from .functional_core import conv1d, conv2d, conv3d

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]

_CONV = {1: conv1d, 2: conv2d, 3: conv3d}


def _input_grad(nd, input_size, weight, grad_output, stride, padding, dilation, groups) -> Tensor:
    x = creation.zeros(tuple(input_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
    out = _CONV[nd](x, weight, None, stride, padding, dilation, groups)
    return _grad(out, x, grad_output, create_graph=grad_output.requires_grad or weight.requires_grad)[0]


def _weight_grad(nd, input, weight_size, grad_output, stride, padding, dilation, groups) -> Tensor:
    w = creation.zeros(tuple(weight_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
    out = _CONV[nd](input, w, None, stride, padding, dilation, groups)
    return _grad(out, w, grad_output, create_graph=grad_output.requires_grad or input.requires_grad)[0]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """The gradient of ``conv1d`` with respect to an input of size ``input_size``."""
    return _input_grad(1, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """The gradient of ``conv1d`` with respect to a weight of size ``weight_size``."""
    return _weight_grad(1, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    return _input_grad(2, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    return _weight_grad(2, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    return _input_grad(3, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    return _weight_grad(3, input, weight_size, grad_output, stride, padding, dilation, groups)
