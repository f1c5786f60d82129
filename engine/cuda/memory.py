"""``torch.cuda.memory``: the caching allocator's statistics and controls (cupy's memory pool
stands for PyTorch's caching allocator)."""
from __future__ import annotations

import collections
import warnings

from ._runtime import (_index, _lazy_init, _unbound, cuda_available, is_initialized, list_gpu_processes,  # noqa: F401
                       mem_get_info, require_cuda)
from .streams import Stream

__all__ = ["caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_enable",
           "get_per_process_memory_fraction", "set_per_process_memory_fraction", "empty_cache", "memory_stats",
           "memory_stats_as_nested_dict", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
           "reset_max_memory_allocated", "reset_max_memory_cached", "host_memory_stats",
           "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_cached",
           "max_memory_cached", "memory_snapshot", "memory_summary", "list_gpu_processes", "mem_get_info",
           "get_allocator_backend"]


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


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """The caching allocator's state in a few lines (allocated, peak, reserved, device free/total)."""
    i = _index(device)
    free, total = mem_get_info(i)
    mib = 1 << 20
    rows = [("allocated", memory_allocated(i)), ("peak allocated", max_memory_allocated(i)),
            ("reserved (cupy pool)", memory_reserved(i)), ("device free", free), ("device total", total)]
    return f"tapelab.cuda memory summary, device {i}\n" + "\n".join(f"  {k:22s} {v / mib:12.1f} MiB" for k, v in rows)
