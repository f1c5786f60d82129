"""The cuda half of a Graph: the captured program's replay, stream-captured into a ``cupy.cuda.Graph``.

Everything cupy-specific about capture lives in ``StreamGraph`` (and ``stream_graph``, which
decides whether to build one). After the dispatcher-level recording (the same on every
device) has produced the program, its replay function runs once inside
``stream.begin_capture()``/``end_capture()`` on a non-default stream (capture on the legacy
default stream raises): the kernels it would launch are recorded, not run, into one
``cupy.cuda.Graph``, and ``Graph.replay()`` launches that (``graph.launch(stream)``).

cupy's memory pool is not capture-aware (cupy#9655): memory freed after capture goes back to
the pool while the graph's kernels still read and write it. So every allocation made during
the stream capture (the temporaries of ops without an ``out=`` form) goes through an allocator
that keeps its pointer, and ``StreamGraph`` holds those pointers (and the Graph holds every
program buffer) until ``reset()``.

Without stream capture (no GPU, the simulated device, an old cupy or HIP without
``Stream.begin_capture``, or a program with replay guards, which read values on the host)
``stream_graph`` returns None and the Graph replays the program itself: same buffers, same
results, one Python call per step.
"""
from __future__ import annotations

from ._capture import CaptureError

__all__ = ["StreamGraph", "stream_graph"]


def stream_graph(program, device, cp=None):
    """A ``StreamGraph`` of ``program`` on cuda ``device``, or None where stream capture is unavailable."""
    if program.guards:
        return None                         # a guard reads a value on the host at every replay
    cp = cp if cp is not None else _cupy()
    if cp is None:
        return None                         # the simulated device, or no GPU
    if not hasattr(cp.cuda.Stream, "begin_capture") or getattr(cp.cuda.runtime, "is_hip", False):
        return None
    return StreamGraph(program.run, device, cp)


def _cupy():
    """cupy when a GPU is usable, else None (tests substitute a stand-in here)."""
    from ..device import cuda_available
    if not cuda_available():
        return None
    import cupy
    return cupy


class StreamGraph:
    """``run`` (the program's replay) captured on a side stream into one ``cupy.cuda.Graph``."""

    def __init__(self, run, device, cp):
        self._cp = cp
        self.held: list = []                # every allocation made during capture, kept until reset
        pool = cp.get_default_memory_pool()

        def alloc(size):
            mem = pool.malloc(size)
            self.held.append(mem)
            return mem

        with cp.cuda.Device(device.index):
            self.stream = cp.cuda.Stream(non_blocking=True)
            # the capture must follow the work already queued (the static inputs' last writes)
            self.stream.wait_event(cp.cuda.get_current_stream().record())
            failure = None
            with cp.cuda.using_allocator(alloc), self.stream:
                self.stream.begin_capture()
                try:
                    run()
                except Exception as e:  # noqa: BLE001 - re-raised below, after the capture is closed
                    failure = e
                finally:
                    try:
                        graph = self.stream.end_capture()
                    except Exception as e:  # noqa: BLE001
                        failure = failure or e
                        graph = None
        if failure is not None:
            self.held.clear()
            raise CaptureError(
                f"CUDA stream capture of the recorded program failed on {device}: {type(failure).__name__}: "
                f"{failure}. Something in the captured step synchronizes with the host or cannot run inside "
                f"a CUDA graph. Capture with Graph(device, stream_capture=False) to replay the recorded "
                f"program without a CUDA graph") from failure
        self.graph = graph

    @property
    def nbytes(self) -> int:
        """Bytes allocated during the stream capture (temporaries the graph's kernels use)."""
        return sum(int(m.mem.size) if hasattr(m, "mem") else 0 for m in self.held)

    def launch(self) -> None:
        """Replay the captured kernels on the current stream."""
        self.graph.launch(self._cp.cuda.get_current_stream())

    def release(self) -> None:
        self.graph = None
        self.held.clear()
