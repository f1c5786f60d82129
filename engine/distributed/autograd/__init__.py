"""``torch.distributed.autograd`` basics: ``context``, ``backward``, ``get_gradients``.

Inside ``with context() as cid:``, ``backward(cid, [loss])`` computes the gradients of the graph
leaves and leaves ``.grad`` as it was: they accumulate in the context, on each worker for its own
leaves. What crosses workers here is ``RemoteModule``'s forward (its backward goes to the owner
with the context id, and the owner keeps its parameters' gradients in its side of the context);
plain ``rpc_sync`` calls carry no autograd edges. ``DistributedOptimizer.step(cid)`` applies
those gradients on each owner. Leaving the ``with`` block frees the context on every worker
the backward reached.
"""
from __future__ import annotations

import itertools
import threading

from ...autograd.engine import backward as _backward
from ...core.node import graph_leaves
from ...core.tensor import Tensor
from ..rpc import agent as _rpc

__all__ = ["context", "backward", "get_gradients", "is_available", "DistAutogradContext"]

_contexts: dict[int, "DistAutogradContext"] = {}
_ids = itertools.count(1)
_current = threading.local()       # the context of the backward running on this thread


def is_available() -> bool:
    return True


class DistAutogradContext:
    """One distributed autograd context on this worker: the gradients of its leaves here
    (``{id(leaf): (leaf, grad)}``) and the ranks its backward reached (PyTorch's class of the name,
    which libraries such as torchopt re-export)."""

    def __init__(self, context_id: int) -> None:
        self.id, self.grads, self.workers = context_id, {}, set()

    def _context_id(self) -> int:
        return self.id

    def _known_worker_ids(self) -> set:
        return set(self.workers)


class context:
    """``with context() as context_id:``: a distributed autograd context for one training step."""

    def __enter__(self) -> int:
        self.id = (_rpc._agent().rank << 48) | next(_ids)
        _contexts[self.id] = DistAutogradContext(self.id)
        return self.id

    def __exit__(self, *exc) -> None:
        ctx = _contexts.pop(self.id, None)
        for worker in (ctx.workers if ctx else ()):
            _rpc.rpc_sync(worker, _release, (self.id,))


def _release(context_id: int) -> None:
    _contexts.pop(context_id, None)


def _context(context_id: int, create: bool = False) -> DistAutogradContext:
    if context_id not in _contexts:
        if not create:
            raise RuntimeError(f"Could not find autograd context with id: {context_id}")
        _contexts[context_id] = DistAutogradContext(context_id)
    return _contexts[context_id]


def accumulate(context_id: int, leaves: list, grads, create: bool = False) -> None:
    """Add ``grads`` (None: no gradient) of ``leaves`` to the context's gradients on this worker."""
    store = _context(context_id, create).grads
    for leaf, g in zip(leaves, grads):
        if g is None:
            continue
        prev = store.get(id(leaf))
        store[id(leaf)] = (leaf, g if prev is None else prev[1] + g)


def backward(context_id: int, roots: list, retain_graph: bool = False) -> None:
    """Gradients of the scalar ``roots`` w.r.t. every leaf they reach, into the context (not ``.grad``)."""
    ctx = _context(context_id)
    roots = list(roots)
    for r in roots:
        if not isinstance(r, Tensor) or r.numel() != 1:
            raise RuntimeError("backward: the roots of distributed autograd must be scalar tensors")
    leaves = graph_leaves(roots)
    # a full backward (``autograd.grad`` would skip a RemoteModule call with no local leaf below
    # it), its leaves' ``.grad`` set aside first and put back after: what it leaves there is ours
    saved = [leaf.grad for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    _current.ctx = (context_id, ctx.workers)
    try:
        _backward(roots, retain_graph=retain_graph)
        grads = [leaf.grad for leaf in leaves]
    finally:
        _current.ctx = None
        for leaf, g in zip(leaves, saved):
            leaf.grad = g
    accumulate(context_id, leaves, grads)


def current() -> tuple | None:
    """(context id, the set of workers it reached) of the backward on this thread, if any."""
    return getattr(_current, "ctx", None)


def get_gradients(context_id: int) -> dict:
    """{leaf tensor: its gradient} accumulated in the context on this worker."""
    return {leaf: g for leaf, g in _context(context_id).grads.values()}
