"""User-defined differentiable operations: ``tapelab.autograd.Function``.

As in PyTorch, the ``ctx`` a Function's ``forward`` receives *is* the graph node its
outputs get as ``grad_fn`` (a ``<ClassName>Backward`` instance), so what ``forward``
stores on ctx is what ``backward`` reads, and tools can walk it like any other node.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any

from . import anomaly as _anomaly
from ..base.grad_mode import STATE as GRAD, no_grad
from ..core.creation import zeros
from ..core.node import FREED_MSG, Node, _seq, edge_to
from ..core.tensor import Tensor, sum_to

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]

_FORWARD_AD: list = [None]   # the entered forward-AD level's mode (autograd/forward_ad.py), or None


def set_forward_ad(mode) -> None:
    """Install (or, with None, remove) the forward-AD mode whose ``aside()`` a Function's forward
    runs in and whose ``after_function`` gives its outputs their tangents."""
    _FORWARD_AD[0] = mode


class FunctionCtx:
    """What ``forward``/``setup_context`` may call on ``ctx``."""

    def save_for_backward(self, *tensors) -> None:
        """Save tensors for ``backward``; reading them back checks none was modified in place. As PyTorch,
        what is saved is checked only where a backward can run (an input needs a gradient): Keras's
        ``custom_gradient`` saves its Variables when nothing does."""
        differentiable = any(getattr(self, "needs_input_grad", (True,)))
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor) and differentiable:
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of "
                                f"type {type(t).__name__}")
        self._saved = tuple(None if t is None else (t, t._vc[0] if isinstance(t, Tensor) else None) for t in tensors)

    def save_for_forward(self, *tensors) -> None:
        """Save tensors for ``jvp`` (forward-mode AD); ``jvp`` reads them back as ``saved_tensors``."""
        if self._saved is None:
            self.save_for_backward(*tensors)

    @property
    def saved_tensors(self) -> tuple:
        saved = self._saved
        if saved is None:
            if self._freed:
                raise RuntimeError(FREED_MSG)
            return ()
        for i, entry in enumerate(saved):
            if entry is not None and entry[1] is not None and entry[0]._vc[0] != entry[1]:
                t = entry[0]
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [{t.dtype} {list(t.shape)}], which is saved tensor {i} of "
                    f"{self.name()}, is at version {t._vc[0]}; expected version {entry[1]} instead. "
                    "Hint: enable anomaly detection to find the operation that failed to compute its "
                    "gradient, with tapelab.autograd.set_detect_anomaly(True).")
        return tuple(None if e is None else e[0] for e in saved)

    saved_variables = saved_tensors

    def mark_dirty(self, *tensors) -> None:
        """Declare inputs that ``forward`` modified in place (they are returned as outputs)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Declare outputs that get no gradient (their incoming gradient is zeros in backward)."""
        self._non_diff = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` receives None instead of zeros for outputs that got no gradient."""
        self.materialize_grads = value


class BackwardCFunction(FunctionCtx, Node):
    """The node (and ctx) of one ``Function.apply``; subclassed per Function as ``<Name>Backward``."""

    _forward_cls: type = None

    def __init__(self):
        self.edges = ()
        self.seq = next(_seq)
        self.pre_hooks = self.hooks = self._metadata = None
        self._saved = None
        self._freed = False
        self._dirty = self._non_diff = ()
        self.materialize_grads = True
        self.needs_input_grad = ()
        self._in_meta = self._out_meta = ()

    def run(self, grads) -> tuple:
        if self.materialize_grads:
            grads = [_zeros(m) if g is None and m is not None else g for g, m in zip(grads, self._out_meta)]
        out = self._forward_cls.backward(self, *grads)
        return self._check(out if isinstance(out, tuple) else (out,))

    def _check(self, out: tuple) -> tuple:
        """PyTorch's validation of what ``backward`` returned, with sum-to for broadcast shapes."""
        n = len(self._in_meta)
        if len(out) > n and all(g is None for g in out[n:]):
            out = out[:n]
        if len(out) != n:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(out)})")
        res = []  # one per tensor input, matching ``edges``
        edges = iter(self.edges)
        for i, (g, meta) in enumerate(zip(out, self._in_meta)):
            if meta is None:
                if g is not None:
                    raise RuntimeError(f"function {self.name()} returned a gradient different than None at "
                                       f"position {i + 1}, but the corresponding forward input was not a "
                                       "Variable")
                continue
            if next(edges) is None or g is None:
                res.append(None)
                continue
            shape, dtype = meta
            if tuple(g.shape) != shape:
                if not _expandable(shape, tuple(g.shape)):
                    raise RuntimeError(f"Function {self.name()} returned an invalid gradient at index {i} "
                                       f"- got {list(g.shape)} but expected shape compatible with "
                                       f"{list(shape)}")
                g = sum_to(g, shape)
            res.append(g if g.dtype == dtype else g.to(dtype))
        return tuple(res)

    def release(self) -> None:
        self._saved = None
        self._freed = True


