"""CUDA stream capture on the simulated cuda device: what a real capture records, allows and refuses.

A real ``cupy.cuda.Stream.begin_capture()`` records kernels instead of running them, and
``end_capture()`` returns a graph that re-launches them. The simulated device computes with
numpy at once, so its capture runs each call and also records it (``note``): a call that
writes in place (``out=``, ``copyto``, ``a[k] = v``, a method returning None) is re-run at
replay; a call whose result is new memory is re-run into that same memory; a call that
returns a view of memory it was given launches nothing and is not replayed. ``launch()``
re-runs the records in order: a replay computes from the buffers' current contents, so a
step that only worked because Python ran it at capture time (a host value, a branch) gives
wrong values here as on a GPU. A real capture changes no memory, so every array a captured
call writes is snapshotted before its first write (``before``) and put back by ``end_capture``.

What cupy refuses while a stream captures, this refuses too (``check``): library calls that
go through cuBLAS or cuSOLVER (cupy raises "calling cuBLAS API during stream capture is
currently unsupported"), and reading a device value on the host (``.get()``, ``float(a)``,
``.item()``: a synchronizing copy, ``cudaErrorStreamCaptureUnsupported``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["SimStream", "SimGraph", "capturing", "check", "before", "note", "host_read", "REFUSED"]

# functions cupy computes through cuBLAS on float operands; of numpy.linalg's module, all but ``norm``
# (a reduction in cupy) go through cuBLAS or cuSOLVER
_CUBLAS = frozenset({"matmul", "dot", "vdot", "inner", "tensordot", "einsum", "__matmul__", "__rmatmul__"})
REFUSED = "calling cuBLAS API during stream capture is currently unsupported"
_ALLOCATE = frozenset({"empty", "empty_like"})     # memory without a kernel: nothing to replay

_ACTIVE: list = []          # the _Capture in progress (at most one)


class _Capture:
    def __init__(self):
        self.records: list = []
        self.saved: dict = {}           # id(root array) -> (root, its contents before the capture)


def capturing() -> bool:
    return bool(_ACTIVE)


def _floats(args) -> bool:
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.kind in "fc":
            return True
        if isinstance(a, (tuple, list)) and _floats(a):
            return True
    return False


def check(name: str, args, module: str = "numpy") -> None:
    """Refuse, as cupy does inside a stream capture, a call that would reach cuBLAS/cuSOLVER."""
    if (name in _CUBLAS or (module.startswith("numpy.linalg") and name != "norm")) and _floats(args):
        raise NotImplementedError(f"{REFUSED} (cupy; simulated cuda device: {module}.{name})")


def host_read(what: str) -> None:
    """A device-to-host read during capture: cupy's synchronizing copy fails the capture."""
    if _ACTIVE:
        raise RuntimeError(f"cudaErrorStreamCaptureUnsupported: operation not permitted when stream is "
                           f"capturing ({what} reads a device value on the host; simulated cuda device)")


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _roots(tree, out: set) -> set:
    if isinstance(tree, np.ndarray):
        out.add(id(_root(tree)))
    elif isinstance(tree, (tuple, list)):
        for x in tree:
            _roots(x, out)
    elif isinstance(tree, dict):
        for x in tree.values():
            _roots(x, out)
    elif isinstance(tree, slice):
        _roots((tree.start, tree.stop, tree.step), out)
    return out


def before(args, kwargs, owner=None) -> None:
    """Snapshot the memory the next call may write (its ``out``, else the array whose method it
    is, else its first argument), once per capture, for ``end_capture`` to put back."""
    target = kwargs.get("out", owner if owner is not None else (args[0] if args else None))
    saved = _ACTIVE[-1].saved
    for a in target if isinstance(target, tuple) else (target,):
        if isinstance(a, np.ndarray):
            r = _root(a)
            if id(r) not in saved and r.flags.writeable:
                saved[id(r)] = (r, r.copy())


def note(fn, name: str, args, kwargs, res, owner=None):
    """Record one call made during capture (``args``/``kwargs`` as ``fn`` got them, ``owner`` the
    array whose method it is); returns its result, a numpy scalar turned into a 0-d array (cupy's
    reductions stay on the device)."""
    records = _ACTIVE[-1].records
    if isinstance(res, np.generic):
        res = np.asarray(res)
        records.append((_Fresh(fn), args, kwargs, (res,)))
        return res
    if res is None or "out" in kwargs:
        records.append((fn, args, kwargs, None))          # writes in place: run again
        return res
    items = res if isinstance(res, (tuple, list)) else (res,)
    arrays = [r for r in items if isinstance(r, np.ndarray)]
    if not arrays or name in _ALLOCATE:
        return res
    given = _roots((args, kwargs, owner), set())
    fresh = tuple(r if id(_root(r)) not in given else None for r in items if isinstance(r, np.ndarray))
    if any(r is not None for r in fresh):
        records.append((fn, args, kwargs, fresh))           # new memory: recompute into it
    return res


class _Fresh:
    """A call whose numpy scalar result became a 0-d array: replay returns it as an array."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return np.asarray(self.fn(*args, **kwargs))


class SimGraph:
    """The calls recorded by one capture (``cupy.cuda.Graph``): ``launch`` re-runs them."""

    def __init__(self, records: list):
        self.records = records

    def launch(self, stream=None) -> None:
        for fn, args, kwargs, fresh in self.records:
            res = fn(*args, **kwargs)
            if fresh is None:
                continue
            items = res if isinstance(res, (tuple, list)) else (res,)
            for dst, r in zip(fresh, (r for r in items if isinstance(r, np.ndarray))):
                if dst is not None:
                    np.copyto(dst, r, casting="unsafe")

    def __len__(self) -> int:
        return len(self.records)


class _Event:
    def synchronize(self):
        pass


class SimStream:
    """``cupy.cuda.Stream`` as far as capture needs it."""

    null = None

    def __init__(self, non_blocking: bool = False):
        self.non_blocking = non_blocking
        self.ptr = 0 if not non_blocking else id(self)
        self._records = None

    def record(self, event=None):
        return _Event()

    def wait_event(self, event) -> None:
        pass

    def synchronize(self) -> None:
        host_read("Stream.synchronize()")

    def __enter__(self):
        _CURRENT.append(self)
        return self

    def __exit__(self, *exc):
        _CURRENT.pop()
        return False

    def is_capturing(self) -> bool:
        return self._records is not None

    def begin_capture(self, mode=None) -> None:
        if not self.non_blocking and self.ptr == 0:
            raise RuntimeError("cudaErrorStreamCaptureUnsupported: capture on the legacy default stream "
                               "(simulated cuda device)")
        if _ACTIVE:
            raise RuntimeError("a stream capture is already in progress (simulated cuda device)")
        self._records = _Capture()
        _ACTIVE.append(self._records)

    def end_capture(self) -> SimGraph:
        cap, self._records = self._records, None
        _ACTIVE.pop()
        for root, snap in cap.saved.values():       # a capture records; it changes no memory
            root[...] = snap
        return SimGraph(cap.records)


_DEFAULT = SimStream()
_CURRENT: list = []


def get_current_stream() -> SimStream:
    return _CURRENT[-1] if _CURRENT else _DEFAULT
