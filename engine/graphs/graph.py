"""``Graph``: capture the work of a step once, replay it with CUDA Graph semantics on any device."""
from __future__ import annotations

import time

from ..base import events
from ..base.device import device as _device
from ..base.dispatch_state import STATE
from ..core.dispatch import pop_mode, push_mode
from ..core.node import AccumulateGrad, OpNode
from ..core.tensor import Tensor
from . import _capture
from ._capture import CaptureError, CaptureMode, _label, _np_root, _where, root_key
from ._program import Program

# Graph.buffers() kinds: what each buffer of a captured program is
BUFFER_KINDS = ("static_input", "state", "static_output", "pool", "constant")

__all__ = ["Graph", "graph", "MemPool", "graph_pool_handle", "is_current_stream_capturing", "CaptureError"]

# The capturing Graph, at most one per process (capture's simulated-array table is shared).
# A capture records the thread that began it: its mode is on that thread's mode stack, so
# other threads' ops are not captured, and that thread's ``STATE.capturing`` names it.
_ACTIVE: list = []


def is_current_stream_capturing() -> bool:
    """True while this thread is capturing a graph (the current stream is per thread)."""
    return bool(STATE.capturing)


class MemPool:
    """A graph memory pool: owns the buffers of the graphs captured into it until they ``reset()``.

    Graphs may share one (``pool=g1.pool()``) if they always replay in capture order.
    """

    def __init__(self):
        self._owners: dict[int, dict] = {}   # id(graph) -> {id(array): array}

    @property
    def nbytes(self) -> int:
        """Bytes of buffers held for the graphs of this pool."""
        return sum(int(a.nbytes) for bufs in self._owners.values() for a in bufs.values())

    @property
    def n_graphs(self) -> int:
        return len(self._owners)

    def _add(self, g, buffers: dict) -> None:
        self._owners[id(g)] = buffers

    def _release(self, g) -> None:
        self._owners.pop(id(g), None)

    def __repr__(self) -> str:
        return f"MemPool(graphs={self.n_graphs}, nbytes={self.nbytes})"


def graph_pool_handle() -> MemPool:
    """A new pool to share between captures (``torch.cuda.graph_pool_handle``)."""
    return MemPool()


