"""Utilities (torch.utils)."""
from __future__ import annotations

import copyreg
import weakref

from . import checkpoint, data, deterministic, dlpack, hooks, weak  # noqa: F401  (torch.utils.checkpoint, .hooks work after `import tapelab`)

__all__ = ["swap_tensors"]


def swap_tensors(t1, t2) -> None:
    """``torch.utils.swap_tensors``: ``t1`` and ``t2`` exchange their contents (class, ``__dict__``, every slot:
    values, autograd state, version counter) while each keeps its identity, so references held elsewhere (an
    optimizer's) see the new content. A leaf's gradient accumulator stays with the old content: one a graph
    already reaches raises if a backward runs it, as PyTorch's poisoned node does."""
    for name, t in (("t1", t1), ("t2", t2)):
        accum = getattr(t, "_accum", None)
        if [r for r in weakref.getweakrefs(t) if accum is None or r is not accum._variable]:
            raise RuntimeError(f"Cannot swap {name} because it has weakref associated with it")
    slots = set(copyreg._slotnames(type(t1)))
    if slots != set(copyreg._slotnames(type(t2))):
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    for t in (t1, t2):
        accum = getattr(t, "_accum", None)
        if accum is not None:
            accum.register_prehook(_poisoned)
            del t._accum
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__
    d1, d2 = dict(t1.__dict__), dict(t2.__dict__)
    t1.__dict__.clear(), t2.__dict__.clear()
    t1.__dict__.update(d2), t2.__dict__.update(d1)
    for slot in slots - {"_accum"}:
        v1, v2 = getattr(t1, slot, _MISSING), getattr(t2, slot, _MISSING)
        for t, v in ((t1, v2), (t2, v1)):
            if v is _MISSING:
                if hasattr(t, slot):
                    delattr(t, slot)
            else:
                setattr(t, slot, v)


_MISSING = object()


def _poisoned(grad_outputs):
    raise RuntimeError("Trying to execute AccumulateGrad node that was poisoned by swap_tensors this can happen when "
                       "you try to run backward on a tensor that was swapped. For a module m with "
                       "`torch.__future__.set_swap_module_params_on_conversion(True)` you should not change the device "
                       "or dtype of the module (e.g. `m.cpu()` or `m.half()`) between running forward and backward. To "
                       "resolve this, please only change the device/dtype before running forward (or after both "
                       "forward and backward).")
