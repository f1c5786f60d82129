"""The capture mode: records a straight-line program while the captured ops run eagerly.

While a ``Graph`` captures, this ``Mode`` sits on top of the dispatcher's mode stack and
receives every op. Each op runs through ``dispatch.eager`` (so autograd, hooks and
optimizer code behave as usual) with a forward that also notes the arrays it read, and
is appended to the program as one step that reads *arrays*, never Tensors:

- intermediates are the outputs of captured ops (and the copies in-place ops make for
  autograd): allocated once, here, and owned by the graph's pool until ``reset()``; each
  replay overwrites them (``out=`` or ``copyto``);
- constants are the outputs of factories (``zeros``, ``ones_like``, the backward seed) and
  bare arrays the engine hands a forward (an index list): their value depends on no input,
  so they are read by reference and no step recomputes them; one that is written in place
  gets its initial value back at the start of every replay (a CUDA graph re-runs the fill
  kernel);
- every other array a Tensor brings in existed before capture began (parameters,
  optimizer state, the user's static inputs): static, read and written in place by
  reference, never copied. Since every tensor is born in the dispatcher, which this mode
  sees, no heap scan is needed to tell them apart.

In-place writes and gradient accumulation arrive through ``write``. Capture must not
change state (a CUDA graph only records), so the first write to a static array snapshots
it and ``restore`` puts every snapshot back.
"""
from __future__ import annotations

import os
import sys
import weakref

from ..base.meta import has_data
from ..base.simarray import SimArray
from ..base.grad_mode import STATE as GRAD
from ..core.dispatch import STATE, Mode, eager
from ..optim.optimizer import live_optimizers
from ..core.tensor import Tensor

_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# frames that only relay a request (the mode, the dispatcher, Tensor's own methods)
_RELAY = (os.path.join(_ENGINE_DIR, "graphs") + os.sep, os.path.join(_ENGINE_DIR, "core", "dispatch.py"),
          os.path.join(_ENGINE_DIR, "core", "tensor.py"))


class CaptureError(RuntimeError):
    """Something a captured graph could not replay faithfully (raised during capture or replay)."""


def _user_frame():
    """``(file, line, text)`` of the innermost frame outside tapelab (the user's line)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_ENGINE_DIR):
        f = f.f_back
    if f is None:
        return ("<unknown>", 0, "")
    import linecache
    return (f.f_code.co_filename, f.f_lineno, linecache.getline(f.f_code.co_filename, f.f_lineno).strip())


def _where(frame=None) -> str:
    file, line, text = frame or _user_frame()
    return f"{file}:{line}" + (f" ({text})" if text else "")


def _requester():
    """The first frame that is neither the capture machinery nor a Tensor method: who asked."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_RELAY):
        f = f.f_back
    return f


def _drawn_by(op) -> str:
    """The random op as the user met it: its name, and the engine function that drew through
    it when that function has another name (``bernoulli (dropout)``)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_ENGINE_DIR):
        name = f.f_code.co_name
        if not f.f_code.co_filename.startswith(_RELAY) and not name.startswith(("_", "<", op.name)):
            return f"{op.name} ({name})"
        f = f.f_back
    return op.name


def _np_root(a):
    b = a.base
    while b is not None and hasattr(b, "shape"):
        a, b = b, b.base
    return a


# The simulated cuda device wraps numpy arrays in SimArrays and hands out a new wrapper for every
# ``.base``; during a capture the root of a SimArray is one wrapper per numpy root, kept here
# (cleared when the capture ends: the graph then holds the wrappers it uses).
_SIM_ROOTS: dict = {}


def _root(a):
    """The array that owns ``a``'s memory (numpy and cupy keep ``.base`` pointing at it)."""
    if type(a) is SimArray:
        n = _np_root(a._a)
        hit = _SIM_ROOTS.get(id(n))
        if hit is None:
            hit = _SIM_ROOTS[id(n)] = (n, a if a._a is n else SimArray(n))
        return hit[1]
    return _np_root(a)


