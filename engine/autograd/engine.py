"""The backward engine: a resumable walk over the graph.

``backward_steps`` is a generator that executes one node per step, in dependency
order (latest-created first among ready nodes, like PyTorch), and yields a
``BackwardStep`` with the node's incoming and outgoing gradients. ``backward()`` and
``grad()`` drain it; the debugger advances it one step at a time with an idle kernel
between clicks.

When the caller names the tensors it wants gradients for (``inputs=`` or ``grad()``), the
walk is pruned as PyTorch's is: nodes that cannot reach any of them do not run, so hooks
on unrelated tensors do not fire.
"""
from __future__ import annotations

import heapq
import itertools
from collections import deque
import sys
from sys import getrefcount
import threading
from threading import get_ident as _get_ident
import warnings
from time import perf_counter_ns
from typing import Iterator, Sequence

import numpy as np

from .. import kernels
from ..base import events
from . import anomaly as _anomaly
from ..base.dtype import FLOATING_KINDS
from ..base.iter_order import in_iterator_order
from ..base.grad_mode import GRAD_OFF, STATE as GRAD, no_grad
from ..core import batching as _batching
from ..core.creation import zeros_like
from ..core.dispatch import _OUT, _V01, apply
from ..core.factories import FULL
from ..base.dispatch_state import LOCAL as _LOCAL, STATE as _DISPATCH
from ..base.device import CPU
from ..core.tensor import Tensor, _check_grad
from ..core.node import DETACHED_IN_PLACE, RETAIN, AccumulateGrad, Node, vjp_below_subclasses
from .views import _view_grad_fn

__all__ = ["backward_steps", "backward", "grad", "BackwardStep", "running_node", "current_graph_task_id",
           "will_engine_execute_node"]

BackwardStep = events.BackwardStep
_STEP_SUBSCRIBERS = events._subscribers["backward_step"]  # the live list: one truth test per node
_PASS_SUBSCRIBERS = events._subscribers["backward_pass"]  # one test per walk
_ndarray = np.ndarray
_F32 = np.dtype(np.float32)
_F32_ONE = np.float32(1)
_SUMMED_APART = (_F32, np.dtype(np.float64))   # _sum_arrays' sums into a new array (no half-precision rounding)
_np_empty = np.empty
_np_ones = np.ones
_ONE: dict = {}   # dtype -> a 0-d one (_ones)


class _Running(threading.local):
    """Per thread (a backward walk runs in the thread that called it): the nodes whose backward
    is executing, innermost last (kept while someone listens), and the walk running now (a hook's
    nested backward replaces it until it returns)."""

    def __init__(self):
        self.nodes: list = []
        self.walk = None


_RUNNING = _Running()


def running_node():
    """The node whose backward is executing now in this thread, while ``backward_step`` has
    subscribers.

    A tape uses it to tell ops dispatched by a vjp from forward ops.
    """
    nodes = _RUNNING.nodes
    return nodes[-1] if nodes else None


def current_graph_task_id() -> int:
    """The id of the backward pass running in this thread (``torch._C._current_graph_task_id``), -1
    outside one: hooks that fire in one pass see one id."""
    walk = _RUNNING.walk
    return -1 if walk is None else walk.task_id


def will_engine_execute_node(node) -> bool:
    """Whether the backward pass running now will run ``node`` (``torch._C._will_engine_execute_node``):
    it is reachable from the pass's roots and, where the pass was given ``inputs=`` or runs for
    ``grad()``, on a path to one of them. Only inside a pass (a hook): else RuntimeError, as PyTorch."""
    walk = _RUNNING.walk
    if walk is None:
        raise RuntimeError("_will_engine_execute_node should only be called during the backward pass")
    if not isinstance(node, Node):
        raise RuntimeError("_will_engine_execute_node expects a grad_fn or AccumulateGrad node, "
                           f"got {type(node).__name__}")
    return node in walk.deps if walk.needed is None else node in walk.needed


def _as_list(x) -> list:
    """One tensor, a list or tuple, or any other iterable of them (``dict.values()``, a generator)."""
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, Tensor) or not hasattr(x, "__iter__"):
        return [x]
    return list(x)


def _fresh(t) -> None:
    """A view whose base was modified in place gets its grad_fn regenerated (views._view_grad_fn)."""
    if isinstance(t, Tensor) and t._base is not None and t._vc[0]:
        _view_grad_fn(t)


def _root_grads(tensors, grad_tensors, what: str, array: bool = False):
    """``(node, output number, gradient)`` of each root; ``array``: the implicit ones of ``loss.backward()``
    as the bare array ``_ones`` makes, for the array walk (``_run_arrays``), where it can be one."""
    if grad_tensors is None and len(tensors) == 1:   # loss.backward(): the checks below, in one test
        t = tensors[0]
        if (type(t) is Tensor and t.requires_grad and t.grad_fn is not None and not (t._vc[0] and t._base is not None)
                and t._data.size == 1 and t._data.dtype.kind in FLOATING_KINDS):
            return [(t.grad_fn, t._out_nr, _ones(t, array))]
    roots = []
    grads = _as_list(grad_tensors) or [None] * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"{what}: got {len(tensors)} tensors but {len(grads)} gradients")
    for i, (t, g) in enumerate(zip(tensors, grads)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: expected a Tensor at position {i}, got {type(t).__name__}")
        if t._vc[0] and t._base is not None:   # _fresh, inline
            _view_grad_fn(t)
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t._data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(got shape {list(t.shape)}); pass gradient= with that shape")
            if t._data.dtype.kind not in FLOATING_KINDS:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {t.dtype}")
            g = _ones(t)
        elif tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and "
                               f"output[{i}] has a shape of {list(t.shape)}.")
        elif g._data.dtype != t._data.dtype:
            g = g.to(t.dtype)  # PyTorch's validate_outputs: the walk runs in the output's dtype
        node = t.grad_fn if t.grad_fn is not None else t._accumulator()
        roots.append((node, t._out_nr, g))
    return roots


