"""Activation checkpointing: keep a segment's inputs, recompute its insides during backward.

``checkpoint(fn, *args)`` runs ``fn`` once, keeps only the outputs and the edges by which
the segment's graph leaves it (its inputs, and any tensor ``fn`` reads from a closure,
such as a module's parameters), and drops everything recorded inside, so the segment's
intermediates are freed as soon as it returns. In backward, a ``CheckpointBackward``
node re-runs ``fn`` (with the forward's random state) and back-propagates through the
fresh graph only as far as those boundary edges; the caller's walk carries on from
there. The recomputation runs under the autocast state the forward ran under (as PyTorch's:
backward itself runs outside the user's ``autocast`` region), so a bfloat16 segment recomputes
in bfloat16. Gradients equal those of the plain computation, double backward included.
"""
from __future__ import annotations

import contextlib
from contextlib import ExitStack
from typing import Callable

from ..amp.autocast_mode import DEVICE_TYPES, autocast, get_autocast_dtype, is_autocast_cache_enabled, \
    is_autocast_enabled
from ..autograd.engine import _drain, backward_steps
from ..base.grad_mode import STATE as GRAD, enable_grad
from ..core.node import FREED_MSG, AccumulateGrad, Node, _seq
from ..core.random import get_rng_state, set_rng_state
from ..core.tensor import Tensor
from ._checkpoint_policy import CheckpointPolicy, SelectiveCheckpointContext, create_selective_checkpoint_contexts
from ._pytree import tree_leaves

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointBackward", "get_device_states", "set_device_states",
           "CheckpointPolicy", "SelectiveCheckpointContext", "create_selective_checkpoint_contexts", "noop_context_fn",
           "detach_variable"]


def noop_context_fn() -> tuple:
    """``checkpoint``'s default ``context_fn``: no context around the forward or the recompute."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn: Callable = noop_context_fn,
               determinism_check: str = "default", debug: bool = False, early_stop: bool = True,
               preserve_rng_state: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` without keeping its intermediates for backward.

    Both ``use_reentrant`` settings use the same (non-reentrant) mechanism here; as in
    PyTorch, the reentrant form takes no keyword arguments for ``function`` and no ``context_fn``.
    ``context_fn()`` gives the two contexts the forward and the recompute run in (selective
    checkpointing's, ``create_selective_checkpoint_contexts``).
    """
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant and (context_fn is not noop_context_fn or debug):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if not GRAD.enabled:
        return function(*args, **kwargs)
    state = get_rng_state() if preserve_rng_state else None
    forward_context, recompute_context = context_fn()
    start = next(_seq)  # every node created by ``function`` has a larger seq
    with forward_context:
        output = function(*args, **kwargs)
    outputs = output if isinstance(output, tuple) else (output,)
    boundary = _boundary(outputs, start)
    if not boundary:
        return output
    node = CheckpointBackward(function, args, kwargs, state, boundary, len(outputs), _autocast_state(),
                              recompute_context)
    # bookkeeping: the segment's values, re-labelled as outputs of the node that recomputes them
    wrapped = tuple(Tensor._wrap(o._data, True, node, i, [0], o._device)
                    if isinstance(o, Tensor) and o.requires_grad else o for i, o in enumerate(outputs))
    return wrapped if isinstance(output, tuple) else wrapped[0]


def detach_variable(inputs: tuple) -> tuple:
    """Each tensor of ``inputs`` detached, keeping its ``requires_grad`` (a hand-written checkpoint's fresh
    leaves: fairscale's and Megatron's model-parallel checkpointing)."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    return tuple(x.detach().requires_grad_(x.requires_grad) if isinstance(x, Tensor) else x for x in inputs)


def get_device_states(*args) -> tuple[list, list]:
    """The accelerator device of each tensor in ``args`` (nested containers too) and the random state it
    draws from, as PyTorch's: reversible layers (reformer_pytorch) record them to replay a forward with
    the same dropout. A cpu-only call gets two empty lists; a cuda tensor draws from the host generator
    here, so each state is that generator's."""
    devices = [t.get_device() for t in tree_leaves(args)
               if isinstance(t, Tensor) and t.device.type not in ("cpu", "meta")]
    return devices, [get_rng_state() for _ in devices]


