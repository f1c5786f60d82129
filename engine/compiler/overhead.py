"""``mode="reduce-overhead"``: a compiled entry's forward and backward captured as graphs and replayed.

``torch.compile``'s name for CUDA graphs; here every device captures (``tapelab.graphs``). Per
guard entry and exact input shapes (a dynamic entry serves several sizes, a graph one), the first
compiled call warms up (kernels loaded, lone ops timed), the next captures the entry's forward into
one graph and its backward (the gradients of the tensor inputs that require grad and of the graph's
parameters) into another, both in one pool, and from then on a call is one op, ``ReplayOp``: its
forward copies the inputs into the graph's static buffers and replays, its vjp copies the gradient
in and replays the backward. As torch's cudagraph trees: parameters and buffers the graph reads are
static (read live, never copied; an optimizer's in-place step is seen), the call's tensor arguments
are copied into buffers the graph owns, a new shape captures again. Unlike torch (whose outputs are
overwritten by the next replay and raise when read afterwards) the output leaves as a copy, and a
gradient leaves uncopied only while no replay can overwrite it (``ReplayOp``), so a kept loss or an
adopted ``.grad`` never changes under the user.

Not replayed, the plain compiled run instead: a call while an earlier replay's backward is still
pending (its saved buffers would be overwritten: ``c(x1) + c(x2)``), a call inside another capture,
an entry whose result is not one tensor or that writes into its tensor arguments, one that is a
single fused kernel each way already (nothing to save, the copies to pay), or one whose capture
failed (the reason is kept in ``Replays.reason``).
"""
from __future__ import annotations

import sys
import time
import weakref

from ..autograd.engine import grad as _autograd_grad
from ..base.dispatch_state import STATE
from ..base.grad_mode import STATE as GRAD, no_grad
from ..core.creation import zeros_like
from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..fx.trace_from_tape import write_state
from ..graphs import CaptureError, Graph, graph, graph_pool_handle
from .fused import FusedCall
from .pool import _Unregistered

__all__ = ["Replays", "WARMUP", "TRIALS"]

WARMUP = 1        # compiled calls per shape before the capture (torch's cudagraph trees warm up once)
TRIALS = 8        # then calls each way, alternating, before the replay is kept or dropped (0: kept)
_clock = time.thread_time