def _ones(t: Tensor, array: bool = False) -> Tensor | np.ndarray:
    """The implicit root gradient: the ``full`` factory op (``ones_like``'s checks are for user
    arguments), dispatched while someone watches so a mode sees it; otherwise its forward is
    called directly and wrapped (the engine's own bookkeeping, as the in-place sums are). With
    ``array``, a numpy float one is returned unwrapped: the array walk reads the array, and a tensor
    made for it cost the step its wrap and the walk's pass-on test at the root (chain16 fwd+bwd)."""
    d, dev = t._data, t._device
    if _DISPATCH.slow:
        return apply(FULL, size=d.shape, fill_value=1, dtype=t.dtype, device=dev)
    if type(d) is _ndarray and d.dtype.kind == "f":
        if d.ndim:
            ones = _np_empty(d.shape, d.dtype)   # what FULL's forward does for a numpy float
            ones.fill(1)
        else:   # a copy of a 0-d one of the dtype, made once: half the cost
            one = _ONE.get(d.dtype)
            if one is None or one.dtype is not d.dtype:
                # an equal dtype object that is not numpy's own (an unpickled or deep-copied array's) keys
                # the same entry: the root then takes the loss's own object, so the array vjps' identity
                # checks against the graph's arrays hold (one such loss turned them off for the process)
                one = _ONE[d.dtype] = _np_ones((), d.dtype)
            ones = one.copy()
        if array:
            return ones
    else:
        ones = FULL.fwd(dev._xp or dev.xp, size=d.shape, fill_value=1, dtype=t.dtype, device=dev)
    return Tensor._wrap(ones, False, None, 0, [0], dev)


def _input_targets(inputs):
    """``backward(inputs=)``: the nodes to reach, and the non-leaf tensors whose .grad they fill."""
    inputs = _as_list(inputs)
    if not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    targets, sinks = set(), {}
    for t in inputs:
        _fresh(t)
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        if t.grad_fn is None:
            targets.add(t._accumulator())
        else:
            targets.add(t.grad_fn)
            sinks.setdefault(t.grad_fn, []).append((t._out_nr, t))
    return targets, sinks


def _plan(roots, targets, stop: bool):
    """Dependency counts of the nodes to run, and (when pruning) which nodes run and which are needed.

    Without ``targets`` every reachable node runs. With them, a node is *needed* if it is a
    target or reaches one, and *runs* if one of its inputs is needed (targets that are only
    captured do not run; with ``stop`` targets never run).
    """
    if targets is None:
        # every reachable node runs; deps doubles as the set of nodes seen (roots start at 0)
        deps = {}
        stack = []
        for n, _, _ in roots:
            if n not in deps:
                deps[n] = 0
                stack.append(n)
        get = deps.get
        while stack:
            for e in stack.pop().edges:
                if e is not None:
                    child = e[0]
                    c = get(child)
                    if c is None:
                        deps[child] = 1
                        stack.append(child)
                    else:
                        deps[child] = c + 1
        return deps, None, None
    deps: dict = {}
    parents: dict = {}
    stack = [n for n, _, _ in roots]
    seen = set(stack)
    while stack:
        node = stack.pop()
        if stop and node in targets:
            # a boundary: the walk ends here, so nothing past it may wait on this walk (a node
            # beyond it that also reaches a target would hold that target's count forever)
            continue
        for e in node.edges:
            if e is None:
                continue
            child = e[0]
            parents.setdefault(child, []).append(node)
            if child not in seen:
                seen.add(child)
                stack.append(child)
    needed = {t for t in targets if t in seen}
    runs = set()
    frontier = list(needed)
    while frontier:
        n = frontier.pop()
        for p in parents.get(n, ()):
            if stop and p in targets:
                continue
            runs.add(p)
            if p not in needed:
                needed.add(p)
                frontier.append(p)
    for p in runs:
        for e in p.edges:
            if e is not None and e[0] in needed:
                deps[e[0]] = deps.get(e[0], 0) + 1
    return deps, needed, runs


_TASK_IDS = itertools.count()


class _Walk:
    """One backward pass in progress: the gradients waiting at each node and the nodes ready to
    run. ``_steps`` (the resumable walk) and ``_run_plain`` (``backward()`` while nobody
    watches) both advance it, and ``backward`` hands a walk to ``_steps`` halfway when someone
    starts watching."""

    __slots__ = ("deps", "buffers", "ready", "needed", "runs", "targets", "sinks", "capture", "stop",
                 "create_graph", "retain_graph", "index", "task_id")

    def __init__(self, tensors, grad_tensors, retain_graph, create_graph, inputs, capture, stop, arrays: bool = False):
        """``arrays``: the walk is ``_run_plain``'s, which runs ``_run_arrays`` first where ``_arrays_walk``
        allows (its root's implicit ones may then be an array)."""
        self.task_id = next(_TASK_IDS)
        arrays = arrays and _arrays_walk(create_graph, capture, inputs)
        roots = _root_grads([tensors] if type(tensors) is Tensor else _as_list(tensors), grad_tensors, "backward",
                            arrays)
        self.create_graph = create_graph
        self.retain_graph = create_graph if retain_graph is None else retain_graph
        self.capture, self.stop, self.index = capture, stop, 0
        self.targets = self.sinks = None
        if inputs is not None:
            self.targets, self.sinks = _input_targets(inputs)
        elif capture is not None:
            self.targets = {node for node, _ in capture}
        deps, needed, runs = _plan(roots, self.targets, stop)
        self.deps, self.needed, self.runs = deps, needed, runs
        self.buffers = buffers = {}
        if needed is None and len(roots) == 1:   # loss.backward(): its one node is the one ready
            node, nr, g = roots[0]
            buffers[node] = buf = [None] * node.n_outputs
            buf[nr] = g
            self.ready = [(-node.seq, node)]
            return
        for node, nr, g in roots:
            if needed is not None and node not in needed:
                continue
            buf = buffers.get(node)
            if buf is None:
                buf = buffers[node] = [None] * node.n_outputs
            buf[nr] = g if buf[nr] is None else buf[nr] + g
        self.ready = ready = []
        for n in buffers:
            if not deps.get(n, 0):
                ready.append((-n.seq, n))
        heapq.heapify(ready)


def backward_steps(tensors, grad_tensors=None, retain_graph: bool | None = None,
                   create_graph: bool = False, inputs: Sequence | None = None,
                   _capture: dict | None = None, _stop: bool = False) -> Iterator[BackwardStep]:
    """Execute the backward pass of ``tensors`` one node at a time.

    This is the public, resumable form of ``backward()``: ``backward()`` runs the same walk
    to the end. Stop iterating at any point and the rest of the walk is left undone (no
    gradients accumulated past that node); keep the generator and call ``next`` later to resume.

    Args:
        tensors: the output(s) to differentiate (a loss, usually).
        grad_tensors: the gradient w.r.t. each output (default: ones for scalars).
        retain_graph: keep saved buffers for another backward (default: ``create_graph``).
        create_graph: record the backward ops so the gradients are differentiable.
        inputs: if given, accumulate ``.grad`` into these tensors only (leaves or not), and
            skip the nodes that cannot reach them.

    Yields:
        ``BackwardStep(index, node, grad_outputs, grad_inputs)`` after each node runs, in
        execution order: ``grad_outputs`` are the gradients flowing into the node (w.r.t.
        its forward outputs), ``grad_inputs`` those it produced (one per ``next_functions``
        entry; ``()`` for ``AccumulateGrad``). ``step.name`` is the node's name, and
        ``step.node.tape_seq`` the forward op's sequence number if it was recorded. Each
        step is also emitted as a ``backward_step`` event.

    >>> steps = list(tapelab.autograd.backward_steps(loss))
    >>> [s.name for s in steps][:2]
    ['SumBackward0', 'MulBackward0']
    """
    walk = _Walk(tensors, grad_tensors, retain_graph, create_graph, inputs, _capture, _stop)
    ready = walk.ready  # noqa: F841 - the debugger's peek() reads the ready nodes from this frame
    yield from _steps(walk)
    _passed(walk)


