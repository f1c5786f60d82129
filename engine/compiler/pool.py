"""ReLU followed by a 2x2 max-pool, as one op with a one-pass forward and a one-pass backward.

Eager runs ``relu`` (a pass over the image), ``max_pool_blocks`` (four strided passes), and in
the backward the pool's scatter and ``threshold_backward`` (two more passes, and a zero-filled
temporary). ``max(relu(a), relu(b), ...) = relu(max(a, b, ...))``, so one loop reads each window
once and writes the pooled value and the index of the window's first maximum, and the backward
writes each input element once: that maximum takes the gradient when the output is positive (or
NaN), as eager's two backward ops give it. Under a ``Mode`` (capture, a tracer) the forward keeps
no index and the backward searches each window again. The bench's CNN step has two of these (``bench/README.md``, issue 18
session 7). The op is not registered (it exists only in compiled graphs); its backward has no
derivative of its own (``create_graph=True`` through it raises, naming it).
"""
from __future__ import annotations

import importlib
import weakref

import numpy as np

from ..base.meta import has_data
from ..core.dispatch import STATE, apply
from ..core.registry import ALL, Op
from ..fx.passes.fusion import op_name
from ..kernels import parallel
from . import cpu

__all__ = ["RELU_MAX_POOL", "fuse_relu_pool"]


def _loops():
    return importlib.import_module(f"{__package__}._pool_loops")


def _images(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, *a.shape[-2:])


# id(output array) -> the forward's window indices, while that array lives: the vjp gets only the
# op's output, and scattering by index is one vectorised pass where searching each window again
# is a branchy one (32x16x28x28: 0.28 against 1.9 ms, the index costing the forward 0.4 ms). The
# indices are float32, the data's lane width: as uint8 neither loop vectorised (1.8 + 1.2 ms)
_ARGMAX: dict = {}


def _fwd(xp, x):
    n, c, h, w = x.shape
    y = xp.empty((n, c, h // 2, w // 2), x.dtype)
    if has_data(xp):
        x = _images(np.ascontiguousarray(x))
        if STATE.modes:             # capture or a tracer: a replay must not read a stale index
            parallel(_loops().relu_max_pool, 2, x, _images(y))
        else:
            k = np.empty(y.shape, np.float32)
            parallel(_loops().relu_max_pool_argmax, 3, x, _images(y), _images(k))
            _ARGMAX[id(y)] = k
            weakref.finalize(y, _ARGMAX.pop, id(y), None)
    return y


def _bwd_fwd(xp, g, x, y):
    gx = xp.empty(x.shape, g.dtype)
    if has_data(xp):
        parallel(_loops().relu_max_pool_backward, 4, *(_images(np.ascontiguousarray(a)) for a in (g, x, y)),
                 _images(gx))
    return gx


def _bwd_at_fwd(xp, g, x, *, at):
    gx = xp.empty(x.shape, g.dtype)
    parallel(_loops().relu_max_pool_backward_at, 3, _images(np.ascontiguousarray(g)), _images(at), _images(gx))
    return gx


def _vjp(g, out, x):
    at = _ARGMAX.get(id(out._data))
    if at is not None and at.shape == tuple(out.shape) and not STATE.modes and type(g._data) is np.ndarray:
        return (apply(_BACKWARD_AT, g, x, at=at),)
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
_BACKWARD_AT = _Unregistered("relu_max_pool2d_backward", _bwd_at_fwd, _no_vjp, save_output=False)


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
