"""ReLU followed by a 2x2 max-pool, as one op with a one-pass forward and a one-pass backward.

Eager runs ``relu`` (a pass over the image), ``max_pool_blocks`` (one pass), and in the backward
the pool's scatter and ``threshold_backward`` (two more passes). ``max(relu(a), relu(b), ...) =
relu(max(a, b, ...))``, so eager's 2x2 vector loops (``kernels/pool.py`` ``max2x2`` and
``max2x2_put`` with ``relu``) read each window once and write the pooled value, and in the backward
write each input element once: the window's first maximum takes the gradient when the output is
positive (or NaN), as eager's two backward ops give it. The bench's CNN step has two of these
(``bench/README.md``, issue 18 sessions 7 and 32). The op is not registered (it exists only in
compiled graphs); its backward has no derivative of its own (``create_graph=True`` through it
raises, naming it).
"""
from __future__ import annotations

import numpy as np

from ..base.meta import has_data
from ..core.dispatch import apply
from ..core.registry import ALL, Op
from ..fx.passes.fusion import op_name
from ..kernels import loops, parallel
from . import cpu

__all__ = ["RELU_MAX_POOL", "fuse_relu_pool"]


def _fwd(xp, x):
    n, c, h, w = x.shape
    y = xp.empty((n, c, h // 2, w // 2), x.dtype)
    if has_data(xp):
        parallel(loops("pool").max2x2, 2, y, np.ascontiguousarray(x), True)
    return y


def _bwd_fwd(xp, g, x, y):
    gx = xp.empty(x.shape, g.dtype)
    if has_data(xp):
        x, y, g = (np.ascontiguousarray(a) for a in (x, y, g))
        parallel(loops("pool").max2x2_put, 4, x, y, gx, g, True)
    return gx


def _vjp(g, out, x):
    return (apply(_BACKWARD, g, x, out),)


def _no_vjp(*args, **params):
    raise RuntimeError("relu_max_pool2d_backward (tapelab.compile's fused ReLU and 2x2 max-pool) has no "
                       "derivative: compile with options={'fuse': False} for double backward")


class _Unregistered(Op):
    """An ``Op`` outside the registry (as ``fused.FusedOp``): it exists only in compiled graphs."""

    def __init__(self, name: str, fwd, vjp, *, save_output: bool):
        for slot in Op.__slots__:
            setattr(self, slot, None)
        self.name, self.fwd, self.vjp = name, fwd, vjp
        self.saves, self.save_output, self.elementwise, self.n_extra = ALL, save_output, False, 0
        self.is_view, self.kind, self.aliases, self.inplace, self.complex = False, "compute", (), (), False
        self.backward_name = "".join(p.capitalize() for p in name.split("_")) + "Backward0"


RELU_MAX_POOL = _Unregistered("relu_max_pool2d", _fwd, _vjp, save_output=True)
_BACKWARD = _Unregistered("relu_max_pool2d_backward", _bwd_fwd, _no_vjp, save_output=False)


class _Call:
    """The FX target that applies ``RELU_MAX_POOL``."""

    __name__ = "relu_max_pool2d"

    def __call__(self, x):
        return apply(RELU_MAX_POOL, x)

    def __repr__(self) -> str:
        return "relu_max_pool2d"


def fuse_relu_pool(gm) -> int:
    """Replace each ``max_pool_blocks(relu(x), kernel=(2, 2))`` whose relu has no other user, on a
    C-contiguous float32 4-D ``x`` with even sides, by one ``relu_max_pool2d``; returns how many.
    Needs ``tensor_meta`` (a shape propagation) and numba."""
    if not cpu.numba_available():
        return 0
    count = 0
    for pool in list(gm.graph.nodes):
        if pool.op != "call_function" or op_name(pool) != "max_pool_blocks" or pool.kwargs.get("kernel") != (2, 2):
            continue
        relu = pool.args[0]
        if getattr(relu, "op", None) != "call_function" or op_name(relu) != "relu" or len(relu.users) != 1:
            continue
        meta = relu.meta.get("tensor_meta")
        if (meta is None or type(meta) is tuple or meta.dtype.name != "float32" or len(meta.shape) != 4
                or meta.shape[2] % 2 or meta.shape[3] % 2 or not _contiguous(meta)):
            continue
        with gm.graph.inserting_before(pool):
            fused = gm.graph.call_function(_Call(), (relu.args[0],))
        fused.meta.update(pool.meta)
        pool.replace_all_uses_with(fused)
        gm.graph.erase_node(pool)
        gm.graph.erase_node(relu)
        count += 1
    if count:
        gm.recompile()
    return count


def _contiguous(meta) -> bool:
    shape, stride = tuple(meta.shape), tuple(meta.stride)
    want, expected = 1, []
    for n in reversed(shape):
        expected.append(want)
        want *= n
    return stride == tuple(reversed(expected))
