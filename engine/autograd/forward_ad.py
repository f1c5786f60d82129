"""``torch.autograd.forward_ad``: forward-mode AD with dual tensors.

Inside a ``dual_level``, ``make_dual(x, t)`` gives a tensor carrying the tangent ``t``; every op
on it carries a tangent to its result, which ``unpack_dual`` reads. A dispatcher ``Mode``
(``_DualMode``) does the carrying, so it works under ``no_grad`` as PyTorch's does and needs no
per-op rule of its own: an op's Jacobian-vector product is the derivative of its declared vjp
(linear in its cotangent ``g``) along the tangents, ``J t = d/dg <vjp(g), t>``, one small
reverse pass per op. A custom ``Function`` uses its ``jvp``, as in PyTorch.

Tangents are kept per array (the tensor's ``_data``), so an in-place op moves its result's
tangent onto its target through the mode's ``write``/``copy`` hooks. One level at a time, as in
PyTorch. Not carried: complex tensors (refused), a view's in-place update into its base's tangent.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, NamedTuple

from ..base.grad_mode import enable_grad, is_grad_enabled
from ..core.creation import empty_strided
from ..core.dispatch import LOCAL, Mode, apply
from ..core.tensor import Tensor
from . import function as _function
from .engine import grad as _grad

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "dual_level"]

_current_level = -1
_MODE: list = []   # the active level's _DualMode


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal (a view without the tangent) and the tangent."""

    primal: Tensor
    tangent: Tensor | None


class _DualMode(Mode):
    """Carries tangents through every op dispatched while a dual level is entered."""

    whole_layer_ops = False   # recurrent layers run a cell op per step, each with its vjp

    def __init__(self):
        self.tangents: dict = {}   # id(array) -> (weakref to the array, tangent)

    # ---------------------------------------------------------------- the tangent table
    def tangent(self, t: Tensor) -> Tensor | None:
        entry = self.tangents.get(id(t._data))
        if entry is None or entry[0]() is not t._data:
            return None
        return entry[1]

    def repr_suffixes(self, t: Tensor) -> list:
        """A dual tensor prints its tangent last, as PyTorch's."""
        tangent = self.tangent(t)
        return [] if tangent is None else [f"tangent={tangent!r}"]

    def set(self, array, tangent: Tensor | None) -> None:
        if tangent is None:
            self.tangents.pop(id(array), None)
            return
        key = id(array)
        self.tangents[key] = (weakref.ref(array, lambda _r, k=key, d=self.tangents: d.pop(k, None)), tangent)

    # ---------------------------------------------------------------- hooks
    def dispatch(self, op, args: tuple, params: dict):
        with self.aside():
            out = apply(op, *args, **params)
            if op.kind != "compute" or op.vjp is None:
                return out
            tangents = [self.tangent(a) if isinstance(a, Tensor) else None for a in args]
            if any(t is not None for t in tangents):
                res = out[0] if isinstance(out, tuple) else out
                if res.is_floating_point() or res.is_complex():
                    self.set(res._data, _op_jvp(op, args, params, res, tangents))
        return out

    def write(self, target, src) -> None:
        entry = self.tangents.get(id(src))
        self.set(target, entry[1] if entry is not None and entry[0]() is src else None)
        self.below().write(target, src)

    def copy(self, src, copy) -> None:
        entry = self.tangents.get(id(src))
        if entry is not None and entry[0]() is src:
            self.set(copy, entry[1])
        self.below().copy(src, copy)

    def accumulate(self, var, grad) -> bool:
        return self.below().accumulate(var, grad)

    def call_module(self, module, forward, args: tuple, kwargs: dict):
        return self.below().call_module(module, forward, args, kwargs)

    # ---------------------------------------------------------------- helpers
    def after_function(self, cls, ctx, args: tuple, outputs: tuple) -> None:
        """A custom Function's outputs get their tangents from its ``jvp`` (which, as in PyTorch,
        forward-mode AD through a Function requires)."""
        tangents = [self.tangent(a) if isinstance(a, Tensor) else None for a in args]
        if all(t is None for t in tangents):
            return
        filled = [t if t is not None or not isinstance(a, Tensor) else _zeros_like(a) for a, t in zip(args, tangents)]
        with self.aside():
            out_t = cls.jvp(ctx, *filled)
        out_t = out_t if isinstance(out_t, tuple) else (out_t,)
        for o, t in zip(outputs, out_t):
            if isinstance(o, Tensor) and t is not None:
                self.set(o._data, t)


