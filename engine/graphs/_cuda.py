"""The cuda half of a Graph: the captured program's replay, stream-captured into ``cupy.cuda.Graph``s.

Everything cupy-specific about capture lives in ``StreamGraph`` (and ``stream_graph``, which
decides whether to build one). After the dispatcher-level recording (the same on every
device) has produced the program, its steps run once inside ``stream.begin_capture()``/
``end_capture()`` on a non-default stream (capture on the legacy default stream raises): the
kernels they would launch are recorded, not run, and ``Graph.replay()`` launches them
(``graph.launch(stream)``). cupy (14) refuses cuBLAS calls during a capture, so the steps run
there with their ``matmul``/``dot`` taken by a ``kernels.cublaslt.GemmRoute`` (cuBLASLt on the capturing
stream, a workspace allocated before the capture): the whole program is one graph (an einsum
of two operands is one GEMM too). A call that is still refused (an ``einsum`` of three or more
operands, ``linalg``; every GEMM where no route is available, i.e. without nvmath-python) splits
the capture: graphs for the runs of steps between such calls, which run eagerly between them
(as vLLM's piecewise graphs run attention between graphs).

cupy's memory pool is not capture-aware (cupy#9655): memory freed after capture goes back to
the pool while the graph's kernels still read and write it. So every allocation made during
the stream capture (the temporaries of ops without an ``out=`` form) goes through an allocator
that keeps its pointer, and ``StreamGraph`` holds those pointers (and the Graph holds every
program buffer) until ``reset()``.

The simulated cuda device models a stream capture (``base/simcapture.py``: it records and
replays the calls, refuses cuBLAS and host reads as cupy does), so this path runs on CPU and a
GEMM that would break the graph fails a test there. Without stream capture (no GPU, an old cupy
or HIP without ``Stream.begin_capture``, or a program with replay guards, which read values on
the host) ``stream_graph`` returns None and the Graph replays the program itself: same buffers,
same results, one Python call per step.
"""
from __future__ import annotations

from ._capture import CaptureError
from ..kernels.cublaslt import gemm_route

__all__ = ["StreamGraph", "stream_graph"]


def stream_graph(program, device, cp=None):
    """A ``StreamGraph`` of ``program`` on cuda ``device``, or None where stream capture is unavailable."""
    if program.guards:
        return None                         # a guard reads a value on the host at every replay
    cp = cp if cp is not None else _cupy(device)
    if cp is None:
        return None                         # the simulated device, or no GPU
    if not hasattr(cp.cuda.Stream, "begin_capture") or getattr(cp.cuda.runtime, "is_hip", False):
        return None
    route, why = gemm_route(cp, device)
    steps = program.step_functions(route.substitute if route is not None else None)
    return StreamGraph(steps, device, cp, route=route, why=why)


def _cupy(device):
    """cupy (or the simulated device's stand-in) when ``device`` computes with it, else None
    (tests substitute a stand-in here)."""
    from ..base.backend import is_cupy
    from ..base.simarray import _SimNamespace
    xp = device.xp
    return xp if is_cupy(xp) or (isinstance(xp, _SimNamespace) and hasattr(xp, "cuda")) else None


def _refused(e: Exception) -> bool:
    """cupy's refusal to call a library (cuBLAS: matmul, einsum) inside a stream capture."""
    return isinstance(e, NotImplementedError) and "during stream capture is currently unsupported" in str(e)


class StreamGraph:
    """The program's steps captured on a side stream into ``cupy.cuda.Graph``s.

    ``route`` (a ``GemmRoute``, whose workspace this holds) runs the steps' GEMMs inside the
    capture; a step that still makes a call cupy refuses runs eagerly between graphs: the
    capture is then piecewise, one graph for each run of steps between two such calls
    (``segments``: graphs and eager steps, in program order). ``why``: why there is no route."""

    def __init__(self, steps: list, device, cp, route=None, why: str = ""):
        self._cp = cp
        self.route, self.why = route, why
        self.held: list = []                # every allocation made during capture, kept until reset
        self.segments: list = []            # cupy.cuda.Graph, or a step function run eagerly
        pool = cp.get_default_memory_pool()

        def alloc(size):
            mem = pool.malloc(size)
            self.held.append(mem)
            return mem

        with cp.cuda.Device(device.index):
            self.stream = cp.cuda.Stream(non_blocking=True)
            # the capture must follow the work already queued (the static inputs' last writes)
            self.stream.wait_event(cp.cuda.get_current_stream().record())
            with cp.cuda.using_allocator(alloc), self.stream:
                i = 0
                while i < len(steps):
                    held = len(self.held)
                    graph, stop = self._capture(steps, i, len(steps), device)
                    if stop < len(steps):           # steps[stop] refused: capture up to it, run it eagerly
                        del self.held[held:]        # (the attempt's graph holds part of steps[stop])
                        if stop > i:
                            graph, _ = self._capture(steps, i, stop, device)
                            self.segments.append(graph)
                        self.segments.append(steps[stop])
                        i = stop + 1
                    else:
                        self.segments.append(graph)
                        i = stop

    def _capture(self, steps, start: int, end: int, device):
        """Capture ``steps[start:end]`` into one graph; returns (graph, index of a refused step or end)."""
        failure, stop = None, end
        self.stream.begin_capture()
        try:
            for k in range(start, end):
                try:
                    steps[k]()
                except Exception as e:  # noqa: BLE001 - sorted below, after the capture is closed
                    if not _refused(e):
                        raise
                    stop = k
                    break
        except Exception as e:  # noqa: BLE001 - re-raised below, after the capture is closed
            failure = e
        finally:
            try:
                graph = self.stream.end_capture()
            except Exception as e:  # noqa: BLE001
                failure, graph = failure or e, None
        if failure is not None:
            self.held.clear()
            raise CaptureError(
                f"CUDA stream capture of the recorded program failed on {device}: {type(failure).__name__}: "
                f"{failure}. Something in the captured step synchronizes with the host or cannot run inside "
                f"a CUDA graph. Capture with Graph(device, stream_capture=False) to replay the recorded "
                f"program without a CUDA graph") from failure
        return graph, stop

    @property
    def nbytes(self) -> int:
        """Bytes allocated during the stream capture (temporaries the graph's kernels use)."""
        return sum(int(m.mem.size) if hasattr(m, "mem") else 0 for m in self.held)

    @property
    def eager_steps(self) -> int:
        """Steps run between graphs (calls cupy refuses in a capture), out of all the program's steps."""
        return sum(not hasattr(seg, "launch") for seg in self.segments)

    @property
    def graphs(self) -> int:
        """CUDA graphs a replay launches (1 when no step had to run outside a graph)."""
        return sum(hasattr(seg, "launch") for seg in self.segments)

    def launch(self) -> None:
        """Replay: each graph launched, each eager step run, in order, on the current stream."""
        stream = self._cp.cuda.get_current_stream()
        for seg in self.segments:
            if hasattr(seg, "launch"):
                seg.launch(stream)
            else:
                seg()

    def release(self) -> None:
        self.segments = []
        self.held.clear()
        self.route = None
