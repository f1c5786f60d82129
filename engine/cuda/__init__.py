"""``tapelab.cuda``: PyTorch's ``torch.cuda`` surface, backed by cupy.

Works with or without cupy and a GPU: ``is_available()`` is False (never raising) when cupy
is missing or no CUDA device/driver exists; queries such as ``device_count()`` return 0 and
``manual_seed`` does nothing (as in PyTorch); everything that needs a GPU (streams, events,
memory stats, ``synchronize``, ``set_device``) raises
``RuntimeError("tapelab.cuda needs cupy and a CUDA device: <why>")``.

The names PyTorch added later (session 21: ``seed``/``initial_seed``, ``memory_stats`` and its kin,
``set_per_process_memory_fraction``, ``init``, ``cudart`` ...) answer without cupy as PyTorch built
without CUDA does (its ``AssertionError("Torch not compiled with CUDA enabled")``, its AttributeError,
or its defaults: ``memory_stats()`` empty, ``get_arch_list()`` [], ``seed()`` a no-op), and with cupy but
no GPU with the RuntimeError above. The submodules ``memory``, ``random``, ``streams`` and ``graphs``
hold this module's objects; ``nvtx`` and ``profiler`` go to cupy's NVTX and profiler API.

Random numbers of tapelab tensors on cuda are drawn by the host generator and copied over, so
``tapelab.manual_seed`` makes cpu and cuda runs draw the same values. ``default_generators`` (one
tapelab Generator per GPU, a random op's ``generator=`` on cuda) carry the cuda seeds:
``cuda.manual_seed``/``seed``/``initial_seed`` set and read them, and seeding one seeds cupy's own
generator (``cupy.random``) on its device for code that uses it directly. ``get_rng_state`` is the
host generator's state, the one cuda tensors draw from.
"""
from __future__ import annotations

import collections
import os
import warnings
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
           "seed", "seed_all", "initial_seed", "default_generators", "memory_stats", "memory_stats_as_nested_dict",
           "reset_accumulated_memory_stats", "max_memory_cached", "memory_cached", "reset_max_memory_cached",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction", "memory_snapshot",
           "list_gpu_processes", "init", "get_arch_list", "get_gencode_flags", "is_tf32_supported", "device_of",
           "set_stream", "get_sync_debug_mode", "set_sync_debug_mode", "ipc_collect", "can_device_access_peer",
           "clock_rate", "utilization", "memory_usage", "temperature", "power_draw", "device_memory_used",
           "host_memory_stats", "host_memory_stats_as_nested_dict", "reset_peak_host_memory_stats",
           "reset_accumulated_host_memory_stats", "caching_allocator_alloc", "caching_allocator_delete",
           "caching_allocator_enable", "get_allocator_backend", "current_blas_handle", "current_solver_handle",
           "cudart", "check_error", "has_half", "has_magma", "memory", "random", "streams", "graphs", "nvtx",
           "profiler", *CUDA_LEGACY]

# the legacy typed constructors on cuda (constructing one without a GPU raises PyTorch's TypeError)
FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor, \
    BoolTensor = CUDA_LEGACY.values()


# ---------------------------------------------------------------- errors a program names in `except`
# (torch.cuda.OutOfMemoryError is torch.OutOfMemoryError: Pytorch-UNet's train.py catches it around training)
class CudaError(RuntimeError):
    """An error code from the CUDA runtime, as ``torch.cuda.CudaError(code)``: "<cuda's message> (code)"
    with cupy, "CUDA error code <code>" without."""

    def __init__(self, code: int) -> None:
        msg = _error_string(code)
        super().__init__(msg if msg.startswith("CUDA error code") else f"{msg} ({code})")


class DeferredCudaCallError(Exception):
    """A queued CUDA call that failed at lazy initialization (``torch.cuda.DeferredCudaCallError``)."""


# ---------------------------------------------------------------- PyTorch's answers without CUDA (session 21)
# Without cupy tapelab.cuda answers as a PyTorch built without CUDA: the names that initialise CUDA
# first raise its AssertionError, those whose binding such a build lacks its AttributeError. With cupy
# but no device or driver (PyTorch's CUDA build on a machine without a GPU) they raise tapelab's
# RuntimeError, as the older names of this module do in both cases.
_NOT_COMPILED = "Torch not compiled with CUDA enabled"


