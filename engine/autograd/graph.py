"""The autograd graph's node types, by their public path (``torch.autograd.graph``): ``Node``,
``OpNode`` and ``AccumulateGrad`` live in ``core/node.py`` (the dispatcher records them),
``CopySlices`` in ``autograd/views.py``; and the graph-level hooks: ``saved_tensors_hooks``,
``save_on_cpu``, ``allow_mutation_on_saved_tensors``, ``register_multi_grad_hook``."""
from __future__ import annotations

import threading

from ..base.grad_mode import no_grad
from ..core.dispatch import LOCAL, Mode, apply
from ..core.node import AccumulateGrad, Node, OpNode, Packed, pack_order
from ..core.storage import _root
from ..core.tensor import Tensor
from .engine import current_graph_task_id, will_engine_execute_node
from .views import CopySlices

__all__ = ["Node", "OpNode", "AccumulateGrad", "CopySlices", "save_on_cpu", "saved_tensors_hooks",
           "allow_mutation_on_saved_tensors", "register_multi_grad_hook"]


class saved_tensors_hooks(Mode):
    """``torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook)``: inside the block, every
    value an op saves for its backward goes through ``pack_hook`` when the op runs, and the backward
    reads ``unpack_hook(packed)`` instead (offloading, compression, recomputation). A dispatcher mode:
    after each op it hands the node's saved inputs (and saved output) to ``pack_hook``; the node
    unpacks them when its backward first needs them (``OpNode._restored``). The innermost block's
    hooks apply. Not packed: values a custom ``Function`` saves with ``ctx.save_for_backward``."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def dispatch(self, op, args: tuple, params: dict):
        modes = LOCAL.modes
        stack = list(modes)
        # the op goes to the modes below, except outer hooks: the innermost block's hooks apply
        modes[:] = [m for m in stack if not isinstance(m, saved_tensors_hooks)]
        try:
            out = apply(op, *args, **params)
            res = out[0] if isinstance(out, tuple) else out
            node = res.grad_fn if isinstance(res, Tensor) else None
            if node is not None and node.plain and node.versions and node.inputs is not None:
                saved = {i for i, _ in node.versions}
                pack = self.pack_hook
                items = list(node.inputs)
                for i in pack_order(node.op, len(items)):
                    if i in saved and isinstance(items[i], Tensor):
                        items[i] = Packed(pack(items[i]))
                output = Packed(pack(node._output())) if -1 in saved else None
                node._packed = (tuple(items), output, self.unpack_hook)
                node.inputs = None
                if output is not None:
                    node.out_data = None
            return out
        finally:
            modes[:] = stack


def _to_host(t: Tensor) -> tuple:
    return t.device, (t if t.device.type == "cpu" else t.to("cpu"))


def _back(packed: tuple) -> Tensor:
    device, t = packed
    return t if t.device == device else t.to(device)


class save_on_cpu(saved_tensors_hooks):
    """``torch.autograd.graph.save_on_cpu``: tensors saved for backward inside the block are kept in
    host memory and copied back to their device for backward (``saved_tensors_hooks`` with a move
    each way; cpu tensors stay as they are). ``pin_memory`` has no meaning without pinned host memory."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        super().__init__(_to_host, _back)


class _Saved:
    """A value an op saved inside ``allow_mutation_on_saved_tensors``: the tensor, or the copy of its
    old value taken when an in-place op was about to overwrite it."""

    __slots__ = ("tensor", "copy")

    def __init__(self, tensor: Tensor):
        self.tensor, self.copy = tensor, None


class allow_mutation_on_saved_tensors(saved_tensors_hooks):
    """``torch.autograd.graph.allow_mutation_on_saved_tensors()``: inside the block, an in-place op on a
    tensor that some recorded op saved for its backward is allowed: the saved value is copied just
    before the write (the ``write`` hook) and the backward reads the copy, instead of refusing with a
    version-counter error. The copy is made only for values that are overwritten. Backward must run
    inside the block, as in PyTorch."""

    def __init__(self):
        super().__init__(self._pack, self._unpack)
        self._pending: dict = {}   # id of a memory block -> the saved values in it not yet copied
        self._open = True

    def _pack(self, t: Tensor) -> _Saved:
        saved = _Saved(t)
        self._pending.setdefault(id(_root(t._data)), []).append(saved)
        return saved

    def _unpack(self, saved: _Saved) -> Tensor:
        if not self._open:
            raise AssertionError("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
                                 "in which the graph was originally recorded.")
        return saved.tensor if saved.copy is None else saved.copy

    def write(self, target, src) -> None:
        for saved in self._pending.pop(id(_root(target)), ()):
            with no_grad():
                saved.copy = saved.tensor.detach().clone()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self._open = False
        self._pending.clear()


class _MultiHandle:
    """What ``register_multi_grad_hook`` returns: ``remove()`` removes the hook from every tensor."""

    def __init__(self, handles: tuple):
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self) -> "_MultiHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode: str = "all") -> _MultiHandle:
    """``torch.autograd.graph.register_multi_grad_hook``: ``mode="all"`` calls ``fn(grads)`` (one entry
    per tensor, None for those the pass does not reach) once every hooked tensor the backward pass
    will reach has its gradient; ``mode="any"`` calls ``fn(grad)`` with the first of them computed in
    each pass (tensors that need no gradient are skipped; "all" refuses them, as PyTorch's). A pass
    is told by its id and asked which of the tensors' nodes it will run, as PyTorch's engine is."""
    modes = ("all", "any")
    if mode not in modes:
        raise ValueError(f"Expects mode to be one of {modes} but got {mode}")
    live = [(i, t) for i, t in enumerate(tensors) if t.requires_grad]
    if mode == "all" and len(live) < len(tensors):
        raise AssertionError("Expected gradient function to be set")   # PyTorch's, for a tensor without grad
    nodes = [t.grad_fn if t.grad_fn is not None else t._accumulator() for _, t in live]
    lock = threading.Lock()
    passes: dict = {}   # the pass's id -> [grads, count, expected] ("all") or True ("any"): one pass at a time

    def hook_for(i):
        def hook(grad):
            task = current_graph_task_id()
            with lock:
                if mode == "any":
                    if task in passes:
                        return
                    passes.clear()
                    passes[task] = True
                else:
                    state = passes.get(task)
                    if state is None:
                        passes.clear()   # a pass that never reached all of its tensors: dropped, as PyTorch's
                        state = passes[task] = [[None] * len(tensors), 0,
                                                sum(will_engine_execute_node(n) for n in nodes)]
                    state[0][i] = grad
                    state[1] += 1
                    if state[1] < state[2]:
                        return
                    del passes[task]
                    grad = state[0]
            fn(grad)
        return hook

    return _MultiHandle(tuple(t.register_hook(hook_for(i)) for i, t in live))
