"""The backward engine: a resumable walk over the graph.

``backward_steps`` is a generator that executes one node per step, in dependency
order (latest-created first among ready nodes, like PyTorch), and yields a
``BackwardStep`` with the node's incoming and outgoing gradients. ``backward()`` and
``grad()`` drain it; the debugger advances it one step at a time with an idle kernel
between clicks.
"""
from __future__ import annotations

import heapq
import sys
from typing import Iterator, Sequence

from .. import events
from .grad_mode import STATE as GRAD
from ..creation import zeros_like
from ..tensor import Tensor
from .graph import AccumulateGrad

__all__ = ["backward_steps", "backward", "grad", "BackwardStep"]

BackwardStep = events.BackwardStep


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _root_grads(tensors, grad_tensors, what: str):
    roots = []
    grads = _as_list(grad_tensors) or [None] * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"{what}: got {len(tensors)} tensors but {len(grads)} gradients")
    for t, g in zip(tensors, grads):
        if not t.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(got shape {list(t.shape)}); pass gradient= with that shape")
            if not t.is_floating_point():
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {t.dtype}")
            g = Tensor._wrap(t._device.xp.ones(t._data.shape, t._data.dtype), False, None, 0, [0], t._device)
        elif tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {list(g.shape)} and "
                               f"output[0] has a shape of {list(t.shape)}.")
        node = t.grad_fn if t.grad_fn is not None else t._accumulator()
        roots.append((node, t._out_nr, g))
    return roots