def _cupy_missing() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("cupy") is None
    except (ImportError, ValueError):
        return True


def _lazy_init():
    """cupy, or PyTorch's error of a first use of CUDA where there is none."""
    if cuda_available():
        return require_cuda()
    if _cupy_missing():
        raise AssertionError(_NOT_COMPILED)
    return require_cuda()      # raises: cupy is there, a device or driver is not


def _unbound(binding: str):
    """cupy, or the error of a name whose binding PyTorch's build without CUDA lacks (``torch._C``'s)."""
    if cuda_available():
        return require_cuda()
    if _cupy_missing():
        raise AttributeError(f"module 'torch._C' has no attribute '{binding}'")
    return require_cuda()


def init() -> None:
    """Initialise CUDA (cupy's runtime); PyTorch's error without one."""
    _lazy_init()


has_half: bool = True      # PyTorch's constants (half is a cuda dtype of cupy's too)
has_magma: bool = False


# ---------------------------------------------------------------- devices (issue 9)
def is_available() -> bool:
    """True when cupy is installed and a CUDA device and driver are present. Never raises."""
    return cuda_available()


def is_initialized() -> bool:
    return cuda_available()


def __getattr__(name: str):
    """``torch.cuda._initialized``, which libraries read as a flag (linear-attention-transformer's
    reversible layers record the cuda RNG state only when it is set): ``is_initialized()``;
    ``default_generators``, made at the first use (probing cupy at import would slow every import)."""
    if name == "_initialized":
        return is_initialized()
    if name == "default_generators":
        return _generators()
    raise AttributeError(f"module 'torch.cuda' has no attribute '{name}'")


def __dir__() -> list:
    return sorted(set(globals()) | {"default_generators", "_initialized"})


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