def _passed(walk: _Walk) -> None:
    """The ``backward_pass`` event of a walk run to its end, while anyone listens."""
    if _PASS_SUBSCRIBERS:
        events.emit("backward_pass", events.BackwardPass(walk.index))


def _steps(walk: _Walk) -> Iterator[BackwardStep]:
    """The walk, one node per step, with every feature (hooks, events, anomaly mode, ``inputs=``,
    capture)."""
    buffers, ready, targets, sinks = walk.buffers, walk.ready, walk.targets, walk.sinks
    capture, create_graph, runs, stop = walk.capture, walk.create_graph, walk.runs, walk.stop
    while ready:
        node = heapq.heappop(ready)[1]
        grads = buffers.pop(node)
        leaf = type(node) is AccumulateGrad
        observed = bool(_STEP_SUBSCRIBERS)
        start = perf_counter_ns() if observed else 0
        if stop and node in targets:
            _capture_grads(node, grads, capture)  # a boundary: the caller's walk runs it
            continue
        if observed:  # ops dispatched while this node runs, sums its gradients or accumulates belong to it
            running = _RUNNING.nodes
            running.append(node)
        outer, _RUNNING.walk = _RUNNING.walk, walk   # between steps a debugger may run other passes
        try:
            prev = GRAD.enabled  # read per node: the caller may change modes between steps
            GRAD.enabled = create_graph
            try:
                if node.pre_hooks is not None:
                    grads = _run_prehooks(node, grads)
                if sinks and node in sinks:
                    for nr, t in sinks[node]:
                        _sink(t, grads[nr], create_graph)
                if capture is not None and node in targets:
                    _capture_grads(node, grads, capture)
                if leaf:
                    out = ()
                    if capture is None and (targets is None or node in targets):
                        _accumulate(node, grads[0], create_graph)
                elif runs is None or node in runs:
                    if observed or node.hooks or _anomaly.STATE.enabled:
                        out = _run(node, grads)
                    else:  # the common case, kept flat: no hooks, nobody watching
                        out = node.run(grads)
                        if len(out) != len(node.edges):
                            _wrong_count(node, out)
                else:
                    continue  # a target that is only captured: it does not run
            finally:
                GRAD.enabled = prev
            if observed:
                step = BackwardStep(walk.index, node, grads, out, start, perf_counter_ns() - start)
                events.emit("backward_step", step)
            else:
                step = BackwardStep(walk.index, node, grads, out)
            walk.index += 1
            _send(walk, node, out)
        finally:
            _RUNNING.walk = outer
            if observed:
                running.pop()
        yield step
        # drop the walk's own references, so _accumulate can tell when nobody else holds a gradient
        step = out = grads = None


