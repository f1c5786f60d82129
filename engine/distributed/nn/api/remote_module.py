"""``RemoteModule``: a module created on another worker, called through RPC.

``forward`` is differentiable on the caller: the owner keeps the graph of each call, and the
caller's backward sends the output's gradient back, so the owner's parameters get the same
``.grad`` a local module would and the inputs get their gradients (one backward per forward).
Under ``distributed.autograd.backward(context_id, ...)`` the owner keeps its parameters'
gradients in its side of that context instead of ``.grad``, for ``DistributedOptimizer.step``.
"""
from __future__ import annotations

import uuid

from ... import autograd as _dist_autograd
from ...rpc import agent as _rpc
from ....autograd.engine import backward as _backward
from ....autograd.engine import grad as _grad
from ....autograd.function import Function
from ....autograd.grad_mode import is_grad_enabled
from ....core.creation import zeros
from ....core.node import graph_leaves
from ....core.tensor import Tensor
from ....nn.modules.module import Module

__all__ = ["RemoteModule"]


def _forward_on_owner(module_key: str, call_key: str | None, inputs: list, kwargs: dict):
    module = _rpc._agent().owned[module_key]
    if call_key is None:
        return module(*inputs, **kwargs)
    leaves = [x.detach().requires_grad_(x.is_floating_point()) if isinstance(x, Tensor) else x for x in inputs]
    out = module(*leaves, **kwargs)
    _rpc._agent().owned[call_key] = (out, leaves)
    return out.detach()


def _backward_on_owner(call_key: str, grad: Tensor, context_id: int | None = None) -> list:
    """The call's backward on the owner: into ``.grad``, or (``context_id``) into that distributed
    autograd context for the module's leaves; returns the inputs' gradients."""
    out, leaves = _rpc._agent().owned.pop(call_key)
    if context_id is None:
        _backward(out, grad)
        return [x.grad if isinstance(x, Tensor) else None for x in leaves]
    reached = graph_leaves([out])
    grads = dict(zip(map(id, reached), _grad([out], reached, [grad], allow_unused=True))) if reached else {}
    inputs = {id(x) for x in leaves if isinstance(x, Tensor)}
    own = [leaf for leaf in reached if id(leaf) not in inputs]
    _dist_autograd.accumulate(context_id, own, [grads[id(leaf)] for leaf in own], create=True)
    return [grads.get(id(x)) if isinstance(x, Tensor) else None for x in leaves]


def _parameters_on_owner(module_key: str, recurse: bool) -> list:
    module = _rpc._agent().owned[module_key]
    return [_rpc.RRef(p) for p in module.parameters(recurse)]


# A leaf that requires grad, an input of every differentiable call: the output is part of the
# caller's graph (its backward reaches the owner's parameters) even when no input requires grad.
_EDGE: list = []


def _edge() -> Tensor:
    if not _EDGE:
        _EDGE.append(zeros((), requires_grad=True))
    return _EDGE[0]


class _RemoteCall(Function):
    @staticmethod
    def forward(ctx, owner: int, module_key: str, kwargs: dict, edge: Tensor, *inputs):
        ctx.owner, ctx.key = owner, uuid.uuid4().hex
        return _rpc.rpc_sync(owner, _forward_on_owner, (module_key, ctx.key, list(inputs), kwargs))

    @staticmethod
    def backward(ctx, grad):
        dist = _dist_autograd.current()
        if dist is None:
            grads = _rpc.rpc_sync(ctx.owner, _backward_on_owner, (ctx.key, grad))
        else:
            context_id, workers = dist
            workers.add(ctx.owner)           # its side of the context is freed with the caller's
            grads = _rpc.rpc_sync(ctx.owner, _backward_on_owner, (ctx.key, grad, context_id))
        return (None, None, None, None, *grads)


class RemoteModule(Module):
    """``RemoteModule(remote_device, module_cls, args, kwargs)``: ``module_cls(*args, **kwargs)``
    lives on the worker named in ``remote_device`` (``"worker1/cpu"``); ``forward`` runs it there.

    Example::

        >>> rpc.init_rpc(f"worker{rank}")
        >>> if rank == 0:
        ...     lin = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
        ...     lin(x).sum().backward()        # worker1's Linear has its .grad
        >>> rpc.shutdown()
    """

    def __init__(self, remote_device: str, module_cls: type, args: tuple | None = None,
                 kwargs: dict | None = None) -> None:
        super().__init__()
        worker, _, device = remote_device.partition("/")
        self.on, self.device = worker, device or "cpu"
        self.module_rref = _rpc.remote(worker, module_cls, tuple(args or ()), kwargs or {})
        self._owner = self.module_rref._owner

    def forward(self, *args, **kwargs):
        """Run the remote module on ``args``; differentiable when grad mode is on."""
        self.module_rref._wait()
        if is_grad_enabled():
            return _RemoteCall.apply(self._owner, self.module_rref._key, kwargs, _edge(), *args)
        return _rpc.rpc_sync(self._owner, _forward_on_owner, (self.module_rref._key, None, list(args), kwargs))

    def forward_async(self, *args, **kwargs):
        """A Future of the remote module's output (not differentiable)."""
        self.module_rref._wait()
        return _rpc.rpc_async(self._owner, _forward_on_owner, (self.module_rref._key, None, list(args), kwargs))

    def get_module_rref(self) -> _rpc.RRef:
        return self.module_rref

    def remote_parameters(self, recurse: bool = True) -> list:
        """RRefs to the remote module's parameters (owned by its worker)."""
        self.module_rref._wait()
        return _rpc.rpc_sync(self._owner, _parameters_on_owner, (self.module_rref._key, recurse))

    def extra_repr(self) -> str:
        return f"on={self.on}, device={self.device}"