class device_of(device):
    """``with device_of(t):`` makes ``t``'s cuda device current for the block (a no-op for a cpu tensor)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


def can_device_access_peer(device, peer_device) -> bool:
    """Whether ``device`` can read ``peer_device``'s memory directly (the CUDA runtime's answer)."""
    cupy = _lazy_init()
    i, j = _index(device), _index(peer_device)
    n = device_count()
    if not 0 <= i < n:
        raise AssertionError("Invalid device id")
    if not 0 <= j < n:
        raise AssertionError("Invalid peer device id")
    return bool(cupy.cuda.runtime.deviceCanAccessPeer(i, j))


def get_arch_list() -> list[str]:
    """The architectures kernels are built for: cupy compiles each kernel for the device it runs on, so
    the ``sm_XY`` of the devices present ([] without a GPU, as PyTorch's build without CUDA)."""
    if not cuda_available():
        return []
    import cupy
    return sorted({f"sm_{cupy.cuda.Device(i).compute_capability}" for i in range(device_count())},
                  key=lambda a: int(a[3:]))


def get_gencode_flags() -> str:
    """``get_arch_list`` as nvcc's ``-gencode`` flags ('' without a GPU)."""
    return " ".join(f"-gencode compute=compute_{arch},code={kind}_{arch}"
                    for kind, arch in (a.split("_") for a in get_arch_list()))


def is_tf32_supported() -> bool:
    """Whether the current device computes in TF32 natively (compute capability 8.0 and up); False
    without a GPU."""
    return cuda_available() and get_device_capability()[0] >= 8


def current_blas_handle() -> int:
    """cuBLAS's handle of the current device (cupy's)."""
    cupy = _lazy_init()
    return int(cupy.cuda.device.get_cublas_handle())


def current_solver_handle() -> int:
    """cuSOLVER's handle of the current device (cupy's)."""
    cupy = _lazy_init()
    return int(cupy.cuda.device.get_cusolver_handle())


class _CudaRT:
    """``torch.cuda.cudart()``: the runtime calls programs make through it (profiling's start and stop
    around a region for Nsight, error strings), over cupy's runtime."""

    class cudaError:
        success = 0
        memoryAllocation = 2

    def __init__(self, cupy):
        self._rt = cupy.cuda.runtime

    def cudaProfilerStart(self) -> int:
        self._rt.profilerStart()
        return 0

    def cudaProfilerStop(self) -> int:
        self._rt.profilerStop()
        return 0

    def cudaGetErrorString(self, code: int) -> str:
        return _error_string(code)


def _error_string(code: int) -> str:
    try:
        import cupy
        return str(cupy.cuda.runtime.CUDARuntimeError(int(code))).partition(": ")[2] or f"CUDA error code {code}"
    except Exception:
        return f"CUDA error code {code}"


def cudart() -> _CudaRT:
    return _CudaRT(_lazy_init())


def check_error(res: int) -> None:
    """Raise ``CudaError`` for a CUDA runtime result other than success."""
    if not cuda_available() and _cupy_missing():     # PyTorch's build without CUDA has no _cudart
        raise AttributeError("'NoneType' object has no attribute 'cudaError'")
    require_cuda()
    if res != _CudaRT.cudaError.success:
        raise CudaError(res)


_SYNC_DEBUG = [0]


def set_sync_debug_mode(debug_mode) -> None:
    """Record PyTorch's sync debug mode ("default"/0, "warn"/1, "error"/2). tapelab does not (yet) warn
    at the host reads that synchronise; ``get_sync_debug_mode`` returns what was set."""
    _lazy_init()
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = modes[debug_mode]
    _SYNC_DEBUG[0] = int(debug_mode)


def get_sync_debug_mode() -> int:
    _lazy_init()
    return _SYNC_DEBUG[0]


# ---------------------------------------------------------------- random: the cuda generators (session 21)
class _CudaGenerator(_random.Generator):
    """``torch.cuda.default_generators[i]``: a tapelab Generator on ``cuda:i`` (a ``generator=`` of a
    random op on cuda draws from it) whose seeding also seeds cupy's own generator on that device."""

    def __init__(self, index: int):
        self.index = index
        super().__init__(f"cuda:{index}")

    def manual_seed(self, seed: int) -> "_CudaGenerator":
        super().manual_seed(seed)
        cupy = require_cuda()
        with cupy.cuda.Device(self.index):
            cupy.random.seed(self._seed)
        return self


_GENERATORS: list = []   # [tuple of _CudaGenerator], made at the first use with a GPU


def _generators() -> tuple:
    """``default_generators``: one per device with a GPU; () without (as PyTorch's before CUDA starts)."""
    if not cuda_available():
        return ()
    if not _GENERATORS:
        _GENERATORS.append(tuple(_CudaGenerator(i) for i in range(cuda_device_count())))
    return _GENERATORS[0]


def manual_seed(seed: int) -> None:
    """Seed the current device's cuda generator (and cupy's) when a GPU is present; without one a
    no-op, as PyTorch's (it queues the call for a lazy initialisation that never comes)."""
    seed = int(seed)
    if cuda_available():
        _generators()[current_device()].manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed every device's cuda generator (a no-op without a GPU)."""
    seed = int(seed)
    for g in _generators():
        g.manual_seed(seed)


def seed() -> None:
    """Seed the current device's cuda generator with a random number (a no-op without a GPU)."""
    if cuda_available():
        _generators()[current_device()].seed()


def seed_all() -> None:
    """Seed every device's cuda generator with one random number (a no-op without a GPU)."""
    gens = _generators()
    if gens:
        s = gens[0].seed()
        for g in gens[1:]:
            g.manual_seed(s)


def initial_seed() -> int:
    """The current device's cuda seed (PyTorch's default 67280421310721 until seeded)."""
    _lazy_init()
    return _generators()[current_device()].initial_seed()


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


# ---------------------------------------------------------------- memory (issue 9, session 21)
# cupy's default memory pool is tapelab's caching allocator: memory_allocated is the bytes of
# live blocks (pool.used_bytes), memory_reserved what the pool holds from the driver
# (pool.total_bytes). cupy keeps no peaks or totals, so tapelab wraps the pool's malloc (installed the
# first time a memory statistic is asked for) and records, per device, the peaks, the bytes handed out
# and taken from the driver, and the out-of-memory errors; every statistic below reads these and the
# pool, so memory_stats() agrees with memory_allocated() and its kin.
class _Counters:
    __slots__ = ("peak", "peak_reserved", "allocated", "reserved", "base", "base_reserved", "ooms")

    def __init__(self, used: int = 0, total: int = 0):
        self.peak, self.peak_reserved = used, total
        self.allocated = self.reserved = self.ooms = 0     # since the counters started or were reset
        self.base, self.base_reserved = used, total        # what the pool held when they started


_STATS: dict = {}      # device index -> _Counters
_TRACKING: list = []


def _counters(pool, dev: int) -> _Counters:
    st = _STATS.get(dev)
    if st is None:
        st = _STATS[dev] = _Counters(int(pool.used_bytes()), int(pool.total_bytes()))
    return st


def _pool():
    cupy = require_cuda()
    pool = cupy.get_default_memory_pool()
    if not _TRACKING:
        oom = getattr(cupy.cuda.memory, "OutOfMemoryError", MemoryError)

        def malloc(size):
            total = pool.total_bytes()            # O(1); used_bytes walks the live blocks: once a call
            try:
                mem = pool.malloc(size)
            except oom:
                _counters(pool, int(cupy.cuda.Device().id)).ooms += 1
                raise
            used, total_now = pool.used_bytes(), pool.total_bytes()
            block = getattr(getattr(mem, "mem", None), "size", size)   # the pool's rounded block
            st = _STATS.get(mem.device_id)
            if st is None:
                st = _STATS[mem.device_id] = _Counters(used - block, total)
            st.allocated += block
            st.reserved += max(0, total_now - total)
            st.peak = max(st.peak, used)
            st.peak_reserved = max(st.peak_reserved, total_now)
            return mem
        cupy.cuda.set_allocator(malloc)
        _TRACKING.append(malloc)
    return pool


def _on(device) -> tuple:
    """(pool, device index, its counters) with the device current, for reading the pool."""
    pool, i = _pool(), _index(device)
    import cupy
    with cupy.cuda.Device(i):
        return pool, i, _counters(pool, i)


def _read(device, what: str) -> int:
    pool, i, st = _on(device)
    import cupy
    with cupy.cuda.Device(i):
        used, total = int(pool.used_bytes()), int(pool.total_bytes())
    st.peak, st.peak_reserved = max(st.peak, used), max(st.peak_reserved, total)
    return {"used": used, "total": total, "peak": st.peak, "peak_reserved": st.peak_reserved}[what]


def memory_allocated(device=None) -> int:
    """Bytes held by live tensors (and other cupy arrays) on ``device``; 0 without a GPU, as PyTorch's
    statistics read before CUDA initialises (gpt-fast prints the memory used after a cpu run)."""
    return _read(device, "used") if cuda_available() else 0


def max_memory_allocated(device=None) -> int:
    """The peak of ``memory_allocated`` since start-up or ``reset_peak_memory_stats``."""
    return _read(device, "peak") if cuda_available() else 0


def memory_reserved(device=None) -> int:
    """Bytes the caching allocator holds from the driver (allocated plus cached free blocks); 0 without
    a GPU."""
    return _read(device, "total") if cuda_available() else 0


def max_memory_reserved(device=None) -> int:
    """The peak of ``memory_reserved`` since start-up or ``reset_peak_memory_stats``; 0 without a GPU."""
    return _read(device, "peak_reserved") if cuda_available() else 0


def memory_cached(device=None) -> int:
    """Deprecated ``memory_reserved``, with PyTorch's FutureWarning."""
    warnings.warn("`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`", FutureWarning,
                  stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated ``max_memory_reserved``, with PyTorch's FutureWarning."""
    warnings.warn("`torch.cuda.max_memory_cached` has been renamed to `torch.cuda.max_memory_reserved`",
                  FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    """Restart the peaks (allocated and reserved) from the current values."""
    pool, i, st = _on(device)
    st.peak, st.peak_reserved = memory_allocated(i), memory_reserved(i)


reset_max_memory_allocated = reset_peak_memory_stats


def reset_max_memory_cached(device=None) -> None:
    warnings.warn("torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, which resets "
                  "/all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    """Restart the accumulated statistics (bytes allocated and freed, out-of-memory errors)."""
    _unbound("_cuda_resetAccumulatedMemoryStats")
    pool, i, st = _on(device)
    st.allocated = st.reserved = st.ooms = 0
    st.base, st.base_reserved = memory_allocated(i), memory_reserved(i)


def memory_stats(device=None) -> dict:
    """PyTorch's allocator statistics, as a flat ``OrderedDict`` sorted by key; empty without a GPU (as
    PyTorch's before CUDA initialises).

    From cupy's pool: ``allocated_bytes`` (``active_bytes`` and ``requested_bytes`` are the same here:
    cupy neither splits blocks between streams nor keeps the requested sizes) and ``reserved_bytes``,
    each ``.all.{current, peak, allocated, freed}`` (``allocated``/``freed``: totals since the counters
    started or ``reset_accumulated_memory_stats``), ``num_ooms``; ``num_alloc_retries`` is 0 (cupy's
    retry after freeing cached blocks is not counted) and ``max_split_size`` -1 (no limit)."""
    if not cuda_available():
        return collections.OrderedDict()
    pool, i, st = _on(device)
    used, total = memory_allocated(i), memory_reserved(i)
    stats = {"num_ooms": st.ooms, "num_alloc_retries": 0, "max_split_size": -1}
    moved = {"allocated_bytes": (used, st.peak, st.allocated, st.allocated + st.base - used),
             "reserved_bytes": (total, st.peak_reserved, st.reserved, st.reserved + st.base_reserved - total)}
    moved["active_bytes"] = moved["requested_bytes"] = moved["allocated_bytes"]
    for name, values in moved.items():
        for stat, v in zip(("current", "peak", "allocated", "freed"), values):
            stats[f"{name}.all.{stat}"] = max(0, int(v))
    return collections.OrderedDict(sorted(stats.items()))


def memory_stats_as_nested_dict(device=None) -> dict:
    """``memory_stats`` as PyTorch nests it: ``{"allocated_bytes": {"all": {"current": ...}}, ...}``."""
    nested: dict = {}
    for key, v in memory_stats(device).items():
        *path, last = key.split(".")
        d = nested
        for p in path:
            d = d.setdefault(p, {})
        d[last] = v
    return nested


def memory_snapshot(mempool_id=None, include_traces: bool = True) -> list:
    """The allocator's segments, as PyTorch's snapshot lists them: here one summary segment per device
    that has used the pool (cupy does not expose its segments), ``blocks`` empty."""
    _unbound("_cuda_memorySnapshot")
    _pool()
    segments = []
    for i in sorted(_STATS):
        used, total = memory_allocated(i), memory_reserved(i)
        segments.append({"device": i, "address": 0, "total_size": total, "allocated_size": used,
                         "active_size": used, "requested_size": used, "stream": 0, "segment_type": "large",
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": []})
    return segments


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Cap the pool on ``device`` at ``fraction`` of its memory (cupy's ``MemoryPool.set_limit``); an
    allocation past it raises ``OutOfMemoryError``."""
    cupy = _lazy_init()
    i = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    pool = _pool()
    with cupy.cuda.Device(i):
        # cupy reads a limit of 0 as "none": a fraction of 0 allows one byte, which no block fits
        pool.set_limit(size=max(1, int(fraction * mem_get_info(i)[1])) if fraction < 1 else 0)


def get_per_process_memory_fraction(device=None) -> float:
    """The cap ``set_per_process_memory_fraction`` set on ``device`` (1.0: none)."""
    cupy = _lazy_init()
    i = _index(device)
    pool = _pool()
    with cupy.cuda.Device(i):
        limit = int(pool.get_limit())
    return 1.0 if limit == 0 else (0.0 if limit == 1 else limit / mem_get_info(i)[1])


_RAW: dict = {}     # pointer -> cupy MemoryPointer handed out by caching_allocator_alloc


def caching_allocator_alloc(size: int, device=None, stream=None) -> int:
    """``size`` bytes from the caching allocator (cupy's pool) on ``device``; the pointer as an int, to
    give back with ``caching_allocator_delete``."""
    cupy = _lazy_init()
    i = _index(device)
    _pool()
    with cupy.cuda.Device(i):
        if stream is not None:
            with (stream._s if isinstance(stream, Stream) else stream):
                mem = cupy.cuda.alloc(int(size))
        else:
            mem = cupy.cuda.alloc(int(size))
    _RAW[int(mem.ptr)] = mem
    return int(mem.ptr)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Give back a block of ``caching_allocator_alloc`` to the pool."""
    _unbound("_cuda_cudaCachingAllocator_raw_delete")
    if _RAW.pop(int(mem_ptr), None) is None:
        raise RuntimeError(f"invalid device pointer: {int(mem_ptr):#x}")


def caching_allocator_enable(value: bool = True) -> None:
    """Accepted (PyTorch's build without CUDA ignores it too); cupy's pool stays in use."""
    if cuda_available():
        _pool()


def get_allocator_backend() -> str:
    """``"native"``: PyTorch's name of its caching allocator, which cupy's pool stands for here."""
    _unbound("_cuda_getAllocatorBackend")
    return "native"


def host_memory_stats() -> dict:
    """Empty: tapelab's pinned tensors are ordinary host arrays, with no caching host allocator to
    count (PyTorch's is empty before CUDA initialises too)."""
    return collections.OrderedDict()


def host_memory_stats_as_nested_dict() -> dict:
    return {}


def reset_accumulated_host_memory_stats() -> None:
    _unbound("_cuda_resetAccumulatedHostMemoryStats")


def reset_peak_host_memory_stats() -> None:
    _unbound("_cuda_resetPeakHostMemoryStats")


def empty_cache() -> None:
    """Give the pool's cached free blocks back to the driver (a no-op without a GPU, as in PyTorch)."""
    if cuda_available():
        import cupy
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()


def ipc_collect() -> None:
    """Nothing to collect: tapelab shares no cuda memory between processes (PyTorch's error without CUDA)."""
    _lazy_init()


# ---------------------------------------------------------------- NVML queries (session 21)
# As PyTorch's, these read nvidia-ml-py (pynvml) and raise its ModuleNotFoundError without it;
# device_memory_used needs only cupy (the driver's used memory, total - free).
_NO_NVML = "nvidia-ml-py does not seem to be installed or it can't be imported."


def _nvml(device, index: bool = False):
    """(pynvml, handle of ``device``), with its NVML index when ``index``; or PyTorch's errors."""
    try:
        import pynvml
    except ImportError as e:
        raise ModuleNotFoundError(_NO_NVML) from e
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_DriverNotLoaded as e:
        raise RuntimeError("cuda driver can't be loaded, is cuda enabled?") from e
    _lazy_init()
    i = _index(device)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v.strip() for v in visible.split(",")]
        if all(v.lstrip("-").isdigit() for v in ids) and i < len(ids):
            i = int(ids[i])
    handle = pynvml.nvmlDeviceGetHandleByIndex(i)
    return (pynvml, handle, i) if index else (pynvml, handle)


def list_gpu_processes(device=None) -> str:
    """The processes using ``device`` and their memory, as PyTorch prints them (through pynvml)."""
    try:
        import pynvml
    except ImportError:
        return "pynvml module not found, please install nvidia-ml-py"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_DriverNotLoaded:
        return "cuda driver can't be loaded, is cuda enabled?"
    nv, handle, i = _nvml(device, index=True)
    procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
    lines = [f"GPU:{i}"]      # NVML's index, as PyTorch prints it
    if len(procs) == 0:
        lines.append("no processes are running")
    for p in procs:
        lines.append(f"process {p.pid:>10d} uses {p.usedGpuMemory / (1024 * 1024):>12.3f} MB GPU memory")
    return "\n".join(lines)


def clock_rate(device=None) -> int:
    """The SM clock in MHz (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetClockInfo(h, 1)       # NVML_CLOCK_SM


def utilization(device=None) -> int:
    """Percent of the last sample period in which a kernel ran (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetUtilizationRates(h).gpu


def memory_usage(device=None) -> int:
    """Percent of the last sample period in which device memory was read or written (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetUtilizationRates(h).memory


def temperature(device=None) -> int:
    """The GPU's temperature in degrees Celsius (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetTemperature(h, 0)     # NVML_TEMPERATURE_GPU


def power_draw(device=None) -> int:
    """The GPU's power draw in milliwatts (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetPowerUsage(h)


def device_memory_used(device=None) -> int:
    """Bytes of device memory in use by all processes: the driver's total minus free (with a GPU; without
    one PyTorch's pynvml error)."""
    if cuda_available():
        free, total = mem_get_info(device)
        return total - free
    _nvml(device)
    raise AssertionError(_NOT_COMPILED)      # pynvml present: _nvml has raised PyTorch's error already


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


# torch.cuda's submodules (``import torch.cuda.nvtx``, ``torch.cuda.memory.memory_stats``): the
# namespaces hold this module's objects, nvtx and profiler their own
from . import graphs, memory, nvtx, profiler, random, streams  # noqa: E402
