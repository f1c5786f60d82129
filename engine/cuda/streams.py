"""``torch.cuda.streams``: ``Stream``, ``Event`` and the current stream (cupy's)."""
from __future__ import annotations

from ._runtime import _index, require_cuda

__all__ = ["Stream", "Event"]


# ---------------------------------------------------------------- streams and events (issue 9)
class Stream:
    """A CUDA stream (``cupy.cuda.Stream``); ``with s:`` makes it current for the block."""
    __module__ = "tapelab.cuda"   # where programs name it

    def __init__(self, device=None, priority: int = 0, *, _wrap=None):
        cupy = require_cuda()
        if _wrap is not None:
            self._s = _wrap
            return
        with cupy.cuda.Device(_index(device)):
            self._s = cupy.cuda.Stream(non_blocking=True, priority=priority) if priority \
                else cupy.cuda.Stream(non_blocking=True)

    def __enter__(self):
        self._s.__enter__()
        return self

    def __exit__(self, *exc):
        return self._s.__exit__(*exc)

    def wait_stream(self, other: "Stream") -> None:
        """Work queued on this stream after the call waits for all work queued on ``other``."""
        self._s.wait_event(other._s.record())

    def wait_event(self, event: "Event") -> None:
        self._s.wait_event(event._e)

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event if event is not None else Event()
        event.record(self)
        return event

    def synchronize(self) -> None:
        self._s.synchronize()

    def query(self) -> bool:
        return bool(self._s.done)

    @property
    def cuda_stream(self) -> int:
        return int(self._s.ptr)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and self._s.ptr == other._s.ptr

    def __hash__(self) -> int:
        return hash(self._s.ptr)

    def __repr__(self) -> str:
        return f"<tapelab.cuda.Stream cuda_stream={self._s.ptr:#x}>"


def current_stream(device=None) -> Stream:
    cupy = require_cuda()
    with cupy.cuda.Device(_index(device)):
        return Stream(_wrap=cupy.cuda.get_current_stream())


def default_stream(device=None) -> Stream:
    cupy = require_cuda()
    return Stream(_wrap=cupy.cuda.Stream.null)


class StreamContext:
    """``with StreamContext(s):`` makes ``s`` current for the block (None: a no-op, as in PyTorch)."""
    __module__ = "tapelab.cuda"   # where programs name it

    def __init__(self, s: Stream | None):
        self.s = s

    def __enter__(self):
        if self.s is not None:
            self.s.__enter__()
        return self.s

    def __exit__(self, *exc):
        if self.s is not None:
            self.s.__exit__(*exc)
        return False


def set_stream(stream: Stream | None) -> None:
    """Make ``stream`` the current stream (of its device); None: a no-op, as in PyTorch."""
    if stream is None:
        return
    stream._s.use()


def stream(stream: Stream | None) -> StreamContext:
    """``with tapelab.cuda.stream(s):`` makes ``s`` current (None: a no-op, as in PyTorch)."""
    return StreamContext(stream)


class Event:
    """A CUDA event for synchronisation and timing (``enable_timing=True`` for ``elapsed_time``)."""
    __module__ = "tapelab.cuda"   # where programs name it

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        cupy = require_cuda()
        self.enable_timing = enable_timing
        self._e = cupy.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)

    def record(self, stream: Stream | None = None) -> None:
        self._e.record(stream._s if stream is not None else None)

    def wait(self, stream: Stream | None = None) -> None:
        (stream if stream is not None else current_stream()).wait_event(self)

    def synchronize(self) -> None:
        self._e.synchronize()

    def query(self) -> bool:
        return bool(self._e.done)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds between this event and ``end`` (both recorded, with timing enabled)."""
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        import cupy
        end._e.synchronize()
        return float(cupy.cuda.get_elapsed_time(self._e, end._e))

    def __repr__(self) -> str:
        return f"<tapelab.cuda.Event enable_timing={self.enable_timing}>"