class Graph:
    """A captured program of tensor work, replayed without dispatch (``torch.cuda.CUDAGraph``).

    Capture (``graph(g)`` or ``capture_begin``/``capture_end``) records every op the
    region runs, including backward and optimizer steps, and leaves parameters and other
    existing tensors as they were: capture records work, it does not do it. Tensors made
    during capture are the graph's static outputs; each ``replay()`` recomputes them in
    place from the current contents of the static inputs (tensors made before capture),
    so feed data with ``static_in.copy_(x)`` and read ``static_out`` after ``replay()``.

    On cuda the recorded program's replay is then stream-captured into one
    ``cupy.cuda.Graph`` that ``replay()`` launches, its GEMMs included (cuBLASLt, see
    ``_cuda.py`` and ``kernels/cublaslt.py``); the simulated cuda device models that capture. Where
    stream capture is unavailable (HIP, a program with replay guards) the program itself is
    replayed, with the same buffers and results.

    Args:
        device: where the captured work runs ("cpu" or "cuda").
        stream_capture: on cuda, capture the program into a ``cupy.cuda.Graph`` (default);
            False replays the recorded program op by op.

    Attributes:
        replays: replays since capture; ``last_replay_us``, ``total_replay_us``: host time
            of the last replay and of all of them, in microseconds (on cuda a replay
            launches the graph asynchronously: synchronize to time the device work).

    >>> static_x = tapelab.zeros(8, 4)
    >>> g = tapelab.graphs.Graph()
    >>> with tapelab.graphs.graph(g):
    ...     static_y = (static_x * 2).relu()
    >>> static_x.copy_(tapelab.randn(8, 4)); g.replay()   # static_y now holds relu(2 x)
    """

    def __init__(self, device="cpu", keep_graph: bool = False, stream_capture: bool = True):
        self.device = _device(device) if not isinstance(device, _device) else device
        if self.device.type == "cuda":
            from ..base.simarray import _SimNamespace
            from ..base.device import cuda_available
            if not cuda_available() and not isinstance(self.device._xp, _SimNamespace):
                raise RuntimeError("tapelab.graphs.Graph(device='cuda') needs cupy and a CUDA GPU, and none is "
                                   "available here; capture on device='cpu'")
        self._mode = None
        self._capturing: list = []   # the capturing thread's STATE.capturing, while capturing
        self._program = None
        self._pool = None
        self._statics: tuple = ()
        self._error = None
        self._stream_capture = stream_capture
        self._exec = None            # the StreamGraph launched by replay() on cuda, if any
        self._catalog = None
        self.replays = 0
        self.last_replay_us = 0.0
        self.total_replay_us = 0.0

    # ------------------------------------------------------------ capture
    def capture_begin(self, pool: MemPool | None = None, capture_error_mode: str = "global") -> None:
        """Start recording (prefer the ``graph`` context manager)."""
        if _ACTIVE:
            raise CaptureError(f"a graph capture is already in progress (begun at {_ACTIVE[0]._begun}); only one "
                               f"capture may be active at a time. End it first (at {_where()})")
        if self._program is not None:
            raise RuntimeError("this Graph already holds a capture; call reset() before capturing again")
        if pool is not None and not isinstance(pool, MemPool):
            raise TypeError(f"pool must be a MemPool from Graph.pool() or graph_pool_handle(), got "
                            f"{type(pool).__name__}")
        self._pool = pool if pool is not None else MemPool()
        self._error = None
        self._begun = _where()
        self._mode = CaptureMode(self, getattr(self, "_names", None))
        _ACTIVE.append(self)
        self._capturing = STATE.capturing   # this thread's
        self._capturing.append(self)
        push_mode(self._mode)

    def capture_end(self) -> None:
        """Finish recording: restore what capture wrote and build the replay program."""
        if self._mode is None:
            if self._error is not None:
                raise CaptureError(f"the capture was aborted: {self._error}")
            raise RuntimeError("capture_end() without capture_begin()")
        mode = self._stop()
        drift = mode.optimizer_drift()
        if drift is not None:
            err = CaptureError(f"{drift}. Raised at the end of capture ({_where()})")
            self._error = err
            raise err
        program = Program(mode, _private(mode) if self.device.type == "cpu" else frozenset())
        if self.device.type == "cuda" and self._stream_capture:
            from ._cuda import stream_graph
            try:
                self._exec = stream_graph(program, self.device)
            except CaptureError as e:
                self._error = e
                raise
        self._program = program
        self._statics = tuple(mode.statics.values())
        self._catalog = _Catalog(program, self._statics, mode)
        self._pool._add(self, self._program.buffers)
        if events.has_subscribers("capture_done"):
            events.emit("capture_done", {**self.summary(), "graph": self})

    def _stop(self):
        mode, self._mode = self._mode, None
        pop_mode(mode)
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self in self._capturing:
            self._capturing.remove(self)
        mode.restore()
        _capture._SIM_ROOTS.clear()
        return mode

    def _abort(self, err) -> None:
        """Called when capture fails: stop recording, restore state, keep the reason."""
        if self._mode is not None:
            self._stop()
        self._error = err

    # ------------------------------------------------------------ replay
    def replay(self) -> None:
        """Run the captured work again on the current contents of the static inputs."""
        if self._program is None:
            raise RuntimeError("replay() on a Graph with no capture (capture it first, or it was reset())")
        if STATE.capturing:
            raise CaptureError(f"replay() during a capture (begun at {STATE.capturing[0]._begun}): a replay runs outside "
                               f"the dispatcher, so the capture would not record it. Replay before or after")
        for t, arr, dev, name in self._statics:
            if t._data is not arr or t._device is not dev:
                self._bad_static(t, arr, dev, name)
        t0 = time.perf_counter_ns()
        if self._exec is not None:
            self._exec.launch()
        else:
            self._program.run()
        dt = (time.perf_counter_ns() - t0) / 1e3
        self.replays += 1
        self.last_replay_us = dt
        self.total_replay_us += dt

    def _bad_static(self, t, arr, dev, name):
        now = f"{_label(t._data)} on {t._device}"
        was = f"{_label(arr)} on {dev}"
        change = (f"it was captured as {was} and is now {now}" if now != was else
                  f"it still is {was}, but holds a different buffer than the one captured")
        raise CaptureError(f"Graph.replay(): {name} no longer holds its captured buffer: {change}. A captured "
                           f"graph reads and writes the buffers it captured; feed new data in place with "
                           f"static.copy_(x) instead of rebinding the tensor (.data = ..., set_), or capture again")

    def reset(self) -> None:
        """Drop the captured program and give its buffers back (tensors you still hold keep theirs)."""
        if self._mode is not None:
            self._abort(CaptureError("reset() during capture"))
        if self._pool is not None:
            self._pool._release(self)
        if self._exec is not None:
            self._exec.release()
        self._exec = None
        self._program = None
        self._catalog = None
        self._statics = ()
        self.replays = 0
        self.last_replay_us = 0.0
        self.total_replay_us = 0.0

    def pool(self) -> MemPool:
        """This graph's memory pool, to share with a later capture (``graph(g2, pool=g1.pool())``)."""
        if self._pool is None:
            raise RuntimeError("pool() before capture_begin(): the pool is made when capture begins")
        return self._pool

    # ------------------------------------------------------------ what was captured
    @property
    def captured(self) -> bool:
        """True while the graph holds a capture (after ``capture_end``, until ``reset``)."""
        return self._program is not None

    @property
    def stream_captured(self) -> bool:
        """True when ``replay()`` launches ``cupy.cuda.Graph``s (cuda with stream capture)."""
        return self._exec is not None

    @property
    def eager_steps(self) -> int:
        """Steps that ``replay()`` runs between CUDA graphs (calls cupy refuses in a capture: an
        ``einsum`` of three or more operands, or every matmul where no capture-legal GEMM route is
        installed)."""
        return self._exec.eager_steps if self._exec is not None else 0

    @property
    def cuda_graphs(self) -> int:
        """CUDA graphs one ``replay()`` launches: 1 for a whole captured step, 0 without stream capture."""
        return self._exec.graphs if self._exec is not None else 0

    def buffers(self) -> list[dict]:
        """Every buffer the captured program reads or writes, one entry per memory block.

        Each is ``{"name", "shape", "dtype", "device", "kind", "bytes", "static_name",
        "aliases"}``: ``name`` is the program's name for it (as in ``source`` and
        ``nodes()``); ``kind`` is one of

        - ``static_input``: existed before capture and is only read (data, frozen weights);
        - ``state``: existed before capture and is written in place by every replay
          (parameters and optimizer state of a training step);
        - ``static_output``: allocated at capture and still held by a live tensor (the
          outputs you read after ``replay()``, gradients made during capture);
        - ``pool``: allocated at capture, held only by the graph (intermediates);
        - ``constant``: made during capture by a factory (``zeros``, the backward seed):
          read by reference, refilled at each replay's start if the program writes it.

        ``static_name`` is the graph's name for a static input (its error messages use it),
        ``aliases`` maps every program name viewing this memory to ``{"shape", "dtype"}``.
        """
        return self._catalog.buffers() if self._catalog is not None else []

    def buffer_name(self, t) -> str | None:
        """The program's name of the buffer holding ``t``'s memory (a Tensor or an array), or None."""
        if self._catalog is None:
            return None
        arr = getattr(t, "_data", t)
        return self._catalog.by_key.get(root_key(arr)) if hasattr(arr, "shape") else None

    @property
    def source(self) -> str:
        """The generated replay function (one line per step)."""
        return self._program.source if self._program is not None else ""

    def nodes(self) -> list[dict]:
        """The captured steps: ``{"kind", "op", "inputs", "outputs", "where", "module"}`` each (``where``
        the user's line, ``module`` the module path the step ran in, "" outside any)."""
        return list(self._program.nodes) if self._program is not None else []

    def summary(self) -> dict:
        """What was captured, as plain data: ``device``, ``nodes``, ``static_inputs`` (names),
        ``pool_nbytes``, ``pool_graphs``, ``pool_shared_nbytes``, ``buffers`` (``buffers()``
        without aliases), ``replays``, ``last_replay_us``, ``total_replay_us``, ``stream_captured``,
        ``eager_steps``, ``cuda_graphs``, ``gemm_route`` (the library the captured GEMMs run in, or
        None) and ``gemm_fallback`` (why there is none, "" otherwise)."""
        p, ex = self._program, self._exec
        pool = self._pool if p is not None else None
        return {"device": str(self.device), "nodes": self.nodes(),
                "static_inputs": [name for _, _, _, name in self._statics],
                "pool_nbytes": p.nbytes if p is not None else 0,
                "pool_graphs": pool.n_graphs if pool is not None else 0,
                "pool_shared_nbytes": pool.nbytes if pool is not None else 0,
                "buffers": [{k: v for k, v in b.items() if k != "aliases"} for b in self.buffers()],
                "replays": self.replays, "last_replay_us": self.last_replay_us,
                "total_replay_us": self.total_replay_us, "stream_captured": self._exec is not None,
                "eager_steps": self.eager_steps, "cuda_graphs": self.cuda_graphs,
                "gemm_route": ex.route.name if ex is not None and ex.route is not None else None,
                "gemm_fallback": ex.why if ex is not None else ""}

    def __repr__(self) -> str:
        if self._program is None:
            return f"Graph(device={self.device}, not captured)"
        return (f"Graph(device={self.device}, steps={len(self._program.nodes)}, "
                f"static_inputs={len(self._statics)}, pool={self._program.nbytes} bytes)")