def _run_plain(walk: _Walk) -> None:
    """``backward()``'s and ``autograd.grad``'s walk without a generator: what ``_steps`` does, in
    one loop (``_send`` and ``OpNode.run`` inlined; ``grad``'s captured targets, and its pruning
    to the nodes that reach them, as ``_steps`` has them; not ``backward(inputs=)``'s sinks). It
    stops as soon as anomaly mode is turned on (a hook may) and leaves the rest of the walk to
    ``_steps``.

    While ``backward_step`` has subscribers (a tape, a profiler, ``%tape on``), a node is *watched*
    and its step is made and emitted here as ``_steps`` makes it, with the same index, content and
    surroundings: the node is ``running_node()`` from its pre-hooks to its last gradient sent;
    the event comes after it ran (timed from before its pre-hooks), under the caller's grad mode,
    before its gradients are sent; the step stays alive while they are (what holds a gradient
    decides whether a sum is done in place); a leaf accumulates before its step is made, holding
    what ``_steps`` holds, so ``.grad`` takes the gradient exactly where it would there (not where
    a subscriber kept the step that sent it: then a copy). Handing the walk to the generator cost
    its frames, thread-local reads and switch per node (34-node chain under a subscriber: 241 ->
    201 us, ``bench/ab_watched_backward.py``).

    A node whose run leaves exactly one node ready, and nothing else waiting, hands it on
    directly (``lane``): the heap orders only nodes that wait together, as along a chain none do."""
    create_graph, ready = walk.create_graph, walk.ready
    # GRAD.enabled read and set inline (a property: a frame each way), as no_grad's enter: the finally restores it
    ident = _get_ident()
    prev = ident not in GRAD_OFF
    if create_graph:
        GRAD_OFF.discard(ident)
    else:
        GRAD_OFF.add(ident)
    running = _RUNNING
    outer, running.walk = running.walk, walk
    index = walk.index
    lane = watched = None
    try:
        if _arrays_walk(create_graph, walk.capture, walk.needed):
            _run_arrays(walk)
            index = walk.index
            if not ready:   # the array walk ran it all (the loop's set-up below is for the rest)
                return
        elif walk.capture is None and walk.needed is None and not create_graph:
            # backward()'s walk, whose root ones may be an array for the array walk: a subscriber (another
            # thread's) came since it was made, and the tensor loop never meets an array
            _as_tensors(walk.buffers)
        buffers, deps = walk.buffers, walk.deps
        capture, targets, needed, runs = walk.capture, walk.targets, walk.needed, walk.runs   # (never ``stop``)
        release = not walk.retain_graph
        anomaly = _anomaly.STATE
        heappop, heappush = heapq.heappop, heapq.heappush
        subscribers = _STEP_SUBSCRIBERS
        watching = running.nodes   # the running nodes' stack, while a watched node runs
        detached = DETACHED_IN_PLACE   # once set, OpNode.run re-grades the inputs (not inlined here)
        step = None
        while (lane is not None or ready) and not anomaly.enabled:
            if lane is None:
                node = heappop(ready)[1]
            elif ready:   # a skipped node's inputs became ready beside it: the heap orders them all
                heappush(ready, (-lane.seq, lane))
                node, lane = heappop(ready)[1], None
            else:
                node, lane = lane, None
            grads = buffers.pop(node)
            if subscribers:
                start = perf_counter_ns()
                watching.append(node)
                watched = node
            if node.pre_hooks is not None:
                grads = _run_prehooks(node, grads)
            if capture is not None:   # grad(): a target's gradients are captured, a leaf's not accumulated
                if node in targets:
                    _capture_grads(node, grads, capture)
                if runs is not None and node not in runs and type(node) is not AccumulateGrad:
                    if watched is not None:   # only captured: no step
                        watching.pop()
                        watched = None
                    continue
            if type(node) is AccumulateGrad:
                if watched is None:
                    if capture is None:
                        g = grads[0]
                        grads = None   # so _accumulate can tell when nobody else holds the gradient
                        _accumulate(node, g, create_graph)
                        g = None
                    index += 1
                    continue
                if capture is None:
                    _accumulate(node, grads[0], create_graph)   # as _steps calls it: the same references
                if prev:   # the caller's grad mode for the event (inline, as at the walk's start)
                    GRAD_OFF.discard(ident)
                else:
                    GRAD_OFF.add(ident)
                step = BackwardStep(index, node, grads, (), start, perf_counter_ns() - start)
                for fn in tuple(subscribers):
                    fn(step)
                step = grads = None
                watching.pop()
                watched = None
                prev = ident not in GRAD_OFF   # read per node, as _steps does: a subscriber may change modes
                if create_graph:
                    GRAD_OFF.discard(ident)
                else:
                    GRAD_OFF.add(ident)
                index += 1
                continue
            edges = node.edges
            if node.hooks:
                out = _run(node, grads)
            elif node.plain and node.inputs is not None and not detached[0]:
                # OpNode.run inlined (one frame per node fewer): version checks, then the vjp
                versions = node.versions
                if versions is not None:
                    inputs = node.inputs
                    for i, v in versions:
                        if (inputs[i]._vc if i >= 0 else node.out_vc)[0] != v:
                            node._check_versions()   # raises, naming the tensor
                g = grads[0]
                if g is None:
                    out = (None,) * len(edges)
                else:
                    op = node.op
                    saved = (Tensor._wrap(node.out_data, True, node, 0, node.out_vc, g._device)
                             if op.save_output else None)
                    if _DISPATCH.functions is None:
                        out = op.vjp(g, saved, *node.inputs, **node.params)
                    else:
                        out = vjp_below_subclasses(op, g, saved, node.inputs, node.params)
                    g = None
                if len(out) != len(edges):
                    _wrong_count(node, out)
            else:
                out = node.run(grads)
                if len(out) != len(edges):
                    _wrong_count(node, out)
            if watched is not None:   # as _steps: the event under the caller's grad mode, so the sends
                if prev:
                    GRAD_OFF.discard(ident)
                else:
                    GRAD_OFF.add(ident)
                step = BackwardStep(index, node, grads, out, start, perf_counter_ns() - start)
                for fn in tuple(subscribers):
                    fn(step)
            index += 1
            grads = None
            for e, gi in zip(edges, out):
                if e is None:
                    continue
                child, nr = e
                if needed is not None and child not in needed:
                    continue
                if gi is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        if child.n_outputs == 1:
                            buffers[child] = [gi]
                        else:
                            buf = buffers[child] = [None] * child.n_outputs
                            buf[nr] = gi
                    else:
                        _sum_into(buf, nr, gi, create_graph)
                left = deps[child] - 1
                deps[child] = left
                if left == 0:
                    if child not in buffers:
                        _skip(child, deps, buffers, ready, needed, runs)
                    elif lane is None and not ready:
                        lane = child
                    else:
                        if lane is not None:   # two nodes ready: the heap orders them
                            heappush(ready, (-lane.seq, lane))
                            lane = None
                        heappush(ready, (-child.seq, child))
            out = gi = buf = None   # no frame reference left: _accumulate and _sum_into count them
            if release:
                if node.plain and node.versions is not None:
                    node.inputs = node.out_data = None   # OpNode.release for a node that saved values
                    node.freed_by = "backward()"
                else:
                    node.release()
            if watched is not None:
                step = None
                watching.pop()
                watched = None
                prev = ident not in GRAD_OFF   # read per node, as _steps does: a subscriber may change modes
                if create_graph:
                    GRAD_OFF.discard(ident)
                else:
                    GRAD_OFF.add(ident)
    finally:
        if lane is not None:   # anomaly mode turned on, or a vjp raised: the walk keeps its node
            heappush(ready, (-lane.seq, lane))
        if watched is not None:   # raised while a watched node ran: it runs no more
            watching.pop()
        walk.index = index
        if prev:
            GRAD_OFF.discard(ident)
        else:
            GRAD_OFF.add(ident)
        running.walk = outer


