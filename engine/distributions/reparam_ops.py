"""The ops that carry gamma and Dirichlet draws' gradients as PyTorch computes them.

``_standard_gamma_grad`` and ``_dirichlet_grad`` are ATen's formulas (``reparam_formulas.py``); a draw
made without gradient (``gamma.py``) enters the graph through a pass-through op whose vjp is the one
PyTorch's backward computes: ``g * _standard_gamma_grad(alpha, x)`` for ``torch._standard_gamma``, and
``_dirichlet_grad(x, c, c.sum(-1)) * (g - (x * g).sum(-1))`` for ``torch.distributions``' ``_Dirichlet``.
"""
from __future__ import annotations

import numpy as np

from ..base.meta import has_data
from ..core.dispatch import apply
from ..core.registry import Op
from ..core.tensor import Tensor
from .reparam_formulas import dirichlet_grad as _dirichlet_formula
from .reparam_formulas import standard_gamma_grad as _gamma_formula

__all__ = ["standard_gamma_grad", "dirichlet_grad", "gamma_with_grad", "dirichlet_with_grad"]


def _gamma_grad_fwd(xp, alpha, x):
    shape = np.broadcast_shapes(alpha.shape, x.shape)
    if not has_data(xp):
        return xp.empty(shape, alpha.dtype)
    return _gamma_formula(xp, alpha, x).astype(alpha.dtype, copy=False)


def _dirichlet_grad_fwd(xp, x, alpha, total):
    if not has_data(xp):
        return xp.empty(np.broadcast_shapes(x.shape, alpha.shape, total.shape), x.dtype)
    return _dirichlet_formula(xp, x, alpha, total)


def _gamma_vjp(g, out, alpha, draw):
    return g * apply(_gamma_grad, alpha, out), None


def _dirichlet_vjp(g, out, concentration, draw):
    # PyTorch's backward is ``once_differentiable``: a constant in the draw and the concentration
    x, c = out.detach(), concentration.detach()
    total = c.sum(-1, keepdim=True).expand_as(c)
    return apply(_dirichlet_grad, x, c, total) * (g - (x * g).sum(-1, keepdim=True)), None


def _refused(error: type, message: str):
    """The vjp of a formula PyTorch gives no derivative: differentiating it raises PyTorch's error."""
    def vjp(g, out, *inputs):
        raise error(message)
    return vjp


def _kept_draw(xp, parameter, draw):
    """The pass-through forward: the draw the caller made without gradient."""
    return draw


# PyTorch gives neither formula a derivative: its outputs require grad, and differentiating them raises
_gamma_grad = Op("_standard_gamma_grad", _gamma_grad_fwd, elementwise=True,
                 vjp=_refused(NotImplementedError, "the derivative for '_standard_gamma_grad' is not implemented."))
_dirichlet_grad = Op("_dirichlet_grad", _dirichlet_grad_fwd, elementwise=True,
                     vjp=_refused(RuntimeError, "derivative for aten::_dirichlet_grad is not implemented"))
_gamma_draw = Op("standard_gamma_draw", _kept_draw, _gamma_vjp, save_output=True, n_kept=1,
                 backward_name="StandardGammaBackward0")
_dirichlet_draw = Op("dirichlet_draw", _kept_draw, _dirichlet_vjp, save_output=True, n_kept=1,
                     backward_name="_DirichletBackward")


def standard_gamma_grad(input: Tensor, output: Tensor) -> Tensor:
    """``torch._standard_gamma_grad``: ``d output / d input`` of standard gamma draws ``output`` with shapes ``input``."""
    return apply(_gamma_grad, input, output)


def dirichlet_grad(x: Tensor, alpha: Tensor, total: Tensor) -> Tensor:
    """``torch._dirichlet_grad``: ATen's Beta-draw gradient piece for Dirichlet draws ``x``."""
    return apply(_dirichlet_grad, x, alpha, total)


def gamma_with_grad(alpha: Tensor, draw: Tensor) -> Tensor:
    """``draw`` (standard gamma draws made without gradient) differentiable in ``alpha`` as PyTorch's."""
    return apply(_gamma_draw, alpha, draw)


def dirichlet_with_grad(concentration: Tensor, draw: Tensor) -> Tensor:
    """``draw`` (Dirichlet draws along the last dim) differentiable in ``concentration`` as PyTorch's."""
    return apply(_dirichlet_draw, concentration, draw)