def _zeros_like(t: Tensor) -> Tensor:
    return Tensor._wrap(t._device.xp.zeros_like(t._data), False, None, 0, [0], t._device)


def _wanting(a, tangent, outer: bool):
    """The input a vjp is evaluated at: ``a`` itself where the tangent should stay differentiable
    with respect to it (``outer``), else detached; wanting a gradient where it has a tangent, since
    vjps skip the gradients of inputs that need none."""
    if not isinstance(a, Tensor):
        return a
    if outer and a.requires_grad:
        return a
    d = a.detach()
    return d.requires_grad_(True) if tangent is not None else d


def _directional(vjps, tangents) -> Tensor | None:
    """``sum <vjp_i, t_i>`` as a differentiable function of the cotangents, or None if no term."""
    total = None
    for gi, t in zip(vjps, tangents):
        if gi is None or t is None or not isinstance(gi, Tensor) or not gi.requires_grad:
            continue
        term = (gi * t).sum()
        total = term if total is None else total + term
    return total


def _refuse_complex(what: str, *tensors) -> None:
    if any(isinstance(t, Tensor) and t.is_complex() for t in tensors):
        raise NotImplementedError(f"forward-mode AD through {what} on complex tensors is not supported by tapelab")


def _differentiable(args: tuple, tangents: list) -> bool:
    """Whether the tangents made from these operands must stay differentiable (PyTorch's are:
    reverse mode through a tangent), as recorded ops are: grad mode on and something requiring grad."""
    return is_grad_enabled() and any(isinstance(x, Tensor) and x.requires_grad for x in (*args, *tangents))


def _op_jvp(op, args: tuple, params: dict, res: Tensor, tangents: list) -> Tensor:
    """``J t`` of one op: the derivative of its vjp along the tangents."""
    _refuse_complex(op.name, res, *args)
    outer = _differentiable(args, tangents)
    with enable_grad():
        g = _zeros_like(res).requires_grad_(True)
        inputs = [_wanting(a, t, outer) for a, t in zip(args, tangents)]
        out = res if outer and res.requires_grad else res.detach()
        vjps = op.vjp(g, out if op.save_output else None, *inputs, **params)
        total = _directional(vjps, tangents)
        if total is None:
            return _zeros_like(res)
        (jt,) = _grad([total], [g], allow_unused=True, create_graph=outer)
    if jt is None:
        return _zeros_like(res)
    return jt if outer else jt.detach()


# ---------------------------------------------------------------- the public API
def enter_dual_level() -> int:
    """Enter a new forward grad level (one at a time); returns its number."""
    global _current_level
    if _MODE:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    mode = _DualMode()
    mode.__enter__()
    _MODE.append(mode)
    _function.set_forward_ad(mode)
    _current_level += 1
    return _current_level


def exit_dual_level(*, level: int | None = None) -> None:
    """Exit the current forward grad level: every tangent made inside it is dropped."""
    global _current_level
    if level is None:
        level = _current_level
    if level != _current_level or not _MODE:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. "
                           "This is not supported.")
    mode = _MODE.pop()
    mode.tangents.clear()
    if mode in LOCAL.modes:
        mode.__exit__()
    _function.set_forward_ad(None)
    _current_level = level - 1


def _active(level: int | None) -> _DualMode | None:
    if level is None:
        level = _current_level
    return _MODE[0] if _MODE and level == _current_level and level >= 0 else None


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A view of ``tensor`` carrying ``tangent`` (its directional derivative) at ``level``."""
    mode = _active(level)
    if mode is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if tangent.device != tensor.device:
        raise RuntimeError(f"make_dual(): the tangent is on {tangent.device} but the primal is on {tensor.device}")
    with mode.aside():
        dual = tensor.view_as(tensor)
        t = tangent if tangent.dtype == tensor.dtype else tangent.to(tensor.dtype)
        if t.stride() != tensor.stride() or t.storage_offset() != tensor.storage_offset():
            # a tangent laid out unlike the primal is copied into the primal's layout, as PyTorch's
            t = empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=tensor.device).copy_(t)
    mode.set(dual._data, t)
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` at ``level``; the tangent is None where it has none."""
    mode = _active(level)
    if mode is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    tangent = mode.tangent(tensor)
    with mode.aside():
        primal = tensor.view_as(tensor)
    return UnpackedDualTensor(primal, tangent)


class dual_level:
    """``with dual_level():`` enters a forward grad level and exits it (its tangents dropped) at the
    end; also a decorator."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: Any) -> None:
        exit_dual_level()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper
