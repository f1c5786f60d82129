"""``tapelab.cuda``: PyTorch's ``torch.cuda`` surface, backed by cupy.

Works with or without cupy and a GPU: ``is_available()`` is False (never raising) when cupy
is missing or no CUDA device/driver exists; queries such as ``device_count()`` return 0 and
``manual_seed`` does nothing (as in PyTorch); everything that needs a GPU (streams, events,
memory stats, ``synchronize``, ``set_device``) raises
``RuntimeError("tapelab.cuda needs cupy and a CUDA device: <why>")``.

Random numbers of tapelab tensors on cuda are drawn by the host generator and copied over, so
``tapelab.manual_seed`` makes cpu and cuda runs draw the same values; ``cuda.manual_seed``
seeds cupy's own generator (``cupy.random``) for code that uses it directly.
"""
from __future__ import annotations

from collections import namedtuple

from .._torch_extra import OutOfMemoryError
from ..amp import cuda as amp
from ..core.creation import CUDA_LEGACY
from ..core import random as _random
from ..graphs import Graph
from ..base.device import cuda_available, cuda_device_count, cuda_unavailable_reason, device as _device, require_cuda

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "get_device_name",
           "synchronize", "Stream", "Event", "current_stream", "default_stream", "stream", "StreamContext",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "empty_cache", "manual_seed",
           "manual_seed_all", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
           "is_initialized", "get_device_properties", "get_device_capability", "mem_get_info",
           "memory_summary", "is_bf16_supported", "amp", "OutOfMemoryError", "CudaError", "DeferredCudaCallError",
           "CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle", "is_current_stream_capturing",
           *CUDA_LEGACY]

# the legacy typed constructors on cuda (constructing one without a GPU raises PyTorch's TypeError)
FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor, \
    BoolTensor = CUDA_LEGACY.values()


# ---------------------------------------------------------------- errors a program names in `except`
# (torch.cuda.OutOfMemoryError is torch.OutOfMemoryError: Pytorch-UNet's train.py catches it around training)
class CudaError(RuntimeError):
    """An error code from the CUDA runtime, as ``torch.cuda.CudaError(code)``."""

    def __init__(self, code: int) -> None:
        super().__init__(f"CUDA error code {code}")


class DeferredCudaCallError(Exception):
    """A queued CUDA call that failed at lazy initialization (``torch.cuda.DeferredCudaCallError``)."""


# ---------------------------------------------------------------- devices (issue 9)
def is_available() -> bool:
    """True when cupy is installed and a CUDA device and driver are present. Never raises."""
    return cuda_available()


def is_initialized() -> bool:
    return cuda_available()


def __getattr__(name: str):
    """``torch.cuda._initialized``, which libraries read as a flag (linear-attention-transformer's
    reversible layers record the cuda RNG state only when it is set): ``is_initialized()``."""
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module 'torch.cuda' has no attribute '{name}'")


def device_count() -> int:
    """Number of CUDA devices (0 without cupy or a GPU; never raises)."""
    return cuda_device_count()


def _index(dev) -> int:
    """A device index from None (current), an int, a string or a ``tapelab.device``."""
    if dev is None:
        return current_device()
    if isinstance(dev, int):
        return dev
    d = _device(dev)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return d.index


def current_device() -> int:
    return int(require_cuda().cuda.Device().id)


def set_device(dev) -> None:
    """Make ``dev`` (int, 'cuda:N' or a device) the current CUDA device."""
    cupy = require_cuda()
    i = _index(dev) if dev is not None else 0
    n = device_count()
    if not 0 <= i < n:
        raise RuntimeError(f"CUDA error: invalid device ordinal: {i} (device_count() is {n})")
    cupy.cuda.Device(i).use()


class device:
    """Context manager that changes the current device: ``with tapelab.cuda.device(1): ...``."""

    def __init__(self, dev):
        self.idx = _index(dev) if dev is not None else -1
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            if self.prev != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev != self.idx:
            set_device(self.prev)
        return False


def get_device_name(dev=None) -> str:
    cupy = require_cuda()
    props = cupy.cuda.runtime.getDeviceProperties(_index(dev))
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


_DeviceProperties = namedtuple("_CudaDeviceProperties", ["name", "major", "minor", "total_memory",
                                                        "multi_processor_count"])


def get_device_properties(dev=None):
    """``name``, ``major``/``minor`` (compute capability), ``total_memory`` (bytes),
    ``multi_processor_count`` of a device, from the CUDA runtime."""
    cupy = require_cuda()
    p = cupy.cuda.runtime.getDeviceProperties(_index(dev))
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return _DeviceProperties(name, int(p["major"]), int(p["minor"]), int(p["totalGlobalMem"]),
                             int(p["multiProcessorCount"]))


def get_device_capability(dev=None) -> tuple[int, int]:
    props = get_device_properties(dev)
    return props.major, props.minor


def mem_get_info(dev=None) -> tuple[int, int]:
    """(free, total) bytes of device memory, as the driver reports them."""
    cupy = require_cuda()
    with cupy.cuda.Device(_index(dev)):
        free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """The caching allocator's state in a few lines (allocated, peak, reserved, device free/total)."""
    i = _index(device)
    free, total = mem_get_info(i)
    mib = 1 << 20
    rows = [("allocated", memory_allocated(i)), ("peak allocated", max_memory_allocated(i)),
            ("reserved (cupy pool)", memory_reserved(i)), ("device free", free), ("device total", total)]
    return f"tapelab.cuda memory summary, device {i}\n" + "\n".join(f"  {k:22s} {v / mib:12.1f} MiB" for k, v in rows)