def _private(mode) -> frozenset:
    """Root keys of the intermediates nobody outside the graph can read: no tensor the capture
    made is still alive over them, and no autograd graph such a tensor leads to keeps them
    saved. Empty when a live tensor's graph holds values in a node this walk cannot read."""
    held, nodes, seen = set(), [], set()
    inter = {root_key(b.arr) for b in mode.bufs.values() if b.kind == "inter"}
    for ref, _key in mode.outputs:
        t = ref()
        if t is None:
            continue
        held.add(root_key(t._data))
        if t.grad_fn is not None:
            nodes.append(t.grad_fn)
    while nodes:
        node = nodes.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is AccumulateGrad:
            continue
        if not isinstance(node, OpNode):
            return frozenset()
        if node.inputs is not None:
            held.update(root_key(a._data) for a in node.inputs if isinstance(a, Tensor))
        if node.out_data is not None:
            held.add(root_key(node.out_data))
        nodes.extend(e[0] for e in node.edges if e is not None)
    return frozenset(inter - held)


class _Catalog:
    """The buffers of one captured program, by memory block (see ``Graph.buffers``)."""

    def __init__(self, program: Program, statics: tuple, mode):
        kinds = {}
        for b in mode.bufs.values():
            kinds.setdefault(root_key(b.arr), b.kind)
        named: dict[int, str] = {}
        for _, arr, _, name in statics:
            k = root_key(arr)
            if k not in named or named[k].startswith("a static input "):    # a given name wins
                named[k] = name
        written = {root_key(program.ns[o]) for n in program.nodes for o in n["outputs"]}
        self.entries: dict[int, dict] = {}
        self.by_key: dict[int, str] = {}
        for name, a in program.ns.items():
            if not name.startswith("b") or not _capture._is_array(a):
                continue
            k = root_key(a)
            e = self.entries.get(k)
            if e is None:
                root = _np_root(a._a if type(a) is _capture.SimArray else a)
                kind = kinds.get(k, "const")
                kind = {"static": "state" if k in written else "static_input", "inter": "pool",
                        "const": "constant"}[kind]
                e = self.entries[k] = {"name": name, "shape": [int(d) for d in root.shape],
                                       "dtype": str(root.dtype), "device": str(mode.graph.device), "kind": kind,
                                       "bytes": int(root.nbytes), "static_name": named.get(k), "aliases": {}}
                self.by_key[k] = name
            e["aliases"][name] = {"shape": [int(d) for d in a.shape], "dtype": str(a.dtype)}
        # the Tensors the captured ops made over pool memory, weakly: a buffer one of them still
        # holds is a static output, the others only the graph holds
        pool = {k for k, e in self.entries.items() if e["kind"] == "pool"}
        self.outputs = [(ref, k) for ref, k in mode.outputs if k in pool and ref() is not None]

    def buffers(self) -> list[dict]:
        held = set()
        for ref, k in self.outputs:
            t = ref()
            if t is not None and root_key(t._data) == k:
                held.add(k)
        out = []
        for k, e in self.entries.items():
            e = {**e, "aliases": {n: dict(v) for n, v in e["aliases"].items()}}
            if e["kind"] == "pool" and k in held:
                e["kind"] = "static_output"
            out.append(e)
        return out


class graph:
    """Capture the region into ``cuda_graph`` (``torch.cuda.graph``): ``with graph(g): ...``."""

    def __init__(self, cuda_graph: Graph, pool: MemPool | None = None, stream=None,
                 capture_error_mode: str = "global"):
        self.g, self.pool = cuda_graph, pool

    def __enter__(self):
        self.g.capture_begin(self.pool)
        return self.g

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.g.capture_end()
        elif self.g._mode is not None:
            self.g._abort(exc)
        return False