def _run_arrays(walk: _Walk) -> None:
    """``_run_plain``'s walk while nobody can see a gradient being made (no watcher, mode, functions
    hook, anomaly mode or ``create_graph``; ``backward()`` without ``inputs=``): a node whose op declares
    an ``array_vjp`` runs it on the gradient's array, with no dispatch and no Tensor (chain16's seven
    vjp dispatches and their tensors were ~25 of its ~50 us backward), and the arrays wait in the
    buffers as they are. Every array there was made by the walk (an array vjp's result, or such an
    array passed on), so it is held by the buffers alone, as the tensor the dispatched op would have
    made would be: the same in-place sums (``_sum_arrays``) and the same ``.grad`` ownership
    (``_accumulate_array``) follow from its reference count. Any other op's vjp runs here as
    ``_run_plain`` runs it, on a tensor made of the array (which it may pass on: then the array).

    The walk stops before the first node that has hooks or is not an op's node (a custom ``Function``,
    a view's ``CopySlices``), or once someone starts watching (a post-accumulate hook may), and hands
    the rest to ``_run_plain``: each waiting array becomes one tensor, so the tensor loop finds the
    buffers as it would have made them. The order is ``_run_plain``'s (a node is taken from the heap only
    once it is known to run here)."""
    buffers, ready, deps = walk.buffers, walk.ready, walk.deps
    release = not walk.retain_graph
    heappop, heappush = heapq.heappop, heapq.heappush
    subscribers, state, detached = _STEP_SUBSCRIBERS, _DISPATCH, DETACHED_IN_PLACE
    index = walk.index
    lane = None
    try:
        while True:
            if lane is not None:
                node = lane
            elif ready:
                node = ready[0][1]
            else:
                return
            if (subscribers or state.slow or state.functions is not None or detached[0]
                    or node.pre_hooks is not None or node.hooks):
                break
            if type(node) is AccumulateGrad:
                if lane is None:
                    heappop(ready)
                else:
                    lane = None
                g = buffers.pop(node)[0]   # the gradient's holders decide whether .grad takes it
                index += 1
                if type(g) is _ndarray:
                    _accumulate_array(node, g)
                else:
                    _accumulate(node, g, False)
                g = None
                continue
            if not node.plain or node.inputs is None:
                break
            if lane is None:
                heappop(ready)
            else:
                lane = None
            g = buffers.pop(node)[0]
            index += 1
            # the version checks; the usual all-zero versions (dispatch's shared constants) test the counters alone
            versions = node.versions
            if versions is _V01:
                inputs = node.inputs
                if inputs[0]._vc[0] or inputs[1]._vc[0]:
                    node._check_versions()   # raises, naming the tensor
            elif versions is _OUT:
                if node.out_vc[0]:
                    node._check_versions()
            elif versions is not None:
                inputs = node.inputs
                for i, v in versions:
                    if (inputs[i]._vc if i >= 0 else node.out_vc)[0] != v:
                        node._check_versions()
            edges = node.edges
            if g is None:
                out = (None,) * len(edges)
            else:
                op = node.op
                array_vjp = op.array_vjp
                out = None
                if array_vjp is not None:
                    if type(g) is _ndarray:   # an array the walk made
                        out = array_vjp(g, node.out_data, node.inputs, node.params)   # one gradient per edge
                    elif type(g._data) is _ndarray:   # a tensor from outside the walk (the root's): passed on, itself
                        d = g._data
                        out = array_vjp(d, node.out_data, node.inputs, node.params)
                        if out is not None:
                            for r in out:   # (a loop: the comprehension's frame cost the root's sum 0.3 us)
                                if r is d:
                                    out = tuple([g if r is d else r for r in out])
                                    break
                            r = None   # no frame reference left: the reference counts decide
                        d = None
                if out is None:
                    t = _tensor(g)
                    saved = (Tensor._wrap(node.out_data, True, node, 0, node.out_vc, t._device)
                             if op.save_output else None)
                    out = op.vjp(t, saved, *node.inputs, **node.params)
                    if len(out) != len(edges):
                        _wrong_count(node, out)
                    if t is not g:   # an array passed on stays the array: its holders are counted as the array's
                        out = tuple([g if r is t else r for r in out])
                    t = saved = None
                g = None
            for e, gi in zip(edges, out):
                if e is None:
                    continue
                child, nr = e
                if gi is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        if child.n_outputs == 1:
                            buffers[child] = [gi]
                        else:
                            buf = buffers[child] = [None] * child.n_outputs
                            buf[nr] = gi
                    elif buf[nr] is None:
                        buf[nr] = gi
                    else:
                        _sum_arrays(buf, nr, gi)
                left = deps[child] - 1
                deps[child] = left
                if left == 0:
                    if child not in buffers:
                        _skip(child, deps, buffers, ready, None, None)
                    elif lane is None and not ready:
                        lane = child
                    else:
                        if lane is not None:   # two nodes ready: the heap orders them
                            heappush(ready, (-lane.seq, lane))
                            lane = None
                        heappush(ready, (-child.seq, child))
            out = gi = buf = None   # no frame reference left: the reference counts decide
            if release:
                if node.versions is not None:
                    node.inputs = node.out_data = None   # OpNode.release for a node that saved values
                    node.freed_by = "backward()"
                else:
                    node.release()
        # handed to _run_plain: the node it stopped at waits in the heap, the arrays become tensors
        if lane is not None:
            heappush(ready, (-lane.seq, lane))
            lane = None
        _as_tensors(buffers)
    finally:
        if lane is not None:   # a vjp raised: the walk keeps its node
            heappush(ready, (-lane.seq, lane))
        walk.index = index


def _arrays_walk(create_graph: bool, capture, pruned) -> bool:
    """Whether ``_run_plain`` runs a walk by arrays (``_run_arrays``): nobody watches, no mode, functions
    hook or ``detach_`` of a saved input, no ``create_graph``, no captured targets, no pruning (``pruned``:
    ``backward(inputs=)``'s inputs, or the walk's needed nodes)."""
    return not (create_graph or capture is not None or pruned is not None or _STEP_SUBSCRIBERS or _DISPATCH.slow
                or _DISPATCH.functions is not None or DETACHED_IN_PLACE[0])


def _as_tensors(buffers: dict) -> None:
    """The arrays waiting in the buffers made tensors, one per array, for the tensor loop."""
    made: dict = {}
    for buf in buffers.values():
        for i, g in enumerate(buf):
            if type(g) is _ndarray:
                t = made.get(id(g))
                if t is None:
                    t = made[id(g)] = _tensor(g)
                buf[i] = t


def _tensor(g):
    """A gradient the array walk made, as the tensor its vjp would have returned (a tensor as it is)."""
    return Tensor._wrap(g, False, None, 0, [0], CPU) if type(g) is _ndarray else g


def _sum_arrays(buf: list, nr: int, gi) -> None:
    """``_sum_into`` in the array walk: ``gi`` (an array, or a vjp's tensor: its array) is summed into the
    waiting array in place where ``_sum_into`` would sum their tensors in place (the waiting one held by this
    buffer alone, not a view, writeable, same shape and dtype as ``gi``); anything else is ``_sum_into``'s on
    tensors made of them, but where ``_summed_apart`` makes the dispatched add's sum on the arrays."""
    old = buf[nr]
    d = gi._data if type(gi) is Tensor else gi   # a vjp's tensor (nobody watches this walk): its array
    if type(old) is _ndarray:
        if (type(d) is _ndarray and old.base is None and getrefcount(old) == _SOLE and d.dtype is old.dtype
                and d.shape == old.shape and old.flags.writeable):
            if (old.size > kernels.PARALLEL_MIN and old.dtype == _F32 and old.flags.c_contiguous
                    and d.flags.c_contiguous):
                _add_into(old, d)
            else:
                old += d
            return
        if _summed_apart(buf, nr, old, d):
            return
        buf[nr] = _tensor(old)
    elif old.grad_fn is None and _summed_apart(buf, nr, old._data, d):   # a vjp's tensor (the walk made it)
        return
    old = d = None   # held by the buffer alone again, as _sum_into counts
    _sum_into(buf, nr, _tensor(gi), False)