def _expandable(shape: tuple, grad_shape: tuple) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``grad_shape`` (so the grad can be summed back)."""
    if len(shape) > len(grad_shape):
        return False
    return all(s == 1 or s == g for s, g in zip(reversed(shape), reversed(grad_shape)))


def _zeros(meta):
    shape, dtype, device = meta
    return zeros(shape, dtype=dtype, device=device)


class Function:
    """Base class of custom differentiable operations.

    Define ``forward(ctx, *args)`` (or ``forward(*args)`` plus ``setup_context(ctx, inputs,
    output)``) and ``backward(ctx, *grad_outputs)`` as static methods, then call
    ``MyFn.apply(*args)``. ``backward`` returns one gradient per forward argument (None for
    non-tensors and inputs that need none); the node's ``next_functions`` has one entry per
    tensor argument, as in PyTorch.

    >>> class Square(tapelab.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * g
    """

    _backward_cls: type = BackwardCFunction

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._backward_cls = type(f"{cls.__name__}Backward", (BackwardCFunction,), {"_forward_cls": cls})

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. "
                           "Please use new-style autograd function with static forward method. "
                           f"(Call {type(self).__name__}.apply(...) instead of instantiating it.)")

    @staticmethod
    def forward(ctx, *args: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: Any) -> None:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs: Any) -> Any:
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it "
                                  "with forward mode AD.")

    @classmethod
    def apply(cls, *args):
        """Run ``forward`` without recording, then attach the outputs to a ``<Name>Backward`` node."""
        if cls is Function:
            raise RuntimeError("Function.apply must be called on a subclass of Function")
        ctx = cls._backward_cls()
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        differentiable = GRAD.enabled and any(needs)
        ctx.needs_input_grad = needs if differentiable else (False,) * len(args)
        ctx.edges = tuple(edge_to(a) if n else None for a, n in zip(args, needs) if isinstance(a, Tensor))
        ctx._in_meta = tuple((tuple(a.shape), a.dtype) if isinstance(a, Tensor) else None for a in args)
        dual = _FORWARD_AD[0]
        with no_grad(), (dual.aside() if dual is not None else contextlib.nullcontext()):
            if cls.setup_context is not Function.setup_context:
                output = cls.forward(*args)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args)
        outputs = output if isinstance(output, tuple) else (output,)
        outputs = _attach(ctx, args, outputs, differentiable)
        if dual is not None:
            dual.after_function(cls, ctx, args, outputs)
        if differentiable and _anomaly.STATE.enabled:
            _anomaly.record(ctx, f"{cls.__name__}.apply")
        return outputs if isinstance(output, tuple) else outputs[0]


def _attach(ctx, args, outputs: tuple, differentiable: bool) -> tuple:
    """Make the outputs of ``forward`` outputs of ``ctx``: aliases for returned inputs, rebased dirty inputs."""
    dirty = {id(t) for t in ctx._dirty}
    non_diff = {id(t) for t in ctx._non_diff}
    inputs = {id(a) for a in args if isinstance(a, Tensor)}
    ctx.n_outputs = len(outputs)
    result, meta = [], []
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            result.append(o)
            meta.append(None)
            continue
        if id(o) in dirty:
            if differentiable and o.requires_grad and o.grad_fn is None:
                raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                                   "operation.")
        elif id(o) in inputs:
            o = o.detach()  # a returned input becomes a view of it, which the node then owns
        if differentiable and id(o) not in non_diff and o.is_floating_point():
            o.requires_grad, o.grad_fn, o._out_nr = True, ctx, i
        elif id(o) in non_diff:
            o.requires_grad, o.grad_fn = False, None
        result.append(o)
        meta.append((tuple(o.shape), o.dtype, o.device))
    ctx._out_meta = tuple(meta)
    return tuple(result)


class _DelayedError(Node):
    """Stands in for the graph of a ``once_differentiable`` backward: differentiating it raises."""

    __slots__ = ("msg", "n_outputs")

    def __init__(self, msg: str, edges: tuple, n_outputs: int):
        self.msg, self.edges, self.n_outputs = msg, edges, n_outputs
        self.seq = next(_seq)
        self.pre_hooks = self.hooks = self._metadata = None

    def name(self) -> str:
        return "DelayedError"

    def run(self, grads):
        raise RuntimeError(self.msg)


def once_differentiable(fn):
    """Decorate ``backward``: it runs without recording, and differentiating its result raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not GRAD.enabled:
            return outputs
        edges = tuple(edge_to(a) for a in args if isinstance(a, Tensor) and a.requires_grad)
        if not edges:
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        err = _DelayedError("trying to differentiate twice a function that was marked with "
                            "@once_differentiable", edges, len(outs))
        # bookkeeping: the values backward computed, re-labelled as outputs of the error node
        outs = tuple(Tensor._wrap(o._data, True, err, i, [0], o._device)
                     if isinstance(o, Tensor) and o.is_floating_point() else o for i, o in enumerate(outs))
        return outs[0] if single else outs
    return wrapper