def set_device_states(devices, states, *, device_type: str | None = None) -> None:
    """Restore the states ``get_device_states`` returned, one per device."""
    for _, state in zip(devices, states):
        set_rng_state(state)


def _autocast_state() -> tuple:
    """Each device type's autocast settings now, as ``autocast`` arguments: ``(device, dtype, enabled, cache)``."""
    cache = is_autocast_cache_enabled()
    return tuple((d, get_autocast_dtype(d), is_autocast_enabled(d), cache) for d in DEVICE_TYPES)


def _internal(node, start: int) -> bool:
    return type(node) is not AccumulateGrad and node.seq > start


def _boundary(outputs: tuple, start: int) -> tuple:
    """The distinct ``(node, output_nr)`` edges by which the graph recorded since ``start`` leaves it."""
    edges, seen, stack = [], set(), []
    for o in outputs:
        if isinstance(o, Tensor) and o.requires_grad:
            stack.append((o.grad_fn if o.grad_fn is not None else o._accumulator(), o._out_nr))
    visited = set()
    while stack:
        edge = stack.pop()
        node = edge[0]
        if _internal(node, start):
            if node not in visited:
                visited.add(node)
                stack.extend(e for e in node.edges if e is not None)
        elif edge not in seen:
            seen.add(edge)
            edges.append(edge)
    return tuple(edges)


class CheckpointBackward(Node):
    """Recomputes a checkpointed segment and back-propagates through it to its boundary edges."""

    __slots__ = ("fn", "args", "kwargs", "rng_state", "n_outputs", "autocast_state", "context")

    def __init__(self, fn, args, kwargs, rng_state, edges: tuple, n_outputs: int, autocast_state: tuple,
                 context=None):
        self.fn, self.args, self.kwargs, self.rng_state = fn, args, kwargs, rng_state
        self.autocast_state, self.context = autocast_state, context
        self.edges, self.n_outputs = edges, n_outputs
        self.seq = next(_seq)
        self.pre_hooks = self.hooks = self._metadata = None

    @property
    def saved_tensors(self) -> tuple:
        if self.fn is None:
            raise RuntimeError(FREED_MSG)
        return tuple(a for a in self.args if isinstance(a, Tensor))

    def run(self, grads) -> tuple:
        if self.fn is None:
            raise RuntimeError(f"{FREED_MSG} (The checkpointed segment of {self.name()} was already "
                               "recomputed and freed by an earlier backward.)")
        outputs = self._recompute()
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if g is not None and isinstance(o, Tensor) and o.requires_grad]
        capture = dict.fromkeys(self.edges)
        if pairs:
            _drain(backward_steps([o for o, _ in pairs], [g for _, g in pairs], None, GRAD.enabled,
                                  _capture=capture, _stop=True))
        return tuple(capture[e] for e in self.edges)

    def _recompute(self) -> tuple:
        saved = None
        if self.rng_state is not None:
            saved = get_rng_state()
            set_rng_state(self.rng_state)
        try:
            with enable_grad(), ExitStack() as regions:
                for device, dtype, enabled, cache in self.autocast_state:
                    regions.enter_context(autocast(device, dtype, enabled, cache))
                if self.context is not None:
                    regions.enter_context(self.context)
                out = self.fn(*self.args, **self.kwargs)
        finally:
            if saved is not None:
                set_rng_state(saved)
        return out if isinstance(out, tuple) else (out,)

    def release(self) -> None:
        self.fn = self.args = self.kwargs = self.context = None


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs):
    """Split a sequence of modules/functions into ``segments`` checkpointed chunks (the last runs plainly)."""
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = max(len(functions) // segments, 1)

    def run(chunk):
        def forward(x):
            for f in chunk:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(functions[start:end + 1]), input, use_reentrant=use_reentrant, **kwargs)
    return run(functions[end + 1:])(input)