def _summed_apart(buf: list, nr: int, old, d) -> bool:
    """``_sum_arrays``' sum into a new array where the waiting one is a view (cat's and stack's backward hand
    out slices of one gradient) or shared, float32 or float64 below the threads' grain, not 0-d (numpy's sum
    of two is a scalar): the dispatched add's ``a + b`` (its one-thread form, the same floats at any size)
    and ATen's layout of it, without the two tensors and the dispatch (6.1 -> 1.5 us on 32x64)."""
    if not (type(old) is _ndarray and type(d) is _ndarray and d.dtype is old.dtype and d.shape == old.shape
            and old.ndim and old.dtype in _SUMMED_APART
            and (old.size <= kernels.PARALLEL_MIN or kernels.threads() == 1)):
        return False
    new = old + d
    if new.ndim > 1 and not (_rows_first(old) and _rows_first(d) and new.flags.c_contiguous):
        new = in_iterator_order(new, (old, d))
    buf[nr] = new
    return True


def _rows_first(a) -> bool:
    """``a`` is 2-D with no dim of one and its rows the slower dim (a slice of a wider array's columns, or
    C-contiguous): ATen orders an elementwise result of such operands row-major, as numpy does."""
    if a.ndim != 2:
        return False
    rows, cols = a.shape
    slow, fast = a.strides
    return slow > fast > 0 and rows != 1 and cols != 1


def _add_into(old, gi) -> None:
    """``old += gi`` on float32 C-contiguous arrays over ATen's grain, cut over the threads as ATen's ``add_``
    (the same floats: ``fma(gi, 1, old)`` rounds once, as the sum): the ResNet block's 512 KiB gradients come
    cold, and numpy's one-thread ``+=`` took 36 us of them where two threads take 28 (torch 21; hot, one
    thread is faster: 12 against 15; bench/README.md, issue 17, session 30)."""
    if kernels.threads() > 1 and kernels.enabled():   # the caller tested dtype, shape, order and the grain
        flat = old.ravel()
        kernels.parallel(kernels.loops("pointwise").scaled_add, 3, gi.ravel(), flat, flat, _F32_ONE)
    else:
        old += gi


def _accumulate_array(node: AccumulateGrad, d) -> None:
    """``_accumulate`` of a gradient the array walk made: ``.grad`` may take the array only when nothing
    else holds it (another leaf's pending gradient: then a copy), as ``_accumulate`` decides for the
    tensor it would have been. Its two common cases (a first ``.grad`` of the leaf's dtype, shape and
    layout; an in-place update of one) are written out; the rest, and a leaf with post-accumulate
    hooks, are ``_accumulate``'s."""
    var = node._variable()
    if var is None:
        return
    vd = var._data
    if (d.dtype is vd.dtype and d.shape == vd.shape and not var._grad_nowhere and var._device is CPU
            and not var.__dict__.get("_post_accumulate_hooks")):
        old = var._grad
        if old is None:
            if d.flags.c_contiguous or not vd.flags.c_contiguous:
                var._grad = Tensor._wrap(d if getrefcount(d) <= _SOLE else d.copy(), False, None, 0, [0], CPU)
                return
        elif not old.requires_grad and old._data.shape == d.shape:
            old._data += d
            old._vc[0] += 1
            return
    _accumulate(node, Tensor._wrap(d if getrefcount(d) <= _SOLE else d.copy(), False, None, 0, [0], CPU), False)


_LEAF_ORDERS: dict = {}


class _Tie:
    """A stand-in for a node in the ready heap (``Node.__lt__``: never less)."""
    __slots__ = ("k",)

    def __init__(self, k: int):
        self.k = k

    def __lt__(self, other) -> bool:
        return False


def _leaf_order(k: int) -> tuple:
    """The order in which ``_run_plain`` accumulates the ``k`` leaves one node sent gradients to:
    the first waits as its lane, the rest join it in the ready heap, where they all tie
    (``Node.__lt__``), so heapq's sifts decide. Worked out once per ``k`` by the same heap calls."""
    order = _LEAF_ORDERS.get(k)
    if order is None:
        ready, tie = [], -sys.maxsize
        for i in range(1, k):
            if i == 1:
                heapq.heappush(ready, (tie, _Tie(0)))
            heapq.heappush(ready, (tie, _Tie(i)))
        order = _LEAF_ORDERS[k] = (0,) if k == 1 else tuple(heapq.heappop(ready)[1].k for _ in range(k))
    return order


class _OnePass:
    """``_one_node``'s pass as ``_RUNNING.walk`` while it runs: what a vjp (a compiled step's: whether
    to drop its saved activations) and a post-accumulate hook (``current_graph_task_id``,
    ``will_engine_execute_node``) read of the walk."""

    __slots__ = ("node", "retain_graph", "task_id")
    needed = None

    def __init__(self, node, retain_graph: bool):
        self.node, self.retain_graph, self.task_id = node, retain_graph, next(_TASK_IDS)

    @property
    def deps(self) -> set:
        """The nodes this pass runs."""
        return {self.node, *(e[0] for e in self.node.edges if e is not None)}


def _one_node(t: Tensor, retain_graph: bool | None) -> bool:
    """``loss.backward()`` where the loss's node sends its gradients straight to distinct leaves (a
    compiled function's one fused node, ``tapelab.compile``'s common case): that node's vjp and the
    leaves' accumulation, in the walk's order, without building the walk (its plan, buffers and
    loop were ~4 us of a 16 us compiled chain16 step). False, having done nothing, for anything
    else: hooks, someone watching (a mode, a ``backward_step`` or ``backward_pass`` subscriber: the walk
    counts the steps), anomaly mode."""
    node = t.grad_fn
    if node is None or not node.plain:
        return False
    edges = node.edges
    leaves = 0
    for e in edges:   # first: a loss whose node sends to another op's node (most graphs) leaves at once
        if e is not None:
            acc = e[0]
            if type(acc) is not AccumulateGrad or acc.pre_hooks is not None:
                return False
            leaves += 1
    if (node.pre_hooks is not None or node.hooks or node.inputs is None
            or not t.requires_grad or (t._vc[0] and t._base is not None) or t._data.size != 1
            or t._data.dtype.kind not in FLOATING_KINDS or _DISPATCH.slow or _STEP_SUBSCRIBERS
            or _PASS_SUBSCRIBERS or _anomaly.STATE.enabled or DETACHED_IN_PLACE[0]):
        return False
    if leaves > 1 and len({e[0] for e in edges if e is not None}) != leaves:   # a leaf twice (x * x): the walk sums first
        return False
    prev = GRAD.enabled
    GRAD.enabled = False
    running = _RUNNING
    outer, running.walk = running.walk, _OnePass(node, bool(retain_graph))
    try:
        out = node.run((_ones(t),))
        if len(out) != len(edges):
            _wrong_count(node, out)
        sent = []
        for e, gi in zip(edges, out):
            if e is not None and gi is not None:
                sent.append((e[0], gi))
        out = gi = None
        if not retain_graph:
            node.release()
        n = len(sent)
        for i in (0,) if n == 1 else _leaf_order(n) if n else ():
            acc, g = sent[i]
            sent[i] = None   # the gradient's last holder is this frame: _accumulate may keep it as .grad
            _accumulate(acc, g, False)
    finally:
        GRAD.enabled = prev
        running.walk = outer
    return True


