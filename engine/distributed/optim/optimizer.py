"""``DistributedOptimizer``: one optimizer per owner of the parameters, stepped with the
gradients of a distributed autograd context (``distributed.autograd``)."""
from __future__ import annotations

import uuid

from .. import autograd as _dist_autograd
from ..rpc import agent as _rpc
from ...autograd.grad_mode import no_grad

__all__ = ["DistributedOptimizer"]


def _new_optimizer(key: str, optimizer_class, param_keys: list, args: tuple, kwargs: dict) -> None:
    owned = _rpc._agent().owned
    owned[key] = optimizer_class([owned[k] for k in param_keys], *args, **kwargs)


def _step(key: str, context_id: int) -> None:
    """On the owner: the optimizer's step with the context's gradients as ``.grad`` (restored after);
    a parameter the backward did not reach has none and is skipped, as by any optimizer."""
    opt = _rpc._agent().owned[key]
    ctx = _dist_autograd._contexts.get(context_id)
    grads = ctx.grads if ctx is not None else {}
    saved = [(p, p.grad) for group in opt.param_groups for p in group["params"]]
    try:
        for p, _ in saved:
            p.grad = grads[id(p)][1] if id(p) in grads else None
        with no_grad():
            opt.step()
    finally:
        for p, g in saved:
            p.grad = g


class DistributedOptimizer:
    """``DistributedOptimizer(optimizer_class, params_rref, *args, **kwargs)``: ``optimizer_class``
    over the parameters behind ``params_rref`` (RRefs, e.g. ``RemoteModule.remote_parameters()``
    and ``RRef(p)`` for local ones), one instance on each owner; ``step(context_id)`` steps them
    all (concurrently) with that context's gradients.

    Example::

        >>> opt = DistributedOptimizer(optim.SGD, remote.remote_parameters(), lr=0.1)
        >>> with dist_autograd.context() as cid:
        ...     dist_autograd.backward(cid, [remote(x).sum()])
        ...     opt.step(cid)
    """

    def __init__(self, optimizer_class, params_rref: list, *args, **kwargs) -> None:
        by_owner: dict[int, list[str]] = {}
        for rref in params_rref:
            rref._wait()
            by_owner.setdefault(rref._owner, []).append(rref._key)
        self._optimizers = {owner: uuid.uuid4().hex for owner in by_owner}
        for f in [_rpc.rpc_async(owner, _new_optimizer, (self._optimizers[owner], optimizer_class, keys, args, kwargs))
                  for owner, keys in by_owner.items()]:
            f.wait()

    def step(self, context_id: int) -> None:
        for f in [_rpc.rpc_async(owner, _step, (key, context_id)) for owner, key in self._optimizers.items()]:
            f.wait()