def is_bf16_supported() -> bool:
    """False: tapelab's bfloat16 lives on the cpu (ml_dtypes); cupy has no bfloat16 dtype."""
    return False


def synchronize(dev=None) -> None:
    """Wait for all work on ``dev`` (default: the current device)."""
    cupy = require_cuda()
    cupy.cuda.Device(_index(dev)).synchronize()


def manual_seed(seed: int) -> None:
    """Seed cupy's generator when a GPU is present; a no-op otherwise (as PyTorch's is)."""
    if cuda_available():
        import cupy
        cupy.random.seed(int(seed))


manual_seed_all = manual_seed


def get_rng_state(device="cuda"):
    """The state of the generator cuda tensors draw from: tapelab's host generator (see above)."""
    require_cuda()
    return _random.get_rng_state()


def set_rng_state(new_state, device="cuda") -> None:
    require_cuda()
    _random.set_rng_state(new_state)


def get_rng_state_all() -> list:
    """One state per cuda device (none without a GPU, as PyTorch's on a machine without one)."""
    return [get_rng_state(i) for i in range(cuda_device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# ---------------------------------------------------------------- streams and events (issue 9)
class Stream:
    """A CUDA stream (``cupy.cuda.Stream``); ``with s:`` makes it current for the block."""

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


def stream(stream: Stream | None) -> StreamContext:
    """``with tapelab.cuda.stream(s):`` makes ``s`` current (None: a no-op, as in PyTorch)."""
    return StreamContext(stream)


class Event:
    """A CUDA event for synchronisation and timing (``enable_timing=True`` for ``elapsed_time``)."""

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


# ---------------------------------------------------------------- memory (issue 9)
# cupy's default memory pool is tapelab's caching allocator: memory_allocated is the bytes of
# live blocks (pool.used_bytes), memory_reserved what the pool holds from the driver
# (pool.total_bytes). cupy keeps no peak, so tapelab wraps the pool's malloc (installed the
# first time a memory statistic is asked for) and records the peak per device.
_PEAK: dict = {}
_TRACKING: list = []


def _pool():
    cupy = require_cuda()
    if not _TRACKING:
        pool = cupy.get_default_memory_pool()
        peak = _PEAK

        def malloc(size):
            mem = pool.malloc(size)
            dev = mem.device_id
            used = pool.used_bytes()
            if used > peak.get(dev, 0):
                peak[dev] = used
            return mem
        cupy.cuda.set_allocator(malloc)
        _TRACKING.append(malloc)
    return cupy.get_default_memory_pool()


def memory_allocated(device=None) -> int:
    """Bytes held by live tensors (and other cupy arrays) on ``device``; 0 without a GPU, as PyTorch's
    statistics read before CUDA initialises (gpt-fast prints the memory used after a cpu run)."""
    if not cuda_available():
        return 0
    pool, i = _pool(), _index(device)
    import cupy
    with cupy.cuda.Device(i):
        return int(pool.used_bytes())


def max_memory_allocated(device=None) -> int:
    """The peak of ``memory_allocated`` since start-up or ``reset_peak_memory_stats``."""
    now = memory_allocated(device)
    if not cuda_available():
        return now
    i = _index(device)
    _PEAK[i] = max(_PEAK.get(i, 0), now)
    return _PEAK[i]


def memory_reserved(device=None) -> int:
    """Bytes the caching allocator holds from the driver (allocated plus cached free blocks); 0 without
    a GPU."""
    if not cuda_available():
        return 0
    pool, i = _pool(), _index(device)
    import cupy
    with cupy.cuda.Device(i):
        return int(pool.total_bytes())


def max_memory_reserved(device=None) -> int:
    return memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    i = _index(device)
    _PEAK[i] = memory_allocated(i)


reset_max_memory_allocated = reset_peak_memory_stats


def empty_cache() -> None:
    """Give the pool's cached free blocks back to the driver (a no-op without a GPU, as in PyTorch)."""
    if cuda_available():
        import cupy
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()


def unavailable_reason() -> str:
    """Why ``is_available()`` is False ('' when it is True)."""
    return cuda_unavailable_reason()


# ---------------------------------------------------------------- graphs: tapelab.graphs bound to "cuda" (issue 6)
class CUDAGraph(Graph):
    """``torch.cuda.CUDAGraph``: a ``tapelab.graphs.Graph`` on device "cuda" (a class, as libraries
    annotate with it and test ``isinstance``)."""

    def __init__(self, keep_graph: bool = False):
        require_cuda()
        super().__init__("cuda", keep_graph=keep_graph)


def graph(cuda_graph, pool=None, stream=None, capture_error_mode: str = "global"):
    """``torch.cuda.graph``: capture the ``with`` block into ``cuda_graph``."""
    from .. import graphs
    return graphs.graph(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode)


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool=None):
    """``torch.cuda.make_graphed_callables``: ``tapelab.graphs.make_graphed_callables`` on "cuda"."""
    require_cuda()
    from .. import graphs
    return graphs.make_graphed_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool,
                                         device="cuda")


def graph_pool_handle():
    """``torch.cuda.graph_pool_handle``: a pool to share between captures."""
    from .. import graphs
    return graphs.graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """True while a graph capture is in progress."""
    from .. import graphs
    return graphs.is_current_stream_capturing()