def _send(walk: _Walk, node, out) -> None:
    """Pass a node's gradients to its inputs' nodes (a node whose last input arrived becomes
    ready), then free its buffers unless the graph is retained."""
    buffers, deps, needed = walk.buffers, walk.deps, walk.needed
    for e, gi in zip(node.edges, out):
        if e is None:
            continue
        child, nr = e
        if needed is not None and child not in needed:
            continue
        if gi is not None:
            buf = buffers.get(child)
            if buf is None:
                buf = buffers[child] = [None] * child.n_outputs
            _sum_into(buf, nr, gi, walk.create_graph)
        left = deps[child] - 1
        deps[child] = left
        if left == 0:
            if child in buffers:
                heapq.heappush(walk.ready, (-child.seq, child))
            else:
                _skip(child, deps, buffers, walk.ready, needed, walk.runs)
    if not walk.retain_graph:
        node.release()


def _count_of_sole_holder() -> int:
    """What ``getrefcount`` reports for an object one container and one local hold: measured, since
    interpreters differ in how they count the argument (3 on CPython 3.11)."""
    held = [object()]
    obj = held[0]
    return getrefcount(obj)


_SOLE = _count_of_sole_holder()


def _sum_into(buf: list, nr: int, gi, create_graph: bool) -> None:
    """Add ``gi`` to the gradient waiting in ``buf[nr]``: in place when the walk alone holds
    that gradient and its memory (no other reference to the tensor or its array, not a view,
    same shape and dtype as ``gi``), as PyTorch's InputBuffer does; else a dispatched add.
    Only while nobody watches (a mode must see the add) and without ``create_graph`` (the
    sum is then part of the differentiable graph)."""
    old = buf[nr]
    if old is None:
        buf[nr] = gi
        return
    d = old._data
    # old is held by buf and this frame only, d by old._data and this frame only
    if (not create_graph and type(d) is _ndarray and d.base is None and getrefcount(old) == _SOLE
            and getrefcount(d) == _SOLE and isinstance(gi, Tensor) and gi._data.dtype is d.dtype
            and gi._data.shape == d.shape and d.flags.writeable and not _DISPATCH.slow):
        d += gi._data   # the engine's own running sum: no dispatch, no tape node
        return
    buf[nr] = old + gi


def _wrong_count(node, out):
    raise RuntimeError(f"function {node.name()} returned an incorrect number of "
                       f"gradients (expected {len(node.edges)}, got {len(out)})")


def _run(node, grads) -> tuple:
    """Run one node's backward (and its post-hooks); anomaly mode checks what it returned."""
    anomaly = _anomaly.STATE.enabled
    if anomaly:
        _anomaly.STATE.backward_depth += 1
    try:
        out = node.run(grads)
        if len(out) != len(node.edges):
            _wrong_count(node, out)
        if node.hooks:
            for hook in tuple(node.hooks):
                res = hook(tuple(out), tuple(grads))
                if res is not None:
                    out = tuple(res)
        if _anomaly.STATE.enabled:
            _anomaly.check_backward(node, out)
    except Exception as e:
        if _anomaly.STATE.enabled:
            _anomaly.annotate(e, node)
        raise
    finally:
        if anomaly:
            _anomaly.STATE.backward_depth -= 1
    return out


def _skip(node, deps, buffers, ready, needed, runs) -> None:
    """A node that received no gradient at all: its inputs get none from it either."""
    stack = [node]
    while stack:
        n = stack.pop()
        if runs is not None and n not in runs:
            continue
        for e in n.edges:
            if e is None or (needed is not None and e[0] not in needed):
                continue
            child = e[0]
            deps[child] -= 1
            if deps[child] == 0:
                if child in buffers:
                    heapq.heappush(ready, (-child.seq, child))
                else:
                    stack.append(child)


def _apply_hooks(hooks, g):
    for h in tuple(hooks):
        r = h(g)
        if r is not None:
            g = r
    return g


def _run_prehooks(node, grads):
    """Tensor hooks first (a leaf's are its AccumulateGrad's), then retain_grad hooks, then node
    pre-hooks (PyTorch's order)."""
    grads = list(grads)
    pre = node.pre_hooks
    if pre:
        for key in sorted(k for k in pre if k >= 0):
            nr = key - RETAIN if key >= RETAIN else key
            if grads[nr] is not None:
                grads[nr] = _apply_hooks(pre[key], grads[nr])
        for h in tuple(pre.get(-1, ())):
            r = h(tuple(grads))
            if r is not None:
                grads = list(r)
    return grads


def _capture_grads(node, grads, capture) -> None:
    for nr in range(node.n_outputs):
        key = (node, nr)
        if key in capture and grads[nr] is not None:
            g = grads[nr]
            capture[key] = g if capture[key] is None else capture[key] + g


def _sink(t: Tensor, g, create_graph: bool) -> None:
    """``backward(inputs=[non_leaf])``: accumulate into that tensor's ``.grad``."""
    if g is None:
        return
    if not create_graph:
        g = g.detach()
    t.grad = (g if create_graph else g.clone()) if t.grad is None else t.grad + g