class Replays:
    """One compiled entry's graphs, by exact input shapes (its guard key before dynamic masking).

    A replay is not always faster on cpu: it saves dispatch but copies the result of every op
    without a ``fwd_out`` into its buffer (a GEMM-bound MLP step replayed ~10% slower, a
    dispatch-bound one 1.6x faster). So after the capture the next ``2 * TRIALS`` calls alternate
    between the replay and the compiled call, each timed from its start to the next call's start
    (its backward and whatever the loop does meanwhile included, the same for both), and the
    replay is kept only when its median is the lower; ``notes`` says what was measured."""

    def __init__(self, entry, name: str):
        self.entry, self.name = entry, name
        self.calls: dict = {}        # key -> compiled calls so far (warm-up)
        self.ops: dict = {}          # key -> ReplayOp, or None: measured slower, the compiled call runs
        self.trials: dict = {}       # key -> {True: replayed calls' seconds, False: compiled calls'}
        self.notes: dict = {}        # key -> what the trial measured
        self.timing = None           # (key, replayed, start) of the last trial call
        self.reason: str | None = _unreplayable(entry.graph)

    def __call__(self, key: tuple, flat: tuple):
        if self.timing is not None:
            self._note(_clock())
        run = self.entry.run
        op = self.ops.get(key)
        if op is None:
            if key in self.ops or self.reason is not None or STATE.capturing:
                return run(*flat)
            n = self.calls[key] = self.calls.get(key, 0) + 1
            if n <= WARMUP:
                return run(*flat)
            try:
                op = self.ops[key] = _capture(self.entry, flat, self.name)
            except RuntimeError as e:    # CaptureError, or an op capture refuses: the capture restored state
                self.reason = f"capture failed: {type(e).__name__}: {e}"
                return run(*flat)
            if TRIALS:
                self.trials[key] = {True: [], False: []}
            return op.call(flat) if not op.busy() else run(*flat)     # the capturing call is not timed
        if op.busy() or STATE.capturing:
            return run(*flat)
        trial = self.trials.get(key)
        if trial is None:
            return op.call(flat)
        replay = len(trial[True]) <= len(trial[False])
        self.timing = (key, replay, _clock())
        return op.call(flat) if replay else run(*flat)

    def _note(self, now: float) -> None:
        """The last trial call's time; once both ways have ``TRIALS``, keep or drop the replay."""
        key, replayed, start = self.timing
        self.timing = None
        trial = self.trials.get(key)
        if trial is None:
            return
        trial[replayed].append(now - start)
        if min(len(trial[True]), len(trial[False])) < TRIALS:
            return
        del self.trials[key]
        replay, compiled = (sorted(trial[k])[len(trial[k]) // 2] for k in (True, False))
        self.notes[key] = (f"replayed {replay * 1e6:.0f} us against compiled {compiled * 1e6:.0f} us a call "
                           f"(medians of {TRIALS}, alternating)")
        if replay > compiled:
            self.ops[key] = None


def _unreplayable(gm) -> str | None:
    """Why this entry's graph is not captured, or None."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    for n in calls:
        if n.target is write_state and n.args[0].op == "placeholder":
            return (f"writes into its argument {n.args[0].name}: a replay would write the graph's copy "
                    "(torch skips cudagraphs for mutated inputs too)")
    if len(calls) == 1 and isinstance(calls[0].target, FusedCall) and calls[0].target.op.differentiable:
        # chain16 fwd+bwd: 25 us compiled, 30 us replayed (the copies in and out, the replay's checks)
        return "one fused kernel each way already: a replay would only add the copies in and out"
    return None


def _attr_tensors(gm) -> list:
    """The tensors the graph reads as attributes (parameters, buffers, closed-over tensors), once each."""
    out, seen = [], set()
    for n in gm.graph.nodes:
        if n.op != "get_attr":
            continue
        obj = gm
        for part in n.target.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, Tensor) and id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    return out


def _capture(entry, flat: tuple, name: str) -> "ReplayOp":
    """Capture the entry's forward on static copies of ``flat``'s tensors, then its backward."""
    at = [i for i, a in enumerate(flat) if isinstance(a, Tensor)]
    static = list(flat)
    with no_grad():
        for i in at:
            static[i] = flat[i].detach().clone().requires_grad_(flat[i].requires_grad)
    params = [t for t in _attr_tensors(entry.graph) if t.requires_grad]
    device = flat[at[0]].device if at else (params[0].device if params else "cpu")
    pool = graph_pool_handle()
    fwd = Graph(device)
    with graph(fwd, pool=pool):
        out = entry.run(*static)
    if not isinstance(out, Tensor):
        raise CaptureError(f"the compiled call returns {type(out).__name__}; reduce-overhead replays a call "
                           "returning one Tensor")
    leaves = [static[i] for i in at] + params
    want = [t for t in leaves if t.requires_grad]
    backwards, gout = [], None
    if out.requires_grad and want:
        gout = zeros_like(out)
        for retain in (True, False):     # two backward graphs: the second replays while the first's are held
            bwd = Graph(device)
            with graph(bwd, pool=pool):
                got = iter(_autograd_grad([out], want, grad_outputs=[gout], allow_unused=True, retain_graph=retain))
            backwards.append((bwd, [next(got) if t.requires_grad else None for t in leaves]))
    return ReplayOp(f"replayed({name})", fwd, backwards, [static[i]._data for i in at], params, out, gout)


class ReplayOp:
    """A captured entry as one op: the dispatcher records one node; its vjp replays a backward graph.

    The gradients leave without a copy where that is safe: a gradient array the first backward graph
    allocated at capture (rewritten by each replay, not a constant or a static input) is handed out
    as is while nothing holds what its last replay handed out (``sys.getrefcount`` at its count
    before any hand-out: a ``.grad`` that adopted one, a view of it, hold it). A training loop that
    sets ``.grad`` to None replays it every step; while its arrays are held (``.grad`` accumulating
    across steps) the second graph replays, and its gradients leave as copies, so nothing handed out
    is ever overwritten."""

    def __init__(self, name, fwd, backwards: list, inputs: list, params: list, out, gout):
        self.fwd_graph, self.inputs, self.params = fwd, inputs, tuple(params)
        self.out, self.gout = out._data, gout
        self.backwards = [(bwd, grads, *_handed(bwd, grads)) for bwd, grads in backwards]
        self.op = _Unregistered(name, self._forward, self._vjp if backwards else None, save_output=False)
        self.pending = None         # a weak reference to the last replay's node until its backward ran
        self.counts = None          # each handed-out array's reference count while nobody else holds it

    def busy(self) -> bool:
        """Whether the last replay's backward may still run (its node holds its inputs until then):
        replaying again would overwrite the buffers that backward reads."""
        node = self.pending() if self.pending is not None else None
        return node is not None and node.inputs is not None

    def call(self, flat: tuple):
        tensors = [a for a in flat if isinstance(a, Tensor)]
        res = apply(self.op, *tensors, *self.params)
        node = res.grad_fn
        self.pending = weakref.ref(node) if node is not None else None
        return res

    def _forward(self, xp, *arrays):
        for dst, src in zip(self.inputs, arrays):
            if src is not dst:
                xp.copyto(dst, src)
        self.fwd_graph.replay()
        return self.out.copy()

    def _vjp(self, g, out, *inputs):
        if GRAD.enabled:
            raise RuntimeError(f"{self.op.name} (tapelab.compile mode='reduce-overhead'): a replayed backward has "
                               "no derivative of its own; compile without mode= for create_graph=True")
        d = g._data
        if d is not self.gout._data:
            self.gout._data[...] = d
        bwd, grads, arrays, handed = self.backwards[0]
        if self.counts is None:         # the first backward: nothing handed out yet
            self.counts = [sys.getrefcount(a) for a in arrays]
        if all(sys.getrefcount(a) <= n for a, n in zip(arrays, self.counts)):
            bwd.replay()
            return tuple(None if gi is None else gi.detach() if h else gi.clone() for gi, h in zip(grads, handed))
        bwd, grads, _, _ = self.backwards[1]     # what the first handed out is still held: the second's, copied
        bwd.replay()
        return tuple(None if gi is None else gi.clone() for gi in grads)


def _handed(bwd, grads: list) -> tuple:
    """``(arrays, flags)``: the gradient arrays that may leave uncopied, each its own memory block
    that the backward graph allocated at capture (``static_output``: each replay writes it before
    anything reads it), and for each gradient whether it is one of them."""
    produced = {e["name"] for e in bwd.buffers() if e["kind"] == "static_output"}
    flags = [gi is not None and gi._data.base is None and bwd.buffer_name(gi._data) in produced for gi in grads]
    return [gi._data for gi, f in zip(grads, flags) if f], flags