def backward_steps(tensors, grad_tensors=None, retain_graph: bool | None = None,
                   create_graph: bool = False, inputs: Sequence | None = None,
                   _capture: dict | None = None) -> Iterator[BackwardStep]:
    """Execute the backward pass of ``tensors`` one node at a time.

    Args:
        tensors: the output(s) to differentiate (a loss, usually).
        grad_tensors: the gradient w.r.t. each output (default: ones for scalars).
        retain_graph: keep saved buffers for another backward (default: ``create_graph``).
        create_graph: record the backward ops so the gradients are differentiable.
        inputs: if given, accumulate ``.grad`` into these tensors only.

    Yields:
        ``BackwardStep(index, node, grad_outputs, grad_inputs)`` after each node runs
        (``step.name`` is the node's name).

    >>> steps = list(tapelab.autograd.backward_steps(loss))
    >>> [s.name for s in steps][:2]
    ['SumBackward0', 'MulBackward0']
    """
    tensors = _as_list(tensors)
    roots = _root_grads(tensors, grad_tensors, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    only = None
    if inputs is not None:
        only = {id(t): t for t in _as_list(inputs)}
        if not only:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    deps: dict = {}
    stack = [n for n, _, _ in roots]
    seen = set(map(id, stack))
    while stack:
        node = stack.pop()
        for e in node.edges:
            if e is not None:
                child = e[0]
                deps[child] = deps.get(child, 0) + 1
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append(child)
    buffers: dict = {}
    for node, nr, g in roots:
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.n_outputs
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    ready = [(-n.seq, id(n), n) for n in buffers if deps.get(n, 0) == 0]
    heapq.heapify(ready)
    prev = GRAD.enabled
    emit = events.has_subscribers("backward_step")
    index = 0
    try:
        while ready:
            node = heapq.heappop(ready)[2]
            grads = buffers.pop(node)
            GRAD.enabled = create_graph
            try:
                if node.pre_hooks is not None or type(node) is AccumulateGrad:
                    grads = _run_prehooks(node, grads)
                if _capture is not None:
                    _capture_grads(node, grads, _capture)
                if type(node) is AccumulateGrad:
                    out = ()
                    if _capture is None and (only is None or id(node.variable) in only):
                        _accumulate(node, grads[0], create_graph)
                else:
                    out = node.run(grads)
                    if len(out) != len(node.edges):
                        raise RuntimeError(f"function {node.name()} returned an incorrect number of "
                                           f"gradients (expected {len(node.edges)}, got {len(out)})")
                    if node.hooks:
                        for hook in node.hooks:
                            res = hook(out, tuple(grads))
                            if res is not None:
                                out = tuple(res)
            finally:
                GRAD.enabled = prev
            step = BackwardStep(index, node, grads, out)
            if emit:
                events.emit("backward_step", step)
            index += 1
            for e, gi in zip(node.edges, out):
                if e is None:
                    continue
                child, nr = e
                if gi is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        buf = buffers[child] = [None] * child.n_outputs
                    buf[nr] = gi if buf[nr] is None else buf[nr] + gi
                left = deps[child] - 1
                deps[child] = left
                if left == 0:
                    if child in buffers:
                        heapq.heappush(ready, (-child.seq, id(child), child))
                    else:
                        _skip(child, deps, buffers, ready)
            if not retain_graph:
                node.release()
            yield step
    finally:
        GRAD.enabled = prev


def _skip(node, deps, buffers, ready) -> None:
    """A node that received no gradient at all: its inputs get none from it either."""
    stack = [node]
    while stack:
        n = stack.pop()
        for e in n.edges:
            if e is None:
                continue
            child = e[0]
            deps[child] -= 1
            if deps[child] == 0:
                if child in buffers:
                    heapq.heappush(ready, (-child.seq, id(child), child))
                else:
                    stack.append(child)


def _run_prehooks(node, grads):
    pre = node.pre_hooks
    if type(node) is AccumulateGrad:
        hooks = getattr(node.variable, "_hooks", None) if node.variable is not None else None
        if hooks and grads[0] is not None:
            g = grads[0]
            for h in tuple(hooks):
                r = h(g)
                if r is not None:
                    g = r
            grads = [g]
    if pre:
        grads = list(grads)
        for key, hooks in pre.items():
            if key == -1:
                continue
            if grads[key] is None:
                continue
            for h in tuple(hooks):
                r = h(grads[key])
                if r is not None:
                    grads[key] = r
        for h in tuple(pre.get(-1, ())):
            r = h(tuple(grads))
            if r is not None:
                grads = list(r)
    return grads


def _capture_grads(node, grads, capture) -> None:
    for key in ((id(node), nr) for nr in range(node.n_outputs)):
        if key in capture and grads[key[1]] is not None:
            g = grads[key[1]]
            capture[key] = g if capture[key] is None else capture[key] + g


def _accumulate(node: AccumulateGrad, g, create_graph: bool) -> None:
    if g is None:
        return
    var = node.variable
    if var is None:
        return
    if not create_graph:
        g = g.detach() if g.requires_grad else g
    old = var.grad
    if old is None:
        # take ownership when nothing else holds the gradient, as PyTorch's AccumulateGrad does
        var.grad = g if create_graph or sys.getrefcount(g) <= 4 else g.clone()
    elif create_graph or old.requires_grad or old._data.shape != g._data.shape:
        var.grad = old + g
    else:
        # accumulation is the engine's own bookkeeping, not a user op: no dispatch, no tape node
        old._data += g._data
        old._vc[0] += 1


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None,
             create_graph: bool = False, grad_variables=None, inputs=None) -> None:
    """Compute the gradients of ``tensors`` w.r.t. graph leaves and accumulate them in ``.grad``."""
    if grad_variables is not None:
        grad_tensors = grad_variables
    for _ in backward_steps(tensors, grad_tensors, retain_graph, create_graph, inputs):
        pass


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool | None = None,
         materialize_grads: bool = False) -> tuple:
    """Return the gradients of ``outputs`` w.r.t. ``inputs`` without touching ``.grad``."""
    single = not isinstance(inputs, (list, tuple))
    inputs = _as_list(inputs)
    capture = {}
    keys = []
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        node = t.grad_fn if t.grad_fn is not None else t._accumulator()
        key = (id(node), t._out_nr)
        capture[key] = None
        keys.append((key, node))
    for _ in backward_steps(outputs, grad_outputs, retain_graph, create_graph, _capture=capture):
        pass
    result = []
    for i, ((key, node), t) in enumerate(zip(keys, inputs)):
        g = capture[key]
        if g is None:
            if materialize_grads:
                g = zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(f"One of the differentiated Tensors appears to not have been used "
                                   f"in the graph (input {i}, shape {list(t.shape)}). Set "
                                   "allow_unused=True if this is the desired behavior.")
        elif not create_graph and g.requires_grad:
            g = g.detach()
        result.append(g)
    return tuple(result)