def _accumulate(node: AccumulateGrad, g, create_graph: bool) -> None:
    if g is None:
        return
    var = node._variable()
    if var is None or var._grad_nowhere:   # a no_grad view requiring grad through its base: its gradient goes nowhere
        return
    if not create_graph and g.requires_grad:
        g = g.detach()
    d, vd = g._data, var._data
    if d.dtype != vd.dtype:
        g = g.to(var.dtype)  # a vjp that promoted: .grad keeps its tensor's dtype, as PyTorch's
        d = g._data
    # the innermost mode sees every accumulation; True: an update of an existing .grad is dispatched
    modes = _LOCAL.modes if _DISPATCH.slow else None   # one thread-local read (STATE.modes reads it each)
    routed = modes and modes[-1].accumulate(var, g)
    old = var._grad
    if old is None:
        if d.shape != vd.shape or g._device is not var._device:
            _check_grad(var, g)   # the checks of the .grad setter; what passes them needs no repeat
        if not d.flags.c_contiguous and vd.flags.c_contiguous:
            # PyTorch's layout contract: .grad is laid out like its parameter (a transposed or
            # broadcast gradient would make every optimizer update a strided walk)
            var._grad = g.contiguous()
        else:
            # take ownership when nothing else holds the gradient, as PyTorch's AccumulateGrad does
            # (another leaf's pending gradient, a tape's record, a hook's list: then a copy)
            if create_graph or sys.getrefcount(g) <= _SOLE:
                var._grad = g
            elif routed:
                var._grad = g.clone()   # a mode that routes accumulation sees the copy as an op
            else:   # the engine's own bookkeeping, as the in-place sum below
                var._grad = Tensor._wrap(g._data.copy(), False, None, 0, [0], g._device)
    elif create_graph or old.requires_grad or old._data.shape != g._data.shape:
        var.grad = old + g
    elif routed:
        # the mode (a capture, tapelab.graphs) must see the update: an in-place add it dispatches
        with no_grad():
            old.add_(g)
    else:
        # accumulation is the engine's own bookkeeping, not a user op: no dispatch, no tape node
        old._data += g._data
        old._vc[0] += 1
    post = var.__dict__.get("_post_accumulate_hooks")
    if post:
        for hook in tuple(post):
            if hook(var) is not None:
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")
    if node.hooks:   # the node's own post-hooks, after the tensor's: hook(grad_inputs=(), grad_outputs)
        for hook in tuple(node.hooks):
            hook((), (g,))


def _drain(steps) -> None:
    """Run a walk to the end without holding any step (a held step would pin its gradients)."""
    deque(steps, maxlen=0)


# A leaf's .grad made with create_graph holds a graph that holds the leaf (its saved value): PyTorch
# warns of the cycle once per process
_CYCLE_WARNED: list = []
_CYCLE_WARNING = ("Using backward() with create_graph=True will create a reference cycle between the parameter and "
                  "its gradient which can cause a memory leak. We recommend using autograd.grad when creating the "
                  "graph to avoid this. If you have to use this function, make sure to reset the .grad fields of "
                  "your parameters to None after use to break the cycle and avoid the leak.")


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None,
             create_graph: bool = False, grad_variables=None, inputs=None) -> None:
    """Compute the gradients of ``tensors`` w.r.t. graph leaves and accumulate them in ``.grad``."""
    if _DISPATCH.slow and _batching.modes():
        raise RuntimeError("backward() called inside a functorch transform. This is not supported, please use "
                           "functorch.grad or functorch.vjp instead or call backward() outside of functorch "
                           "transforms.")
    if grad_variables is not None:
        grad_tensors = grad_variables
    if create_graph and inputs is None and not _CYCLE_WARNED:
        _CYCLE_WARNED.append(True)
        warnings.warn(_CYCLE_WARNING, UserWarning, stacklevel=3)
    if (inputs is None and grad_tensors is None and not create_graph and type(tensors) is Tensor
            and _one_node(tensors, retain_graph)):
        return
    walk = _Walk(tensors, grad_tensors, retain_graph, create_graph, inputs, None, False, inputs is None)
    if inputs is None:
        _run_plain(walk)
    if inputs is not None or walk.ready:
        _drain(_steps(walk))  # all of it with inputs=, else what is left once anomaly mode is on
    if _PASS_SUBSCRIBERS:   # _passed's test, inline
        _passed(walk)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False):
    """Return the gradients of ``outputs`` w.r.t. ``inputs`` without touching ``.grad``.

    Only nodes on a path from ``outputs`` to ``inputs`` run. ``allow_unused`` returns None
    for an input the outputs do not depend on (an error otherwise); ``materialize_grads``
    returns zeros instead. ``inputs`` may be a dict of tensors (the result is then a dict with
    its keys); with ``is_grads_batched`` the first dim of each ``grad_outputs`` is a batch of
    cotangents, one backward pass each, results stacked (PyTorch vmaps that loop).
    """
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use torch.autograd.backward.", FutureWarning,
                      stacklevel=2)
    if isinstance(inputs, dict):
        values = grad(outputs, list(inputs.values()), grad_outputs, retain_graph, create_graph,
                      allow_unused=allow_unused, is_grads_batched=is_grads_batched,
                      materialize_grads=materialize_grads)
        return dict(zip(inputs, values))
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    inputs = _as_list(inputs)
    outputs = _as_list(outputs)
    for i, t in enumerate(outputs):   # PyTorch names an output that does not require grad first
        _fresh(t)
        if isinstance(t, Tensor) and not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    capture: dict = {}
    keys = []
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad(): inputs[{i}] must be a Tensor, got {type(t).__name__}")
        _fresh(t)
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        key = (t.grad_fn if t.grad_fn is not None else t._accumulator(), t._out_nr)
        capture[key] = None
        keys.append(key)
    walk = _Walk(outputs, grad_outputs, retain_graph, create_graph, None, capture, False)
    _run_plain(walk)
    if walk.ready:
        _drain(_steps(walk))   # what is left once anomaly mode is on
    _passed(walk)
    return tuple(_result(capture[key], t, i, create_graph, allow_unused or materialize_grads,
                         materialize_grads) for i, (key, t) in enumerate(zip(keys, inputs)))


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize):
    """``grad`` once per row of the batched cotangents, each input's results stacked along dim 0."""
    cotangents = _as_list(grad_outputs)
    if not cotangents or any(not isinstance(c, Tensor) for c in cotangents):
        raise RuntimeError("grad(): is_grads_batched=True needs a batched Tensor for every output in grad_outputs")
    n = cotangents[0].shape[0]
    rows = [grad(outputs, inputs, [c[k] for c in cotangents], True if k < n - 1 else retain_graph, create_graph,
                 allow_unused=allow_unused, materialize_grads=materialize) for k in range(n)]
    return tuple(None if col[0] is None else _stacked(col) for col in zip(*rows))


def _stacked(parts) -> Tensor:
    """``stack(parts)`` with Tensor methods (this layer sits below the ops' public functions)."""
    out = parts[0].new_zeros((len(parts),) + tuple(parts[0].shape))
    for k, p in enumerate(parts):
        out[k] = p
    return out


def _result(g, t, i: int, create_graph: bool, allow_unused: bool, materialize: bool):
    if g is None:
        if materialize:
            return zeros_like(t)
        if not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in "
                               "the graph. Set allow_unused=True if this is the desired behavior.")
        return None
    return g.detach() if not create_graph and g.requires_grad else g


# ---------------------------------------------------------------- Tensor methods declared here
def _tensor_backward(self: Tensor, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf this tensor depends on."""
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


_tensor_backward.__name__ = _tensor_backward.__qualname__ = "backward"
OPERATORS = {"backward": _tensor_backward}