def root_key(a) -> int:
    """A stable identity of the memory ``a`` views, valid while that memory lives (any device)."""
    return id(_np_root(a._a)) if type(a) is SimArray else id(_np_root(a))


def _is_array(a) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "base")


def _label(a) -> str:
    return f"{a.dtype.name}{list(a.shape)}"


class _Buf:
    __slots__ = ("arr", "kind", "where", "name")

    def __init__(self, arr, kind: str, where: str = "", name: str = ""):
        self.arr, self.kind, self.where, self.name = arr, kind, where, name


class CaptureMode(Mode):
    """The dispatcher mode of one capture (see the module docstring)."""

    whole_compiled_steps = True     # a compiled call replays as its generated forward and backward
    kept_forwards = True            # norms' statistics and attention's weights replay as kept, as eager keeps them

    def __init__(self, graph, names: dict | None = None):
        self.graph = graph
        self.bufs: dict[int, _Buf] = {}       # id(array) -> what it is; holds the arrays alive
        self.steps: list[tuple] = []            # ("op", op, fwd, ins, params, outs, where) | ("copy", dst, src, why)
        self.scopes: dict[int, str] = {}        # step index -> the module path it ran in (when in one)
        self.guards = 0
        self.nodeless: set[int] = set()         # indices of op steps whose outputs no autograd node holds
        self.reinit: dict[int, tuple] = {}      # id(root) -> (root, initial value) for written constants
        self.saved: dict[int, tuple] = {}       # id(root) -> (root, pre-capture value) for written statics
        self.statics: dict[int, tuple] = {}     # id(tensor) -> (tensor, array, label) read as static inputs
        self.names = names or {}                # id(tensor) -> a name for errors (make_graphed_callables)
        self.outputs: list[tuple] = []          # (weakref to a Tensor the region made, root key of its buffer)
        # an optimizer's Python-number state (a step count) advanced during capture would be
        # frozen into the replay: snapshot it now, compare at the end
        self.optimizers = [(opt, _numbers(opt)) for opt in live_optimizers()]

    def _scope(self) -> None:
        """Note the module path (``encoder.layers.0.linear1``) the next step runs in, for views."""
        path = STATE.module_path
        if path and path[-1]:
            self.scopes[len(self.steps)] = path[-1]

    # ------------------------------------------------------------ classification
    def _known(self, arr, t: Tensor | None = None, fresh: str = "static") -> _Buf:
        """What ``arr`` is; an array whose memory this capture has not seen is ``fresh``."""
        b = self.bufs.get(id(arr))
        if b is None:
            r = _root(arr)
            rb = self.bufs.get(id(r))
            kind = rb.kind if rb is not None else fresh
            if rb is None and r is not arr:
                self.bufs[id(r)] = _Buf(r, kind)
            b = self.bufs[id(arr)] = _Buf(arr, kind, _where())
        if t is not None and b.kind == "static" and id(t) not in self.statics:
            name = self.names.get(id(t)) or f"a static input {_label(arr)} first read at {b.where}"
            self.statics[id(t)] = (t, t._data, t._device, name)
        return b

    def _new(self, arr, kind: str, where: str) -> None:
        """``arr`` (and the memory it views) was made during capture: an intermediate or a constant."""
        self.bufs[id(arr)] = _Buf(arr, kind, where)
        r = _root(arr)
        if r is not arr and id(r) not in self.bufs:
            self.bufs[id(r)] = _Buf(r, kind, where)

    # ------------------------------------------------------------ the Mode hooks
    def dispatch(self, op, args, params):
        if op.kind == "random":
            self.fail(f"{_drawn_by(op)}() draws random numbers outside the graph: every replay would reuse the "
                      f"numbers drawn at capture. tapelab has no graph-safe generator yet; draw the noise before "
                      f"replay() into a static tensor (noise.copy_(...)), or capture in eval() mode (no dropout)")
        if op.kind == "factory":
            out = eager(op, args, params)
            where = _where()
            for o in out if isinstance(out, tuple) else (out,):
                self._new(o._data, "const", where)
            return out
        self._reject_data_dependent(op, args, params)
        calls = []
        fwd = op.fwd

        def spy(xp, *arrays, **kw):
            r = fwd(xp, *arrays, **kw)
            calls.append((xp, arrays, r))
            return r
        out = eager(op, args, params, fwd=spy)
        xp, arrays, r = calls[-1]
        where = _where()
        for a in args:
            if isinstance(a, Tensor):
                self._known(a._data, a)
        roots = set()
        for a in arrays:
            if _is_array(a):
                self._known(a, fresh="const")   # not a Tensor's: an array the engine made for this op
                roots.add(id(_root(a)))
        outs = out if isinstance(out, tuple) else (out,)
        dsts = []
        for o in outs:
            d = o._data
            if id(_root(d)) in roots or id(d) in self.bufs:
                b = self._known(d)       # a view (or the input itself): follows its base, no step
                dsts.append(None)
            else:
                self._new(d, "inter", where)
                b = self.bufs[id(d)]
                dsts.append(d)
            if b.kind == "inter":        # a static output if the user still holds it at the end
                self.outputs.append((weakref.ref(o), root_key(d)))
        if any(d is not None for d in dsts):
            ufunc = None
            if op.out_form and not params and len(dsts) == 1:
                ufunc = getattr(xp, op.out_form)
                if not _exact(ufunc, arrays, dsts[0], xp):
                    ufunc = None
            self._scope()
            self.steps.append(("op", op, fwd, xp, arrays, params, tuple(dsts), r, ufunc, where))
            if all(getattr(o, "grad_fn", None) is None for o in outs):
                self.nodeless.add(len(self.steps) - 1)
        return out

    def _reject_data_dependent(self, op, args, params):
        what = op.data_dependent
        if what is None and op.name in ("index", "index_put"):
            # indexing is data dependent only with a boolean mask, which only the arguments tell
            idx = args[1:] if op.name == "index" else args[2:]
            if any(isinstance(i, Tensor) and i._data.dtype.kind == "b" for i in idx):
                if op.name == "index":
                    what = "boolean-mask indexing (x[mask], masked_select)"
                elif isinstance(args[1], Tensor) and args[1]._data.ndim:
                    what = "boolean-mask assignment of a tensor (x[mask] = values)"
        if what is not None:
            self.fail(f"{what} has a data-dependent output shape, which a captured graph cannot replay "
                      f"(op {op.name}). Use a fixed-shape form instead (torch.where, masked_fill, "
                      f"multiplication by the mask)")

    def write(self, target, src) -> None:
        """``target[...] = src`` is about to happen (an in-place op or a gradient accumulation)."""
        b = self._known(target)
        if b.kind == "static":
            r = _root(target)
            if id(r) not in self.saved:
                self.saved[id(r)] = (r, r.copy())
        elif b.kind == "const":
            r = _root(target)
            if id(r) not in self.reinit:
                self.reinit[id(r)] = (r, r.copy())
        last = self.steps[-1] if self.steps else None
        if ((not GRAD.enabled or len(self.steps) - 1 in self.nodeless) and last is not None and last[0] == "op"
                and len(last[6]) == 1 and last[6][0] is src and src.dtype == target.dtype
                and src.shape == target.shape):
            # the op computed only to be written here, and no autograd node kept its result (grad is
            # off, or nothing it read requires grad: ``zero_grad(set_to_none=False)``'s fills): replay
            # writes straight into the target (ufuncs allow in/out overlap)
            self.steps[-1] = last[:6] + ((target,),) + last[7:]
            self.bufs.pop(id(src), None)
            self.bufs.pop(id(_root(src)), None)
            return
        self._known(src)
        self._scope()
        self.steps.append(("copy", target, src, "write"))

    def copy(self, src, copy) -> None:
        """``copy`` was just made from ``src`` outside the dispatcher (the value an in-place op's
        autograd node must see): replay refreshes it."""
        self._known(src)
        self._new(copy, "inter", _where())
        self._scope()
        self.steps.append(("copy", copy, src, "snapshot"))

    def accumulate(self, var, grad) -> bool:
        """Yes: an accumulation into an existing ``.grad`` is work the replay must redo, so it
        comes through the dispatcher (an ``add_`` this mode records)."""
        return True

    def compiling(self, name: str) -> None:
        """A compiled function's first call under these guards: its trace runs under the tracer and its
        lowering on meta tensors, so the capture would record shape work, not the call (a replay read
        read-only meta arrays, or kept stale values). As CUDA graphs want warm-up iterations: refused."""
        self.fail(f"tapelab.compile: {name} compiles on this call (its first under these guards: grad mode, "
                  f"shapes, dtypes); a capture records compiled code, not a compile: call it once with the same "
                  f"inputs and grad mode before capturing (a warm-up)")

    def host_read(self, tensor, what: str) -> None:
        """A value copied to the host during capture. From user code it is an error; from inside
        tapelab (a bounds check, a tensor hyper-parameter) an ``item``/``tolist``/``bool`` value
        is fixed into the program and checked by a guard on every replay."""
        f = _requester()
        if f is not None and f.f_code.co_filename.startswith(_ENGINE_DIR) and what in ("item", "bool", "tolist"):
            what = "tolist" if what == "tolist" else "item"
            arr = tensor._data
            self._known(arr, tensor)
            value = arr.reshape(()).item() if what == "item" else arr.tolist()
            internal = f"{os.path.relpath(f.f_code.co_filename, _ENGINE_DIR)}:{f.f_lineno} ({f.f_code.co_name})"
            self._scope()
            self.steps.append(("guard", arr, value, what, internal, _where()))
            self.guards += 1
            return
        act = {"print": "printing a Tensor", "bool": "a Python branch on a Tensor (bool() reads Tensor.item())"}.get(
            what, f"Tensor.{what}()")
        self.fail(f"{act} copies a value to the host, which a captured graph cannot do: the graph "
                  f"replays device work only, so the value would be frozen at capture time. Move it out of "
                  f"the captured region (read static outputs after replay())")

    def fail(self, msg: str):
        """Abort the capture (state restored, mode popped) and raise, naming the user's line."""
        err = CaptureError(f"{msg}. Raised during graph capture at {_where()}")
        self.graph._abort(err)
        raise err

    # ------------------------------------------------------------ the end of capture
    def restore(self) -> None:
        """Put every static array written during capture back as it was (capture only records)."""
        for r, snap in self.saved.values():
            r[...] = snap
        self.saved.clear()

    def optimizer_drift(self) -> str | None:
        for opt, before in self.optimizers:
            after = _numbers(opt)
            for key, v in after.items():
                if before.get(key) != v:
                    name, state_key = key
                    return (f"{type(opt).__name__}.step() ran during capture and advanced its state "
                            f"'{state_key}' ({before.get(key)} -> {v}), a Python number: every replay would "
                            f"reuse the value from capture time (PyTorch needs capturable=True here). Capture "
                            f"an optimizer whose state is all tensors (SGD), or keep step() out of the graph")
        return None


def _exact(ufunc, arrays, dst, xp) -> bool:
    """The ufunc reproduces the op's output exactly (dtype, shape and values) on the capture's inputs.
    On the meta device there are no values: dtype and shape decide (comparing the zero-stride
    placeholders element by element walked every virtual element: 39 s for tutorial 07's plan)."""
    if not all(_is_array(a) or type(a) in (int, float, bool) for a in arrays):
        return False
    try:
        chk = ufunc(*arrays)
    except (TypeError, ValueError):
        return False
    if getattr(chk, "dtype", None) != dst.dtype or getattr(chk, "shape", None) != dst.shape:
        return False
    return not has_data(xp) or bool(xp.array_equal(chk, dst, equal_nan=True))


def _numbers(opt) -> dict:
    out = {}
    for p, st in opt.state.items():
        if isinstance(st, dict):
            for k, v in st.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out[(id(p), k)] = v
    return out
