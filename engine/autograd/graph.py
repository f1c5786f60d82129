"""The autograd graph's node types, by their public path (``torch.autograd.graph``): ``Node``,
``OpNode`` and ``AccumulateGrad`` live in ``core/node.py`` (the dispatcher records them),
``CopySlices`` in ``autograd/views.py``."""
from __future__ import annotations

from ..core.dispatch import LOCAL, Mode, apply
from ..core.node import AccumulateGrad, Node, OpNode, Packed
from ..core.tensor import Tensor
from .views import CopySlices

__all__ = ["Node", "OpNode", "AccumulateGrad", "CopySlices", "save_on_cpu", "saved_tensors_hooks"]


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
            if type(node) is OpNode and node.versions and node.inputs is not None:
                saved = {i for i, _ in node.versions}
                pack = self.pack_hook
                items = tuple(Packed(pack(a)) if i in saved and isinstance(a, Tensor) else a
                              for i, a in enumerate(node.inputs))
                output = Packed(pack(node._output().detach())) if -1 in saved else None
                node._packed = (items, output, self.unpack_hook)
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
