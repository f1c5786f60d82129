"""``torch.nn.utils.fusion``: fold an eval-mode BatchNorm into the convolution or linear layer
before it (deployment code calls these before export or inference)."""
from __future__ import annotations

import copy

from ...base.grad_mode import no_grad
from ...core.creation import ones_like, zeros_like
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` whose weight and bias include ``bn``'s normalisation (both in eval mode)."""
    assert not (conv.training or bn.training), "Fusion only for eval!"
    fused = copy.deepcopy(conv)
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose: bool = False):
    """``(weight, bias)`` Parameters of the convolution followed by the normalisation: each output
    channel (dim 1 of a transposed convolution's weight) scaled by ``w / sqrt(var + eps)``."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    with no_grad():
        conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
        bn_w = ones_like(bn_rm) if bn_w is None else bn_w
        bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
        rsqrt = (bn_rv + bn_eps).rsqrt()
        shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
        w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(dtype=w_dtype)
        b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(dtype=b_dtype)
    return Parameter(w, conv_w.requires_grad), Parameter(b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` whose weight and bias include ``bn``'s normalisation (both in eval mode)."""
    assert not (linear.training or bn.training), "Fusion only for eval!"
    fused = copy.deepcopy(linear)
    assert linear.out_features == bn.num_features or bn.num_features == 1, \
        "To fuse, linear.out_features == bn.num_features or bn.num_features == 1"
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """``(weight, bias)`` Parameters of the linear layer followed by the normalisation."""
    with no_grad():
        linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
        scale = bn_w * (bn_rv + bn_eps).rsqrt()
        w = linear_w * scale.unsqueeze(-1)
        b = (linear_b - bn_rm) * scale + bn_b
    return Parameter(w, linear_w.requires_grad), Parameter(b, linear_b.requires_grad)
